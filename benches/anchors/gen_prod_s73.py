#!/usr/bin/env python3
"""Session 73: PyTorch 2.15's `torch.prod` (CPU, one thread) and its gradient,
written to crates/strata-autograd/tests/data/prod_s73.json.gz
(crates/strata-autograd/tests/suite/prod_s73.rs).

Each case: a tensor of 0 to 3 dims (empty ones included) of f32 values drawn
from a pool with zeros, ones, negatives, halves, ±inf and NaN (so slices with
no zero, one zero and several come up), or of i64 or bool values; a dim
(None, a valid one, or one just out of range) and keepdim. Recorded:
PyTorch's result (shape, values) or the fact that it raised, and for f32
the input's gradient for the upstream gradient `u` whose element j is
`((3 j) mod 7 - 3) / 2`.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_prod_s73.py \\
        crates/strata-autograd/tests/data/prod_s73.json.gz
"""
import json
import math
import random
import sys

import torch

from fixture_io import fmt, write_fixture

torch.set_num_threads(1)

SHAPES = [[], [0], [1], [4], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [3, 1, 4], [5, 6]]
POOL = [0.0, 1.0, -1.0, 2.0, 0.5, -3.0, 1.5, -0.25]
RARE = [math.inf, -math.inf, math.nan]


def upstream(shape):
    n = math.prod(shape)
    return torch.tensor([((3 * j) % 7 - 3) / 2 for j in range(n)]).reshape(shape)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/prod_s73.json.gz"
    r = random.Random(7304)
    cases = []
    for _ in range(3000):
        shape = r.choice(SHAPES)
        nd = len(shape)
        n = math.prod(shape)
        dtype = r.choice(["f32"] * 6 + ["i64", "bool"])
        if dtype == "f32":
            p_zero = r.choice([0.0, 0.1, 0.3])
            vals = [0.0 if r.random() < p_zero else
                    (r.choice(RARE) if r.random() < 0.04 else r.choice(POOL[1:])) for _ in range(n)]
            x = torch.tensor(vals, dtype=torch.float32).reshape(shape).requires_grad_(True)
        elif dtype == "i64":
            vals = [r.choice([0, 1, -1, 2, 3, -5, 2 ** 40]) for _ in range(n)]
            x = torch.tensor(vals, dtype=torch.int64).reshape(shape)
        else:
            vals = [r.random() < 0.8 for _ in range(n)]
            x = torch.tensor(vals, dtype=torch.bool).reshape(shape)
        dim = r.choice([None] + list(range(-nd - 1, nd + 1)) if nd else [None, 0, -1, 1, -2])
        keepdim = r.random() < 0.4
        c = {"shape": shape, "dtype": dtype, "values": [fmt(float(v)) for v in vals],
             "dim": dim, "keepdim": keepdim}
        try:
            y = torch.prod(x) if dim is None and not keepdim else \
                torch.prod(x, dim, keepdim=keepdim) if dim is not None else None
            if y is None:
                raise Skip
        except Skip:
            continue
        except Exception as e:  # noqa: BLE001 - PyTorch raises several types
            c["error"] = str(e).split("\n")[0][:200]
            cases.append(c)
            continue
        c["result"] = {"shape": list(y.shape),
                       "data": [fmt(float(v)) for v in y.detach().double().flatten().tolist()]}
        if dtype == "f32":
            y.backward(upstream(list(y.shape)))
            c["grad"] = [fmt(float(v)) for v in x.grad.double().flatten().tolist()]
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_prod_s73.py", "torch": torch.__version__,
           "cases": cases}
    write_fixture(out_path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), out_path))


class Skip(Exception):
    """torch.prod has no keepdim without a dim: such a draw is left out."""


if __name__ == "__main__":
    main()
