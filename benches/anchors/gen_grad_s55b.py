#!/usr/bin/env python3
"""PyTorch 2.15's answers (CPU, one thread) for session 55's second look at
the gradient oracle's training programs, replayed by
crates/strata-autograd/tests/suite/oracle_s55b.rs (fixture
crates/strata-autograd/tests/data/grad_s55b.json):

- gelu_linear in a bf16 autocast region with an f32 input (seed 340,
  program 1006): PyTorch's autocast has no policy for `gelu`, so the GELU
  runs on the f32 input and its output is cast to bf16 by `linear`'s
  policy; both approximations, with and without a bias;
- attention as the fuzzer's eager graph computes it,
  `softmax(masked_fill(q @ k.transpose(-2, -1) * scale, mask, -inf)) @ v`
  (seed 340, program 612: the scaled scores rounded to f32 before the
  softmax), non-causal and causal, with a given scale and the default
  1/sqrt(E).

Each case records values as JSON numbers (exact f64 round trip; "nan",
"inf", "-inf" as strings) and dtype names.

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_grad_s55b.py
"""

import json
import math
import os

import torch
import torch.nn.functional as F

from fixture_io import write_fixture

torch.set_num_threads(1)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "crates", "strata-autograd", "tests", "data", "grad_s55b.json")
NAME = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
        torch.float16: "f16", torch.int64: "i64", torch.bool: "bool"}


def enc(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def tj(t):
    if t is None:
        return None
    t = t.detach()
    return {"dtype": NAME[t.dtype], "shape": list(t.shape),
            "data": [enc(v) for v in t.reshape(-1).double().tolist()]}


def leaf(v, shape, dt=torch.float32):
    return torch.tensor(v, dtype=torch.float64).reshape(shape).to(dt).requires_grad_(True)


CASES = {}

# ------------------------------------------------- gelu_linear under autocast

# Seed 340, program 1006: x (an f16 parameter read as f32), the f32 weight.
GL = [
    ("gl_s340_1006", [0.5859375, 1.2685546875, -0.595703125], [1, 3],
     [1.5, -2.0, 1.0, 2.0, 1.5, -1.0, 0.0, 0.0, -1.0], [3, 3], None),
    ("gl_bias", [0.3, -1.7, 2.2, 0.05, -0.4, 1.1, -2.6, 0.9], [2, 4],
     [0.25, -1.5, 0.75, 1.0, -0.5, 2.0, 0.125, -1.25, 1.5, 0.5, -0.75, 0.3], [3, 4],
     [0.01, -0.02, 0.5]),
]
for name, xv, xs, wv, ws, bv in GL:
    for appr in ["tanh", "none"]:
        x, w = leaf(xv, xs), leaf(wv, ws)
        b = None if bv is None else leaf(bv, [len(bv)])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = F.linear(F.gelu(x, approximate=appr), w, b)
        up = torch.tensor([((3 * i) % 7 - 3) / 4 for i in range(y.numel())]).reshape(y.shape)
        y.backward(up.to(y.dtype))
        CASES[f"{name}_{appr}"] = {
            "x": xv, "x_shape": xs, "w": wv, "w_shape": ws, "b": bv, "approximate": appr,
            "y": tj(y), "grad_x": tj(x.grad), "grad_w": tj(w.grad),
            "grad_b": None if b is None else tj(b.grad)}

# ---------------------------------------------------------------- attention

# Seed 340, program 612: q = minimum(-0.25, x0), k an f16 parameter, v.
ATT = [
    ("att_s340_612", [-0.25, -0.25, -0.25, -0.5, -0.25, -1.0, -0.25, -0.25, -0.25, -0.25, -0.25,
                      -0.25], [4, 3],
     [1.0, -1.5, -0.25, -2.0, 2.0, -0.25], [2, 3], [-0.25, 1.0, -2.0, -0.5], [2, 2]),
    # (Eighths: the scores q kᵀ are exact, whatever a GEMM's order of
    # summation; only the scale and the softmax round.)
    ("att_b2", [0.375, -1.25, 0.75, 2.125, -0.5, 0.875, 1.25, -0.75, 0.125, -1.625, 0.625, 0.25,
                1.125, -0.375, 0.5, -0.875, 0.25, 1.625], [2, 3, 3],
     [0.5, -1.125, 0.375, 1.875, -0.75, 0.25, -0.5, 0.75, 1.25, -1.25, 0.625, -0.125], [2, 2, 3],
     [1.5, -0.5, 0.25, 2.0, -1.0, 0.75, 0.125, -0.375], [2, 2, 2]),
]
for name, qv, qs, kv, ks, vv, vs in ATT:
    for causal in [False, True]:
        for scale in [0.5, None]:
            q, k, v = leaf(qv, qs), leaf(kv, ks), leaf(vv, vs)
            E, L, S = qs[-1], qs[-2], ks[-2]
            sc = scale if scale is not None else 1.0 / math.sqrt(E)
            s = torch.matmul(q, k.transpose(-2, -1)) * sc
            if causal:
                s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), -math.inf)
            y = torch.matmul(torch.softmax(s, -1), v)
            up = torch.tensor([((3 * i) % 7 - 3) / 4 for i in range(y.numel())]).reshape(y.shape)
            y.backward(up)
            CASES[f"{name}_{'causal' if causal else 'full'}_{scale}"] = {
                "q": qv, "q_shape": qs, "k": kv, "k_shape": ks, "v": vv, "v_shape": vs,
                "causal": causal, "scale": scale,
                "y": tj(y), "grad_q": tj(q.grad), "grad_k": tj(k.grad), "grad_v": tj(v.grad)}

if __name__ == "__main__":
    write_fixture(OUT, json.dumps({"generator": "benches/anchors/gen_grad_s55b.py",
                                   "torch": torch.__version__, "cases": CASES}, indent=None,
                                  separators=(",", ":")))
    print(f"{len(CASES)} cases -> {OUT}")
