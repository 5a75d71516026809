#!/usr/bin/env python3
"""PyTorch's layer_norm backward on ill-conditioned rows, replayed by
crates/strata-tensor/tests/suite/hostile_sweep_s37.rs (the JSON fixture
crates/strata-tensor/tests/data/layer_norm_s37.json.gz).

Rows of 1, 2, 3, 5 and 16 elements whose spread is small against their
mean (|mean| up to 1000, standard deviation down to 1e-4, so variances far
below 0.01), with eps 0, 1e-12 and 1e-5, some with a weight. For each case
the f32 inputs, PyTorch's f32 gradients (dx, dweight, dbias; CPU, one
thread) and the exact ones: the same f32 inputs run by PyTorch in f64.
The replay asks strata's f32 gradients to be at least as close to the f64
ones as PyTorch's f32 gradients are, and to be NaN exactly where PyTorch's
are (a row of equal values with eps 0).

Usage:
    /tmp/tv/bin/python benches/anchors/gen_layer_norm_s37.py \
        --out crates/strata-tensor/tests/data/layer_norm_s37.json.gz
"""

import argparse
import json
import math
import random

import torch
import torch.nn.functional as F
from fixture_io import write_fixture


def enc(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def flat(t):
    return [enc(float(v)) for v in t.detach().reshape(-1).tolist()]


def grads(x, dy, w, eps, dt):
    x = x.detach().clone().to(dt).requires_grad_(True)
    w = None if w is None else w.detach().clone().to(dt).requires_grad_(True)
    b = None if w is None else torch.zeros_like(w, requires_grad=True)
    y = F.layer_norm(x, x.shape[-1:], w, b, eps)
    y.backward(dy.to(dt))
    out = {"dx": flat(x.grad)}
    if w is not None:
        out["dw"] = flat(w.grad)
        out["db"] = flat(b.grad)
    return out



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--count", type=int, default=240)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    r = random.Random(a.seed)
    cases = []
    for i in range(a.count):
        n = r.choice([1, 2, 2, 3, 5, 16])
        rows = r.choice([1, 3, 4])
        eps = r.choice([0.0, 0.0, 1e-12, 1e-5])
        mu = r.choice([0.0, 1.0, -3.0, 10.0, 100.0, -1000.0])
        sd = r.choice([1e-1, 1e-2, 1e-3, 1e-4])
        xs = []
        for _ in range(rows):
            m = mu * r.uniform(0.5, 1.5)
            if r.random() < 0.1:
                xs += [m] * n  # a constant row
            else:
                xs += [m + sd * r.gauss(0, 1) for _ in range(n)]
        x = torch.tensor(xs, dtype=torch.float32).reshape(rows, n)
        dy = torch.tensor([r.choice([1.0, -0.5, 2.0]) * r.gauss(0, 1) for _ in range(rows * n)],
                          dtype=torch.float32).reshape(rows, n)
        w = None
        if r.random() < 0.4:
            w = torch.tensor([r.uniform(0.5, 2) for _ in range(n)], dtype=torch.float32)
        cases.append({
            "name": f"ln_{i:04}", "shape": [rows, n], "eps": eps,
            "x": flat(x), "dy": flat(dy), "weight": None if w is None else flat(w),
            "torch32": grads(x, dy, w, eps, torch.float32),
            "ref64": grads(x, dy, w, eps, torch.float64),
        })
    write_fixture(a.out, json.dumps({"torch": torch.__version__, "seed": a.seed, "cases": cases},
                                    separators=(",", ":")) + "\n")
    print(len(cases), "cases")


if __name__ == "__main__":
    main()
