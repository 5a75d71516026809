#!/usr/bin/env python3
"""Session 76: PyTorch 2.15's CPU answers (one thread) for F.unfold (im2col)
and F.fold (col2im), written to
crates/strata-autograd/tests/data/fold_s76.json.gz
(crates/strata-autograd/tests/suite/fold_s76.rs checks strata's
Tensor::im2col / Tensor::col2im, their Var forms and the gradients).

unfold: inputs of 2 to 5 dims (3 and 4 mostly), sizes 0 to 5 (an empty dim
now and then); fold: inputs of 1 to 4 dims (2 and 3 mostly) whose channel
dim is mostly a multiple of the kernel's size and whose block count mostly
matches the output size. kernel_size, dilation, padding and stride are an
int or a pair (a 0 kernel, dilation or stride now and then; padding up to
3, more than half the kernel at times). dtypes f32, f64, f16, bf16, i64, bool
(fold refuses bool). Values: small integers (exact in every dtype, so sums
of overlapping blocks are exact). Recorded: the result or the fact that
PyTorch raised, and for f32/f64 inputs the input's gradient for the
upstream gradient whose element j is `((3 j) mod 7 - 3) / 2`.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_fold_s76.py \\
        crates/strata-autograd/tests/data/fold_s76.json.gz
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


def small_int_tensor(r, dtype, shape, bound):
    """A tensor of `dtype` and `shape` holding integers in [-bound, bound]
    (bool: whether positive), exact in every dtype; and its fixture entry."""
    vals = [r.randint(-bound, bound) for _ in range(math.prod(shape))]
    if dtype == "bool":
        vals = [v > 0 for v in vals]
    t = torch.tensor(vals, dtype=torch.float64).to(m.DTYPES[dtype]).reshape(shape)
    stored = [fmt(float(v)) if dtype not in ("i64", "bool") else (bool(v) if dtype == "bool" else int(v))
              for v in t.flatten().tolist()]
    return t, {"dtype": dtype, "shape": shape, "values": stored, "t": False}


def input_grad(call, x):
    """The gradient of `call` at `x` for the fixtures' upstream gradient
    (element j: `((3 j) mod 7 - 3) / 2`), as stored; None where PyTorch's
    backward fails."""
    xg = x.clone().requires_grad_(True)
    out = call(xg)
    try:
        out.backward(m.upstream(list(out.shape)).to(out.dtype))
    except RuntimeError:
        return None
    return [fmt(float(v)) for v in xg.grad.double().flatten().tolist()]


def pair(r, lo, hi, zero_odds):
    def one():
        return 0 if r.random() < zero_odds else r.randint(lo, hi)
    return one() if r.random() < 0.5 else [one(), one()]


def expand(v):
    return v if isinstance(v, list) else [v, v]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/fold_s76.json.gz"
    r = random.Random(7601)
    cases = []
    for _ in range(1600):
        op = r.choice(["unfold", "fold"])
        args = {"kernel_size": pair(r, 1, 3, 0.03), "dilation": pair(r, 1, 2, 0.03),
                "padding": pair(r, 0, 2, 0.0) if r.random() < 0.9 else pair(r, 0, 3, 0.0),
                "stride": pair(r, 1, 3, 0.03)}
        k, d, p, s = (expand(args[n]) for n in ("kernel_size", "dilation", "padding", "stride"))
        dtype = r.choice(["f32", "f32", "f64", "f64", "f16", "bf16", "i64", "bool"])
        if op == "unfold":
            nd = r.choice([3, 4, 4, 4]) if r.random() < 0.9 else r.choice([2, 5])
            shape = [r.randint(1, 5) for _ in range(nd)]
            if r.random() < 0.08:
                shape[r.randrange(nd)] = 0

            def call(x):
                return F.unfold(x, args["kernel_size"], args["dilation"], args["padding"], args["stride"])
        else:
            out = [r.randint(1, 6), r.randint(1, 6)]
            if r.random() < 0.03:
                out[r.randrange(2)] = 0
            blocks = [((out[i] + 2 * p[i] - (d[i] * (k[i] - 1) + 1)) // s[i] + 1) if s[i] > 0 else 1
                      for i in range(2)]
            length = max(blocks[0], 0) * max(blocks[1], 0)
            if r.random() < 0.1:
                length += r.choice([-1, 1, 2])
            ck = r.randint(1, 3) * max(k[0] * k[1], 1)
            if r.random() < 0.1:
                ck += 1
            shape = [ck, max(length, 0)]
            if r.random() < 0.8:
                shape = [r.randint(0, 2) if r.random() < 0.1 else r.randint(1, 2)] + shape
            if r.random() < 0.03:
                shape = shape + [2]
            args["output_size"] = out if r.random() < 0.7 else (out[0] if out[0] == out[1] else out)

            def call(x):
                return F.fold(x, args["output_size"], args["kernel_size"], args["dilation"], args["padding"],
                              args["stride"])
        x, xd = small_int_tensor(r, dtype, shape, 3)
        c = {"op": op, "x": xd, "args": args}
        try:
            c["result"] = m.tensor_record(call(x))
        except Exception as e:  # noqa: BLE001
            c["error"] = str(e).split("\n")[0][:200]
        if "result" in c and dtype in ("f32", "f64"):
            grad = input_grad(call, x)
            if grad is not None:
                c["grad_x"] = grad
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_fold_s76.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
