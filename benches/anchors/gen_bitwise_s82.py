#!/usr/bin/env python3
"""Session 82: PyTorch 2.15's CPU answers (one thread) for the bitwise ops
`bitwise_and`, `bitwise_or`, `bitwise_xor` (with a tensor or a Python
scalar as the other operand, and their in-place forms) and `bitwise_not`
(and `bitwise_not_`), in the format of gen_shape_stats_s79.py (whose
drawing and writing it reuses), written to
crates/strata-tensor/tests/data/bitwise_s82.json.gz
(crates/strata-tensor/tests/suite/bitwise_s82.rs).

Operands of every strata dtype (floats must fail), shapes with and without
elements, 0-d, transposed operands, other operands that broadcast or do
not, of another dtype (type promotion: i32 & i64 is i64, bool & u8 is u8),
and scalars of each Python kind (bool, int at the edges of each integer
dtype, float). An in-place form's result is its first operand afterwards.
Integer values are compared through f64 (the format's), so the operands
hold values within 2^53 but for a few edges.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_bitwise_s82.py \\
        crates/strata-tensor/tests/data/bitwise_s82.json.gz
"""
import sys

import torch

import gen_math_s74 as m
import gen_shape_stats_s79 as s

OPS = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
       "bitwise_and_", "bitwise_or_", "bitwise_xor_", "bitwise_not_"]
INTS = ["i32", "i64", "u8", "bool"]
INT_SCALARS = [0, 1, -1, 2, 3, 5, 7, 15, 127, 128, 255, 256, -128, -129, 2 ** 31 - 1, -(2 ** 31), 2 ** 31,
               2 ** 40, -(2 ** 40)]


def some_dtype(r):
    return r.choice(INTS * 4 + s.FLOATS)


def scalar(r):
    u = r.random()
    if u < 0.2:
        return {"bool": r.random() < 0.5}
    if u < 0.9:
        return {"int": r.choice(INT_SCALARS)}
    return {"float": r.choice([1.0, 2.5, -1.0])}


def py(sc):
    return next(iter(sc.values()))


def case(r, op):
    d = some_dtype(r)
    shape = r.choice(s.SHAPES)
    ts = [s.draw(r, d, shape)]
    args = {"scalar": None}
    name = op.rstrip("_")
    inplace = op.endswith("_")
    if name != "bitwise_not":
        if r.random() < 0.35:
            args["scalar"] = scalar(r)
        else:
            d2 = d if r.random() < 0.6 else some_dtype(r)
            ts.append(s.draw(r, d2, m.broadcast_shape(r, shape)))

    def f(*a):
        x = a[0]
        fn = getattr(x, op)
        if name == "bitwise_not":
            y = fn()
        elif args["scalar"] is not None:
            y = fn(py(args["scalar"]))
        else:
            y = fn(a[1])
        return [x if inplace else y]

    return ts, args, f, []


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/bitwise_s82.json.gz"
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 8202
    per_op = int(sys.argv[3]) if len(sys.argv) > 3 else 250
    s.generate(OPS, case, "benches/anchors/gen_bitwise_s82.py", tensor_path, "/dev/null", seed, per_op)


if __name__ == "__main__":
    main()
