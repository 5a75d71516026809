#!/usr/bin/env python3
"""Session 82: PyTorch 2.15's CPU answers (one thread) for `torch.isin`
(`elements`, `test_elements` a tensor or a Python scalar, `invert`), in the
format of gen_shape_stats_s79.py (whose drawing and writing it reuses),
written to crates/strata-tensor/tests/data/isin_s82.json.gz
(crates/strata-tensor/tests/suite/isin_s82.rs).

Operands of every strata dtype (bool must fail), shapes with and without
elements, 0-d, transposed operands, test elements of another dtype (the two
are compared in their promoted dtype: i32 300 is not u8 44) or of any
shape, and scalars of each Python kind; values with repeats, signed zeros,
NaN (never found) and infinities. PyTorch 2.15 refuses some transposed
operands (its `view(-1)` in `isin`): the answers recorded are those of
contiguous copies, which strata must give for any layout. To make hits likely, a test tensor of the
elements' dtype half the time holds values drawn from the elements.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_isin_s82.py \\
        crates/strata-tensor/tests/data/isin_s82.json.gz
"""
import sys

import torch

import gen_math_s74 as m
import gen_shape_stats_s79 as s

TEST_SHAPES = [[], [0], [1], [3], [5], [2, 2], [4, 1, 2]]


def case(r, op):
    d = s.some_dtype(r)
    shape = r.choice(s.SHAPES)
    ts = [s.draw(r, d, shape, r.choice(["any", "tame"]))]
    args = {"scalar": None, "invert": r.random() < 0.3}
    u = r.random()
    if u < 0.2:
        args["scalar"] = r.choice([{"int": r.randint(-3, 3)}, {"int": 300}, {"float": 0.5},
                                   {"float": m.fmt(r.choice([-0.0, 1.0, float("nan")]))}, {"bool": True}])
    elif u < 0.6 and ts[0][1]["values"]:
        # Values of the elements (so that some are found), as a tensor of
        # their dtype.
        vals = ts[0][1]["values"]
        picked = [r.choice(vals) for _ in range(r.randint(1, 5))]
        if d in s.FLOATS:
            picked = [float(v) for v in picked]  # "nan", "inf" as stored
        t = torch.tensor(picked, dtype=m.DTYPES[d])
        stored = [m.fmt(float(v)) if d in s.FLOATS else (bool(v) if d == "bool" else int(v)) for v in t.tolist()]
        ts.append((t, {"dtype": d, "shape": [len(picked)], "values": stored, "t": False}))
    else:
        d2 = d if r.random() < 0.5 else s.some_dtype(r)
        ts.append(s.draw(r, d2, r.choice(TEST_SHAPES)))

    def f(*a):
        sc = args["scalar"]
        other = a[1] if sc is None else next(iter(sc.values()))
        if sc is not None and "float" in sc:
            other = float(other)
        # PyTorch 2.15 refuses some transposed operands ("view size is not
        # compatible with input tensor's size and stride", its `view(-1)`):
        # the answer recorded is that of contiguous copies.
        other = other.contiguous() if isinstance(other, torch.Tensor) else other
        return [torch.isin(a[0].contiguous(), other, invert=args["invert"])]

    return ts, args, f, []


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/isin_s82.json.gz"
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 8203
    per_op = int(sys.argv[3]) if len(sys.argv) > 3 else 1500
    s.generate(["isin"], case, "benches/anchors/gen_isin_s82.py", tensor_path, "/dev/null", seed, per_op)


if __name__ == "__main__":
    main()
