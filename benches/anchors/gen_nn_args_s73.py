#!/usr/bin/env python3
"""Session 73: PyTorch 2.15's CPU answers (one thread) for nn ops, masked ops,
`where` and `clamp` called with hostile shapes and float arguments, written
to crates/strata-tensor/tests/data/nn_args_s73.json.gz
(crates/strata-tensor/tests/suite/nn_args_s73.rs).

The ops: layer_norm (a normalized shape near the input's trailing sizes,
weight and bias of that shape or off by a size or a dim, eps 1e-5, 0,
negative or NaN), cross_entropy with class-probability targets (weight,
label smoothing in and out of [0, 1] or NaN, each reduction), nll_loss
with a class weight (right or wrong size), mse_loss (target and weight
shapes that broadcast or not), masked_fill, masked_scatter (sources too
small, exact or larger), masked_select, where (condition and operands that
broadcast or not), clamp with scalar bounds (min above max, NaN, one
missing) and with tensor bounds (broadcast), and dropout where its answer
is not random (eval, p = 0 or 1, and p outside [0, 1] or NaN, which fail).
Inputs are f32 tensors of 0 to 3 dims (empty ones included) holding small
numbers; masks and conditions are bool. Each case keeps PyTorch's results
(shapes and values) or the fact that it raised.

Left out: results over MAX_RESULT elements; dropout with 0 < p < 1 in
training (random).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_nn_args_s73.py \\
        crates/strata-tensor/tests/data/nn_args_s73.json.gz
"""
import math
import random
import sys
import warnings

import torch
import torch.nn.functional as F

from fixture_io import LeftOut, fmt, outcome, write_cases

torch.set_num_threads(1)

MAX_RESULT = 4096
SHAPES = [[], [0], [3], [4], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [2, 1, 3], [3, 1]]
OPS = ["layer_norm"] * 3 + ["cross_entropy_probs"] * 2 + ["nll_loss_weight", "mse_loss",
       "masked_fill", "masked_scatter", "masked_select", "where", "clamp", "clamp_tensor",
       "dropout"]
NAN = float("nan")


Skip = LeftOut


def values(shape, start=0):
    """Small numbers: `((7 (k + start)) mod 5 - 2) / 2` for element k."""
    n = math.prod(shape)
    return torch.tensor([float(((k + start) * 7) % 5 - 2) / 2 for k in range(n)]).reshape(shape)


def mask(shape, start=0):
    """A bool tensor: element k is true where `(3 (k + start)) mod 4 < 2`."""
    n = math.prod(shape)
    return torch.tensor([((k + start) * 3) % 4 < 2 for k in range(n)],
                        dtype=torch.bool).reshape(shape)


def near(r, shape, p=0.25):
    """`shape`, or a broadcastable or mismatched variant of it."""
    s = list(shape)
    k = r.random()
    if k < 1 - p:
        return s
    k = r.random()
    if k < 0.3 and s:
        i = r.randrange(len(s))
        s[i] = 1
    elif k < 0.5 and s:
        s = s[r.randint(1, len(s)):]
    elif k < 0.7:
        s = [r.choice([1, 2])] + s
    elif s:
        i = r.randrange(len(s))
        s[i] = r.choice([x for x in (0, 1, 2, 3, 4) if x != s[i]])
    return s


def draw(r, shape):
    op = r.choice(OPS)
    nd = len(shape)
    reds = ["mean", "sum", "none"]
    if op == "layer_norm":
        k = r.randint(1, nd) if nd and r.random() < 0.9 else 0
        ns = list(shape[nd - k:])
        if r.random() < 0.2:
            ns = near(r, ns, 1.0) if ns else [r.randint(1, 3)]
        w = r.choice([None, ns, ns, near(r, ns, 0.5)])
        b = r.choice([None, ns, near(r, ns, 0.3)])
        return op, [ns, w, b, r.choice([1e-5, 1e-5, 0.0, -1.0, NAN])]
    if op == "cross_entropy_probs":
        tgt = near(r, shape, 0.15)
        c = shape[1] if nd >= 2 else (shape[0] if nd == 1 else 0)
        w = r.choice([None, None, [c], [c + 1], [max(c - 1, 0)]])
        ls = r.choice([0.0, 0.0, 0.1, 1.0, -0.5, 1.5, NAN])
        return op, [tgt, w, ls, r.choice(reds)]
    if op == "nll_loss_weight":
        c = shape[1] if nd >= 2 else (shape[0] if nd == 1 else 0)
        tshape = ([shape[0]] + shape[2:]) if nd >= 2 else []
        tgt = [r.randrange(c) if c else 0 for _ in range(math.prod(tshape))]
        w = r.choice([[c], [c], [c + 1], [max(c - 1, 0)], []])
        return op, [tshape, tgt, w, r.choice([-100, 0, 1]), r.choice(reds)]
    if op == "mse_loss":
        return op, [near(r, shape, 0.3), r.choice([None, None, near(r, shape, 0.4)]),
                    r.choice(reds)]
    if op == "masked_fill":
        return op, [near(r, shape, 0.4), r.choice([0.0, -1.5, NAN, float("inf")])]
    if op == "masked_scatter":
        m = near(r, shape, 0.3)
        n = math.prod(shape)
        return op, [m, [r.choice([0, 1, n // 2, n, n + 2])] if r.random() < 0.8 else
                    near(r, shape, 0.3)]
    if op == "masked_select":
        return op, [near(r, shape, 0.4)]
    if op == "where":
        return op, [near(r, shape, 0.3), near(r, shape, 0.3),
                    r.choice([near(r, shape, 0.3), 2.5, NAN])]
    if op == "clamp":
        lo = r.choice([None, -1.0, 0.5, 1.0, NAN])
        hi = r.choice([None, 1.0, -1.0, 0.0, NAN])
        return op, [lo, hi]
    if op == "clamp_tensor":
        lo = r.choice([None, near(r, shape, 0.4)])
        hi = r.choice([None, near(r, shape, 0.4)])
        return op, [lo, hi]
    p = r.choice([0.0, 1.0, 0.5, -0.1, 1.5, NAN])
    train = r.random() < 0.7
    return op, [p, train]


def run(op, x, a):
    if op == "layer_norm":
        w = None if a[1] is None else values(a[1], 1)
        b = None if a[2] is None else values(a[2], 2)
        return F.layer_norm(x, a[0], w, b, a[3])
    if op == "cross_entropy_probs":
        t = values(a[0], 3).abs()
        w = None if a[1] is None else values(a[1], 1).abs()
        return F.cross_entropy(x, t, weight=w, label_smoothing=a[2], reduction=a[3])
    if op == "nll_loss_weight":
        t = torch.tensor(a[1], dtype=torch.int64).reshape(a[0])
        w = values(a[2], 1).abs()
        return F.nll_loss(x, t, weight=w, ignore_index=a[3], reduction=a[4])
    if op == "mse_loss":
        t = values(a[0], 1)
        if a[1] is None:
            return F.mse_loss(x, t, reduction=a[2])
        return F.mse_loss(x, t, reduction=a[2], weight=values(a[1], 2).abs())
    if op == "masked_fill":
        return x.masked_fill(mask(a[0]), a[1])
    if op == "masked_scatter":
        return x.masked_scatter(mask(a[0]), values(a[1], 4))
    if op == "masked_select":
        return x.masked_select(mask(a[0]))
    if op == "where":
        other = a[2] if isinstance(a[2], float) else values(a[2], 2)
        return torch.where(mask(a[0]), values(a[1], 1), other)
    if op == "clamp":
        return torch.clamp(x, a[0], a[1])
    if op == "clamp_tensor":
        lo = None if a[0] is None else values(a[0], 1)
        hi = None if a[1] is None else values(a[1], 2)
        return torch.clamp(x, lo, hi)
    p, train = a
    if train and 0 < p < 1:
        raise Skip
    return F.dropout(x, p, train)


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/nn_args_s73.json.gz"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    r = random.Random(7303)
    cases, left_out = [], 0
    for _ in range(count):
        shape = r.choice(SHAPES)
        x = values(shape)
        op, a = draw(r, shape)
        def call():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return run(op, x, a)
        try:
            c = outcome(call, MAX_RESULT, skip_errors=("allocate",))
        except Skip:
            left_out += 1
            continue
        cases.append({"op": op, "shape": shape, "args": [fmt(v) if isinstance(v, float) else v
                                                         for v in a], **c})
    write_cases(out_path, "benches/anchors/gen_nn_args_s73.py", cases, left_out)


if __name__ == "__main__":
    main()
