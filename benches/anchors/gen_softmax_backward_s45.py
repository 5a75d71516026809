#!/usr/bin/env python3
"""PyTorch's softmax backward along a dim other than the last, replayed by
crates/strata-tensor/tests/suite/softmax_pytorch.rs (the JSON fixture
crates/strata-tensor/tests/data/softmax_backward_s45.json).

PyTorch's CPU kernel for `inner_size > 1` accumulates `sum(g * y)` along
the dim with one fused multiply-add per element and then forms
`y * (g - sum)`; every case here is PyTorch's `torch.ops.aten.
_softmax_backward_data(g, y, dim, dtype)` on its own forward output `y`,
in f32, f64, f16 and bf16, on shapes whose softmax dim is not the last
(1 or 2 dims after it, sizes 1 to 7), plus gradient-oracle program 196:894
(`x` of shape [1, 3, 2], dim 1, upstream 0.1875 everywhere: exactly 0).

Values are written as the exact binary64 value of each element (repr);
one thread.

Usage:
    /tmp/tv/bin/python benches/anchors/gen_softmax_backward_s45.py \\
        --out crates/strata-tensor/tests/data/softmax_backward_s45.json
"""

import argparse
import json

import torch

DTYPES = {"f32": torch.float32, "f64": torch.float64,
          "f16": torch.float16, "bf16": torch.bfloat16}


def flat(t):
    return [float(v) for v in t.detach().to(torch.float64).reshape(-1).tolist()]


def case(x, g, dim):
    y = torch.softmax(x, dim)
    dx = torch.ops.aten._softmax_backward_data(g, y, dim, x.dtype)
    return {"dtype": [k for k, v in DTYPES.items() if v == x.dtype][0],
            "shape": list(x.shape), "dim": dim,
            "y": flat(y), "g": flat(g), "dx": flat(dx)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(45)
    cases = []
    x = torch.tensor([-0.25, -0.9542567133903503, -1.2718122005462646, 2.0,
                      -3.3597991466522217, -0.023443657904863358]).reshape(1, 3, 2)
    cases.append(case(x, torch.full_like(x, 0.1875), 1))
    for dn, dt in DTYPES.items():
        for _ in range(12):
            nd = int(torch.randint(2, 4, (1,), generator=gen))
            shape = [int(v) for v in torch.randint(1, 8, (nd,), generator=gen)]
            dim = int(torch.randint(0, nd - 1, (1,), generator=gen))
            if all(s == 1 for s in shape[dim + 1:]):
                shape[-1] = 3
            x = (torch.randn(shape, generator=gen, dtype=torch.float64) * 3).to(dt)
            g = torch.randn(shape, generator=gen, dtype=torch.float64).to(dt)
            cases.append(case(x, g, dim))
    with open(args.out, "w") as f:
        json.dump({"generator": "benches/anchors/gen_softmax_backward_s45.py",
                   "torch": torch.__version__, "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
