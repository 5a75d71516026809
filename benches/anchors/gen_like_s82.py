#!/usr/bin/env python3
"""Session 82: PyTorch 2.15's CPU answers (one thread) for `torch.dist`
(two operands that broadcast or not, of any dtypes, orders 2, 1, 0, inf,
-inf, 3, 0.5, -1) and `torch.diagflat` (any shape, offsets -3..3), in the
format of gen_shape_stats_s79.py (whose drawing and writing it reuses),
written to crates/strata-tensor/tests/data/like_s82.json.gz (with
`tests/suite/like_s82.rs`) and their f32/f64 gradients to
crates/strata-autograd/tests/data/like_s82_grad.json.gz.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_like_s82.py \\
        crates/strata-tensor/tests/data/like_s82.json.gz \\
        crates/strata-autograd/tests/data/like_s82_grad.json.gz
"""
import sys

import torch

import gen_math_s74 as m
import gen_shape_stats_s79 as s

ORDERS = [2.0, 1.0, 0.0, float("inf"), float("-inf"), 3.0, 0.5, -1.0]


def case(r, op):
    d = s.some_dtype(r)
    shape = r.choice(s.SHAPES)
    ts = [s.draw(r, d, shape, r.choice(["any", "tame", "tame"]))]
    if op == "dist":
        d2 = d if r.random() < 0.7 else s.some_dtype(r)
        ts.append(s.draw(r, d2, m.broadcast_shape(r, shape), "tame"))
        args = {"p": r.choice(ORDERS)}
        f = lambda a, b: [torch.dist(a, b, args["p"])]
        return ts, args, f, [0, 1]
    args = {"offset": r.randint(-3, 3)}
    f = lambda a: [torch.diagflat(a, args["offset"])]
    return ts, args, f, [0]


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/like_s82.json.gz"
    grad_path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/like_s82_grad.json.gz"
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 8204
    per_op = int(sys.argv[4]) if len(sys.argv) > 4 else 600
    s.generate(["dist", "diagflat"], case, "benches/anchors/gen_like_s82.py", tensor_path, grad_path, seed,
               per_op)


if __name__ == "__main__":
    main()
