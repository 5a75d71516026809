#!/usr/bin/env python3
"""Session 74: PyTorch 2.15's CPU answers (one thread) for F.rms_norm and
F.group_norm, written to crates/strata-autograd/tests/data/norms_s74.json.gz
(crates/strata-autograd/tests/suite/norms_s74.rs, which checks strata's
Tensor and Var forms and the gradients).

rms_norm: inputs of 1 to 4 dims (empty ones included), normalized_shape the
last 1 or 2 dims or a mismatched one, with or without a weight (of the
normalized shape or a wrong one), eps None, 0, 1e-5, 1e-2 or negative.
group_norm: inputs [N, C, *] of 2 to 4 dims (N may be 0), num_groups
dividing C or not, weight and bias [C] or absent or wrong, eps 1e-5, 0 or
0.1. Inputs are f32, f64, f16 or bf16 (sometimes an integer dtype), of
uniform values with some large ones; the weight and bias have the input's
dtype. Recorded: PyTorch's result (dtype, shape, values) or the fact that
it raised, and for f32/f64 inputs the gradients of the input, weight and
bias for the upstream gradient whose element j is `((3 j) mod 7 - 3) / 2`.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_norms_s74.py \\
        crates/strata-autograd/tests/data/norms_s74.json.gz
"""
import json
import math
import random
import sys

import torch
import torch.nn.functional as F

from fixture_io import fmt, write_fixture
import gen_math_s74 as m

torch.set_num_threads(1)


def values(r, n):
    return [r.uniform(-3, 3) if r.random() < 0.9 else r.choice([100.0, -250.0, 0.0, 1e-3]) for _ in range(n)]


def tensor(r, dtype, shape):
    vals = values(r, math.prod(shape))
    t = torch.tensor(vals, dtype=torch.float64).to(m.DTYPES[dtype]).reshape(shape)
    stored = [fmt(float(v)) if dtype not in ("i32", "i64", "u8", "bool") else int(v)
              for v in t.flatten().tolist()]
    return t, {"dtype": dtype, "shape": shape, "values": stored, "t": False}


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/norms_s74.json.gz"
    r = random.Random(7404)
    cases = []
    for _ in range(3000):
        op = r.choice(["rms_norm", "group_norm"])
        dtype = r.choice(["f32", "f32", "f64", "f16", "bf16", "i64"])
        if op == "rms_norm":
            shape = [r.choice([0, 1, 2, 3]) for _ in range(r.randint(1, 4))]
            shape[-1] = r.choice([1, 4, 7, 16])
            k = r.choice([1, 1, 2]) if len(shape) > 1 else 1
            ns = shape[-k:] if r.random() < 0.9 else [shape[-1] + 1]
            args = {"normalized_shape": ns, "eps": r.choice([None, 0.0, 1e-5, 1e-2, -1e-3])}
        else:
            c = r.choice([1, 2, 4, 6, 8])
            shape = [r.choice([0, 1, 2, 3]), c] + [r.choice([1, 2, 5]) for _ in range(r.randint(0, 2))]
            args = {"num_groups": r.choice([1, 2, 3, 4, c]), "eps": r.choice([1e-5, 0.0, 0.1])}
        x, xd = tensor(r, dtype, shape)
        c = {"op": op, "x": xd, "args": args}
        wshape = args["normalized_shape"] if op == "rms_norm" else [shape[1]]
        params = {}
        for name in (["weight"] if op == "rms_norm" else ["weight", "bias"]):
            if r.random() < 0.6:
                ws = wshape if r.random() < 0.93 else [max(1, wshape[-1] - 1)]
                params[name], c[name] = tensor(r, dtype if dtype != "i64" else "f32", ws)

        def call(x, p):
            if op == "rms_norm":
                return F.rms_norm(x, args["normalized_shape"], p.get("weight"), args["eps"])
            return F.group_norm(x, args["num_groups"], p.get("weight"), p.get("bias"), args["eps"])
        try:
            c["result"] = m.tensor_record(call(x, params))
        except Exception as e:  # noqa: BLE001
            c["error"] = str(e).split("\n")[0][:200]
        if "result" in c and dtype in ("f32", "f64"):
            xg = x.clone().requires_grad_(True)
            pg = {k: v.clone().requires_grad_(True) for k, v in params.items()}
            y = call(xg, pg)
            y.backward(m.upstream(list(y.shape)).to(y.dtype))
            c["grad_x"] = [fmt(float(v)) for v in xg.grad.double().flatten().tolist()]
            for k, v in pg.items():
                c["grad_" + k] = [fmt(float(t)) for t in v.grad.double().flatten().tolist()]
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_norms_s74.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
