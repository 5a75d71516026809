#!/usr/bin/env python3
"""PyTorch's values and gradients of torch.linalg.vector_norm at the edges,
for crates/strata-autograd/tests/suite/norm_edges_s53.rs (session 53; the
fixture crates/strata-autograd/tests/data/norm_edges_s53.json.gz).

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_norm_edges_s53.py \\
        --out crates/strata-autograd/tests/data/norm_edges_s53.json.gz

Each case: an input `x` (dtype, shape, values), an order `p`, `dims`
(null: every dim) and `keepdim`, and an upstream gradient `g` of the
result's shape (deterministic, not all ones, so that the order of the
backward's products shows). PyTorch's answer: the result `out` and the
input's gradient `grad` after `out.backward(g)` (null where PyTorch leaves
`.grad` None: p = 0), or `error` (PyTorch refuses: an infinite or negative
order over zero elements). The cases: zero vectors, vectors with zeros,
+-inf and NaN entries, for p in {2, 1, 0, inf, -inf, 0.5, 1.5, 3, -1, -2,
-0.5, 0.3, nan}; zero-element inputs; single-element reductions (the
`|x|` shortcut); 0-d inputs; ties of |x| for +-inf; dims and keepdim over
2-D and 3-D inputs; f32, f64, f16 and bf16. Values travel as the u64 bits
of their f64 value (exact for every dtype, inf and NaN).
"""

import argparse
import json
import math
import struct

import torch
from fixture_io import write_fixture

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}
INF, NAN = float("inf"), float("nan")
PS = [2.0, 1.0, 0.0, INF, -INF, 0.5, 1.5, 3.0, -1.0, -2.0, -0.5, 0.3, NAN]


def bits(t):
    return [struct.unpack("<Q", struct.pack("<d", v))[0] for v in t.double().flatten().tolist()]


def pstr(p):
    return p if math.isfinite(p) else str(p)


def upstream(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    vals = [0.75 - 0.5 * (i % 3) + 0.125 * i for i in range(n)]
    return torch.tensor(vals, dtype=torch.float64).reshape(shape).to(dtype)


def case(dt, shape, vals, p, dims, keepdim):
    x = torch.tensor(vals, dtype=torch.float64).reshape(shape).to(DT[dt]).requires_grad_()
    c = {"dtype": dt, "shape": shape, "x": bits(x.detach()), "p": pstr(p), "dims": dims,
         "keepdim": keepdim}
    try:
        out = torch.linalg.vector_norm(x, p, dims, keepdim)
    except RuntimeError as e:
        c["error"] = str(e).split("\n")[0]
        return c
    g = upstream(list(out.shape), out.dtype)
    out.backward(g)
    c.update({"out_shape": list(out.shape), "out": bits(out.detach()), "g": bits(g),
              "grad": None if x.grad is None else bits(x.grad)})
    return c


def cases():
    out = []
    vectors = [
        [0.0, 0.0, 0.0],
        [0.0, -0.0],
        [3.0, 0.0, -4.0],
        [3.0, -4.0, 1.5, -0.25],
        [INF, 1.0, -2.0],
        [-INF, 0.0, 2.0],
        [INF, -INF],
        [NAN, 1.0, -2.0],
        [NAN, INF, 0.0],
        [3.0, -3.0, 1.0],
        [0.0, 2.0, -2.0],
        [1e-30, -2e-30, 5e-31],
        [1e20, -3e20],
    ]
    for dt in ["f32", "f64"]:
        for v in vectors:
            for p in PS:
                out.append(case(dt, [len(v)], v, p, None, False))
    for dt in ["f16", "bf16"]:
        for v in [[0.0, 0.0], [3.0, 0.0, -4.0], [INF, 1.0], [NAN, 2.0], [2.0, -2.0, 1.0],
                  [0.5, -1.5, 0.25, 2.0]]:
            for p in PS:
                out.append(case(dt, [len(v)], v, p, None, False))
    # Zero elements: over every dim, and over a dim of size 0 beside a
    # dim of size 2 (an empty gradient, or a result of zeros).
    for p in PS:
        out.append(case("f32", [0], [], p, None, False))
        out.append(case("f32", [2, 0], [], p, [1], True))
        out.append(case("f64", [2, 0], [], p, [1], False))
        out.append(case("f32", [0, 3], [], p, [1], False))
    # A single element reduced (the |x| shortcut), 0-d inputs.
    for x in [0.0, -0.0, -2.5, INF, -INF, NAN, 1.0]:
        for p in PS:
            out.append(case("f32", [1], [x], p, None, False))
            out.append(case("f64", [], [x], p, None, False))
            out.append(case("f32", [2, 1], [x, 3.0], p, [1], False))
    # dims and keepdim, with ties, zeros, inf and NaN in some rows.
    m = [3.0, -3.0, 1.0, 0.0, 0.0, 0.0, 2.0, INF, -1.0, NAN, 0.5, -0.5]
    for p in PS:
        for dims in [None, [0], [1], [-1], [0, 1]]:
            for keep in [False, True]:
                out.append(case("f32", [3, 4], m, p, dims, keep))
        for dims in [[0, 2], [1], [-3, -1]]:
            out.append(case("f64", [2, 3, 2], m, p, dims, True))
            out.append(case("f64", [2, 3, 2], m, p, dims, False))
    return out



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    doc = {"generator": "benches/anchors/gen_norm_edges_s53.py", "torch": torch.__version__,
           "cases": cases()}
    write_fixture(args.out, json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
