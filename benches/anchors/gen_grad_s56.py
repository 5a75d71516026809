#!/usr/bin/env python3
"""PyTorch 2.15's answers (CPU, one thread) for session 56's oracle sweep of
strata-autograd, replayed by crates/strata-autograd/tests/suite/oracle_s56.rs
(fixture crates/strata-autograd/tests/data/grad_s56.json.gz).

The gradient fuzzer's seeds 351-366 (16000 programs) found one
strata-autograd defect: the divisor's gradient of `a / b` was formed as
`-((g * a) / b) / b`, where PyTorch's `div_tensor_other_backward` forms
`-g * ((a / b) / b)`. The two round differently, and a divisor broadcast
over many elements sums terms that cancel, so the last bits of each term
show in the sum (program 363:868: `y = x0 + 0; y.mul_(x1); (y.sum(all,
keepdim) / y).backward(g)`, x1's gradient -3.8e-6 in PyTorch, -1.9e-5 in
strata). The cases: that program, broadcast divisors (a row, a column, a
0-d tensor, a divisor of another dtype: f64 under f32, f32 under f16, f32
under bf16), and the in-place `div_` on a non-leaf and on a view of one.
Inputs are N(0, 1) draws rounded to their dtype, recorded as values; the
replay compares every output and gradient bit for bit.

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_grad_s56.py
"""

import json
import math
import os

import torch

from fixture_io import write_fixture

torch.set_num_threads(1)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "crates", "strata-autograd", "tests", "data", "grad_s56.json.gz")
NAME = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
        torch.float16: "f16"}
DT = {v: k for k, v in NAME.items()}


def enc(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def tj(t):
    t = t.detach()
    return {"dtype": NAME[t.dtype], "shape": list(t.shape),
            "data": [enc(v) for v in t.reshape(-1).double().tolist()]}


GEN = torch.Generator().manual_seed(56)


def draw(shape, dt):
    return torch.randn(shape, generator=GEN, dtype=torch.float64).to(dt)


CASES = {}

# Program 363:868 of the sweep, as the fuzzer drew it (one backward).
X868 = [1.2121858596801758, -0.5, 0.0831785798072815, -1.0516719818115234,
        1.0171607732772827, 0.3596157729625702, 0.03530529513955116,
        -0.44447314739227295, 0.788643479347229, -0.09249414503574371,
        1.297451376914978, 0.740851104259491, -0.19342397153377533,
        0.014710036106407642, -1.360173225402832, -0.15403848886489868]
G868 = [0.5, -0.5, -0.25, -0.25, -1.0, 0.5, -0.25, 0.5, 0.0, -0.25, 0.0, 1.5,
        -2.0, -1.5, -1.5, 0.0]


def program_868():
    x0 = torch.tensor(X868).reshape(4, 4, 1).requires_grad_()
    x1 = torch.ones(1, 1, 1, requires_grad=True)
    y = x0 + 0.0
    y.mul_(x1)
    o = y.sum(dim=(2, -2, -3), keepdim=True) / y
    o.backward(torch.tensor(G868).reshape(4, 4, 1))
    return {"out": tj(o), "x0": tj(x0.grad), "x1": tj(x1.grad)}


CASES["program_363_868"] = program_868()

# a / b with b broadcast: (a shape, b shape, a dtype, b dtype).
DIVS = [
    ("row", [6, 40], [40], torch.float32, torch.float32),
    ("column", [33, 5], [33, 1], torch.float32, torch.float32),
    ("scalar", [7, 9], [], torch.float32, torch.float32),
    ("outer", [1, 17], [13, 1], torch.float32, torch.float32),
    ("f64_divisor", [5, 24], [24], torch.float32, torch.float64),
    ("f16_dividend", [8, 16], [16], torch.float16, torch.float32),
    ("bf16_dividend", [8, 16], [8, 1], torch.bfloat16, torch.float32),
    ("f64_both", [9, 31], [31], torch.float64, torch.float64),
]
for name, sa, sb, da, db in DIVS:
    a = draw(sa, da).requires_grad_()
    b = (draw(sb, db) + 0.25).requires_grad_() if sb else draw(sb, db).requires_grad_()
    y = a / b
    g = draw(list(y.shape), y.dtype)
    y.backward(g)
    CASES[f"div_{name}"] = {"a": tj(a), "b": tj(b), "g": tj(g), "out": tj(y),
                            "ga": tj(a.grad), "gb": tj(b.grad)}

# In place: y = x + 0 (a non-leaf), y.div_(b); and on a view of y.
for name, view in [("inplace", False), ("inplace_view", True)]:
    x = draw([12, 10], torch.float32).requires_grad_()
    b = draw([1, 4] if view else [1, 10], torch.float32).requires_grad_()
    y = x + 0.0
    if view:
        y.narrow(1, 3, 4).div_(b)
    else:
        y.div_(b)
    g = draw([12, 10], torch.float32)
    y.backward(g)
    CASES[f"div_{name}"] = {"x": tj(x), "b": tj(b), "g": tj(g), "out": tj(y),
                            "gx": tj(x.grad), "gb": tj(b.grad)}

if __name__ == "__main__":
    write_fixture(OUT, json.dumps({"generator": "benches/anchors/gen_grad_s56.py",
                                   "torch": torch.__version__, "cases": CASES}, indent=None,
                                  separators=(",", ":")))
    print(f"{len(CASES)} cases -> {OUT}")
