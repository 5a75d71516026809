#!/usr/bin/env python3
"""Session 82: PyTorch 2.15's CPU answers (one thread) for `torch.amax`,
`torch.amin` and `torch.aminmax`, in the format of gen_shape_stats_s79.py
(whose drawing and writing it reuses), written to two fixtures:

- crates/strata-tensor/tests/data/extremes_s82.json.gz
  (crates/strata-tensor/tests/suite/extremes_s82.rs): the results (dtype,
  shape, values) or the fact that PyTorch raised, on operands of every
  strata dtype (bool included), shapes with and without elements, 0-d,
  transposed operands, values with ties, signed zeros, NaN and infinities;
  dims given as `None`, an empty list, or one to three dims that may repeat
  or lie out of range; `keepdim` either way;
- crates/strata-autograd/tests/data/extremes_s82_grad.json.gz
  (crates/strata-autograd/tests/suite/extremes_s82.rs): for the f32/f64
  calls that succeed, the gradient for gen_shape_stats_s79.py's upstream
  gradient (ties share it evenly, NaN slices pass it to their NaNs).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_extremes_s82.py \\
        crates/strata-tensor/tests/data/extremes_s82.json.gz \\
        crates/strata-autograd/tests/data/extremes_s82_grad.json.gz
"""
import sys

import torch

import gen_shape_stats_s79 as s

SHAPES = s.SHAPES + [[2, 2, 2, 2], [1, 1], [3, 1, 0]]
OPS = ["amax", "amin", "aminmax"]


def one_dim(r, nd):
    """A dim, out of range ([-nd - 1, nd]) one time in ten."""
    if r.random() < 0.1:
        return r.choice([-nd - 1, max(nd, 1)])
    return r.randint(-max(nd, 1), max(nd, 1) - 1)


def dims_arg(r, nd):
    """None, [], or one to three dims (repeats allowed)."""
    u = r.random()
    if u < 0.15:
        return None
    if u < 0.3:
        return []
    return [one_dim(r, nd) for _ in range(r.choice([1, 1, 2, 2, 3]))]


def case(r, op):
    d = s.some_dtype(r)
    shape = r.choice(SHAPES)
    # Ties are the point of amax's gradient: "tame" values (three decimals
    # in [-3, 3]) tie in small tensors only by chance, so half the operands
    # hold small integers instead.
    kind = r.choice(["any", "any", "ties"])
    if kind == "ties" and d not in ("bool",) and d in s.FLOATS:
        saved = s.values
        s.values = lambda rr, dt, n, k: [float(rr.randint(-2, 2)) for _ in range(n)]
        try:
            t = s.draw(r, d, shape)
        finally:
            s.values = saved
    else:
        t = s.draw(r, d, shape)
    nd = len(shape)
    keepdim = r.random() < 0.4
    if op == "aminmax":
        dim = None if r.random() < 0.3 else one_dim(r, nd)
        args = {"dim": dim, "keepdim": keepdim}
        f = lambda a: list(torch.aminmax(a, dim=dim, keepdim=keepdim))
    else:
        dims = dims_arg(r, nd)
        args = {"dims": dims, "keepdim": keepdim}
        fn = getattr(torch, op)
        if dims is None:
            f = lambda a: [fn(a, keepdim=keepdim)]
        else:
            f = lambda a: [fn(a, dims, keepdim)]
    return [t], args, f, [0]


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/extremes_s82.json.gz"
    grad_path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/extremes_s82_grad.json.gz"
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 8201
    per_op = int(sys.argv[4]) if len(sys.argv) > 4 else 700
    s.generate(OPS, case, "benches/anchors/gen_extremes_s82.py", tensor_path, grad_path, seed, per_op)


if __name__ == "__main__":
    main()
