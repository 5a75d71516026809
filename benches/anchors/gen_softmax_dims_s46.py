#!/usr/bin/env python3
"""PyTorch's CPU softmax along the last dim, and its softmax backward along a
dim followed only by dims of size 1, replayed by
crates/strata-tensor/tests/suite/softmax_pytorch.rs (the JSON fixture
crates/strata-tensor/tests/data/softmax_dims_s46.json).

PyTorch picks its CPU softmax kernels by the dim's index: along the last
dim the exponentials are multiplied by the reciprocal of their sum; along
any other dim, also one followed only by dims of size 1 (`[.., n, 1]`
along -2), they are divided by it, and the backward accumulates
`sum(g * y)` with one fused multiply-add per element. Forward cases are
rows of 2 to 15 elements (summed in order by PyTorch's vectorized
reduction below its vector width) kept where PyTorch's answer equals the
same formula computed here with the C library's `expf` (its vectorized exp
is an ulp away now and then); backward cases are `[outer, n, 1]` along
dim 1, all kept. f32 only; one thread.

Usage:
    /tmp/tv/bin/python benches/anchors/gen_softmax_dims_s46.py \\
        --out crates/strata-tensor/tests/data/softmax_dims_s46.json
"""

import argparse
import ctypes
import json

import numpy as np
import torch

LIBM = ctypes.CDLL("libm.so.6")
LIBM.expf.restype = ctypes.c_float
LIBM.expf.argtypes = [ctypes.c_float]


def flat(t):
    return [float(v) for v in t.detach().to(torch.float64).reshape(-1).tolist()]


def emulate_forward(x):
    """exp(x - max) * (1 / sum), the sum in order, in f32."""
    xn = x.numpy()
    out = np.empty_like(xn)
    for i, row in enumerate(xn):
        m = row.max()
        e = np.array([LIBM.expf(float(np.float32(v - m))) for v in row], dtype=np.float32)
        s = np.float32(0)
        for v in e:
            s = np.float32(s + v)
        out[i] = e * (np.float32(1) / s)
    return torch.from_numpy(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(46)
    forward, drawn = [], 0
    while len(forward) < 24:
        n = int(torch.randint(2, 16, (1,), generator=gen))
        x = torch.randn(1, n, generator=gen) * 3
        drawn += 1
        y = torch.softmax(x, 1)
        if torch.equal(emulate_forward(x), y):
            forward.append({"n": n, "x": flat(x), "y": flat(y)})
    backward = []
    for _ in range(12):
        outer = int(torch.randint(1, 5, (1,), generator=gen))
        n = int(torch.randint(2, 9, (1,), generator=gen))
        x = torch.randn(outer, n, 1, generator=gen) * 3
        g = torch.randn(outer, n, 1, generator=gen)
        y = torch.softmax(x, 1)
        dx = torch.ops.aten._softmax_backward_data(g, y, 1, torch.float32)
        backward.append({"shape": [outer, n, 1], "y": flat(y), "g": flat(g), "dx": flat(dx)})
    print(f"kept {len(forward)} of {drawn} forward rows")
    with open(args.out, "w") as f:
        json.dump({"generator": "benches/anchors/gen_softmax_dims_s46.py",
                   "torch": torch.__version__, "forward": forward, "backward": backward}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
