#!/usr/bin/env python3
"""PyTorch's log-softmax backward, replayed by
crates/strata-tensor/tests/suite/softmax_pytorch.rs (the JSON
fixture crates/strata-tensor/tests/data/log_softmax_backward_s46.json).

PyTorch's CPU kernel forms `g - exp(y) * sum(g)` with one fused
multiply-add (its vectorized `x - y * z`). Its `exp` is a vectorized one
that is now and then an ulp from the C library's `exp`/`expf`, which strata
calls, so a case is kept only where PyTorch's answer equals the same formula
computed here with the C library's `exp` and the sum taken in order along
the dim (PyTorch's order along a dim other than the last, and along a last
dim of 2 elements): then strata must give it bit for bit. Every case is
`torch.ops.aten._log_softmax_backward_data(g, y, dim, dtype)` on its own
forward output `y`, in f32, f64, f16 and bf16 (the half types computed in
f32, as PyTorch's), plus gradient-oracle program 230:279's backward (the
log-softmax of a [4, 2] input along dim 0, `exp`, summed: the gradient is
`exp(y) (1 - sum)`, 6.7e-9 and up in PyTorch). The script prints how many
drawn cases it kept.

Values are written as the exact binary64 value of each element; one thread.

Usage:
    /tmp/tv/bin/python benches/anchors/gen_log_softmax_backward_s46.py \\
        --out crates/strata-tensor/tests/data/log_softmax_backward_s46.json
"""

import argparse
import ctypes
import json
import math
from fractions import Fraction

import numpy as np
import torch

DTYPES = {"f32": torch.float32, "f64": torch.float64,
          "f16": torch.float16, "bf16": torch.bfloat16}
LIBM = ctypes.CDLL("libm.so.6")
LIBM.expf.restype = ctypes.c_float
LIBM.expf.argtypes = [ctypes.c_float]


def flat(t):
    return [float(v) for v in t.detach().to(torch.float64).reshape(-1).tolist()]


def emulate(g, y, dim):
    """`g - exp(y) * sum(g)` with one rounding, in the accumulation dtype
    (f64 for f64, else f32), the sum in order along `dim`, `exp` the C
    library's; rounded to the dtype."""
    wide = g.dtype == torch.float64
    acc = np.float64 if wide else np.float32
    gn = np.moveaxis(g.to(torch.float64).numpy().astype(acc), dim, 0)
    yn = np.moveaxis(y.to(torch.float64).numpy().astype(acc), dim, 0)
    s = np.zeros(gn.shape[1:], dtype=acc)
    for k in range(gn.shape[0]):
        s = (s + gn[k]).astype(acc)
    out = np.empty(gn.shape, dtype=np.float64)
    for idx in np.ndindex(*gn.shape):
        yv = float(yn[idx])
        e = math.exp(yv) if wide else float(LIBM.expf(yv))
        exact = Fraction(float(gn[idx])) - Fraction(e) * Fraction(float(s[idx[1:]]))
        out[idx] = float(acc(float(exact))) if not wide else float(exact)
    r = torch.from_numpy(np.moveaxis(out, 0, dim).copy())
    return r.to(g.dtype)


def case(x, g, dim):
    y = torch.log_softmax(x, dim)
    dx = torch.ops.aten._log_softmax_backward_data(g, y, dim, x.dtype)
    return {"dtype": [k for k, v in DTYPES.items() if v == x.dtype][0],
            "shape": list(x.shape), "dim": dim,
            "y": flat(y), "g": flat(g), "dx": flat(dx)}, y, dx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(46)
    # 230:279: log_softmax(x, 0) of [4, 2], then exp, summed (upstream 1).
    x = torch.tensor([-0.5, 0.25, -0.25, 0.25, 0.25, 1.0, 1.0, 0.5]).reshape(4, 2)
    y = torch.log_softmax(x, 0)
    cases = [case(x, torch.exp(y), 0)[0]]
    drawn = kept = 0
    for dn, dt in DTYPES.items():
        while sum(c["dtype"] == dn for c in cases[1:]) < 16:
            nd = int(torch.randint(1, 4, (1,), generator=gen))
            shape = [int(v) for v in torch.randint(1, 8, (nd,), generator=gen)]
            dim = int(torch.randint(0, nd, (1,), generator=gen))
            if dim == nd - 1:
                shape[dim] = 2  # a last dim of 2: any order sums it alike
            x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 3).to(dt)
            g = torch.randn(shape, generator=gen, dtype=torch.float64).to(dt)
            c, y, dx = case(x, g, dim)
            drawn += 1
            if torch.equal(emulate(g, y, dim), dx):
                kept += 1
                cases.append(c)
    print(f"kept {kept} of {drawn} drawn cases")
    with open(args.out, "w") as f:
        json.dump({"generator": "benches/anchors/gen_log_softmax_backward_s46.py",
                   "torch": torch.__version__, "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
