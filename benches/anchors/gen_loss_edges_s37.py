#!/usr/bin/env python3
"""PyTorch's answers for class-target losses at their edges, replayed by
crates/strata-tensor/tests/suite/hostile_sweep_s37.rs (the JSON fixture
crates/strata-tensor/tests/data/loss_edges_s37.json.gz).

Two grids, every case run by PyTorch (CPU, one thread):

* `empty`: cross_entropy and nll_loss with no class (C = 0) or with every
  target equal to ignore_index, for (C), (N, C) and (N, C, d1) inputs (and
  N = 0), reductions none/sum/mean, with and without a class weight and
  label smoothing, f32 and f64. A C = 0 input with a target that is not
  ignore_index is PyTorch's IndexError ("Target ... is out of bounds").
* `nonfinite`: seeded random rows of logits holding +-inf, NaN, all -inf,
  huge values, rows whose loss is 0 (-0.0 under "none"), class weights with
  zeros (a zero total weight), negative and -0.0 weights, ignored rows.

Recorded per case: the inputs, the forward value (or the error's class)
and, for cross_entropy, the gradient of the logits for an upstream gradient
`g` (`loss.backward(g)`).

Usage:
    /tmp/tv/bin/python benches/anchors/gen_loss_edges_s37.py \
        --out crates/strata-tensor/tests/data/loss_edges_s37.json.gz
"""

import argparse
import json
import math
import random

import torch
import torch.nn.functional as F
from fixture_io import write_fixture

INF = float("inf")
NAN = float("nan")
DT = {"f32": torch.float32, "f64": torch.float64}


def enc(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def flat(t):
    return [enc(float(v)) for v in t.detach().reshape(-1).tolist()]


def run(case):
    dt = DT[case["dtype"]]
    x = torch.tensor([float(v) for v in case["x"]], dtype=dt).reshape(case["shape"])
    t = torch.tensor(case["target"], dtype=torch.int64).reshape(case["tshape"])
    w = None if case["weight"] is None else torch.tensor([float(v) for v in case["weight"]], dtype=dt)
    x.requires_grad_(case["op"] == "cross_entropy")
    try:
        if case["op"] == "cross_entropy":
            out = F.cross_entropy(x, t, w, ignore_index=case["ignore_index"],
                                  reduction=case["reduction"], label_smoothing=case["ls"])
        else:
            out = F.nll_loss(x, t, w, ignore_index=case["ignore_index"], reduction=case["reduction"])
    except Exception as e:  # noqa: BLE001 - the error class is the answer
        case["error"] = type(e).__name__
        return case
    case["out_shape"] = list(out.shape)
    case["out"] = flat(out)
    if case["op"] == "cross_entropy":
        g = torch.tensor([float(v) for v in case["g"]], dtype=dt).reshape(out.shape)
        out.backward(g)
        case["grad"] = flat(x.grad) if x.grad is not None else flat(torch.zeros_like(x))
    case["x"] = [enc(float(v)) for v in x.detach().reshape(-1).tolist()]
    return case


def shape_of(kind, n, c, d1):
    return {"1d": [c], "2d": [n, c], "3d": [n, c, d1]}[kind]


def tshape_of(kind, n, d1):
    return {"1d": [], "2d": [n], "3d": [n, d1]}[kind]


def empty_grid(r):
    cases = []
    for op in ["cross_entropy", "nll_loss"]:
        for dtype in ["f32", "f64"]:
            for kind in (["1d", "2d", "3d"] if dtype == "f32" else ["2d"]):
                for c in [0, 3]:
                    for n in ([2] if kind == "1d" else [0, 2]):
                        for weighted in [False, True]:
                            for ls in ([0.0, 0.25] if op == "cross_entropy" else [0.0]):
                                for red in ["none", "sum", "mean"]:
                                    for ign in ([-100, 1] if c else [-100]):
                                        d1 = 2
                                        shape = shape_of(kind, n, c, d1)
                                        tshape = tshape_of(kind, n, d1)
                                        numel = math.prod(shape)
                                        rows = math.prod(tshape)
                                        x = [round(r.uniform(-3, 3), 2) for _ in range(numel)]
                                        cases.append({
                                            "grid": "empty", "op": op, "dtype": dtype,
                                            "shape": shape, "x": x, "tshape": tshape,
                                            "target": [ign] * rows,
                                            "weight": [round(r.uniform(0.1, 2), 2) for _ in range(c)] if weighted else None,
                                            "ignore_index": ign, "reduction": red, "ls": ls,
                                            "g": [r.choice([1.0, 0.5, -2.0]) for _ in range(rows if red == "none" else 1)],
                                        })
                # C = 0 with a target that is not ignored: out of bounds.
                shape = shape_of(kind, 2, 0, 2)
                tshape = tshape_of(kind, 2, 2)
                rows = math.prod(tshape)
                cases.append({
                    "grid": "empty", "op": op, "dtype": dtype, "shape": shape, "x": [],
                    "tshape": tshape, "target": [0] + [-100] * (rows - 1), "weight": None,
                    "ignore_index": -100, "reduction": "mean", "ls": 0.0, "g": [1.0],
                })
    return cases


SPECIAL = [INF, -INF, NAN, 1e30, -1e30, 0.0, -0.0]


def row(r, c, kind):
    if kind == "finite":
        return [round(r.uniform(-4, 4), 2) for _ in range(c)]
    if kind == "all_ninf":
        return [-INF] * c
    if kind == "one_hot_zero":
        # A row whose log-probability at its max is exactly 0.
        v = [-INF if r.random() < 0.5 else -200.0 for _ in range(c)]
        v[r.randrange(c)] = round(r.uniform(-3, 3), 1)
        return v
    v = [round(r.uniform(-4, 4), 2) for _ in range(c)]
    for _ in range(r.randint(1, max(1, c - 1))):
        v[r.randrange(c)] = r.choice(SPECIAL)
    return v


def nonfinite_grid(r, count):
    cases = []
    for i in range(count):
        op = "cross_entropy" if r.random() < 0.7 else "nll_loss"
        dtype = "f32" if r.random() < 0.7 else "f64"
        kind = r.choice(["1d", "2d", "2d", "3d"])
        c = r.choice([1, 2, 3, 4])
        n = r.choice([1, 2, 3])
        d1 = r.choice([1, 2])
        shape = shape_of(kind, n, c, d1)
        tshape = tshape_of(kind, n, d1)
        rows = math.prod(tshape)
        ign = r.choice([-100, -100, 0, 1])
        # Rows of the (rows, C) view, then laid out as (N, C, d1).
        rk = [r.choice(["finite", "special", "special", "all_ninf", "one_hot_zero"]) for _ in range(rows)]
        rws = [row(r, c, k) for k in rk]
        targets = []
        for k, rw in zip(rk, rws):
            u = r.random()
            if u < 0.15:
                targets.append(ign)
            elif k == "one_hot_zero" and u < 0.7:
                targets.append(max(range(c), key=lambda j: rw[j]))
            else:
                targets.append(r.randrange(c))
        if kind == "3d":
            x = [0.0] * (n * c * d1)
            for b in range(n):
                for e in range(d1):
                    for j in range(c):
                        x[(b * c + j) * d1 + e] = rws[b * d1 + e][j]
        else:
            x = [v for rw in rws for v in rw]
        wk = r.choice(["none", "none", "pos", "zero_at_targets", "neg", "negzero", "mixed"])
        if wk == "none":
            w = None
        elif wk == "pos":
            w = [round(r.uniform(0.1, 3), 2) for _ in range(c)]
        elif wk == "zero_at_targets":
            w = [round(r.uniform(0.1, 3), 2) for _ in range(c)]
            for t in targets:
                if 0 <= t < c:
                    w[t] = 0.0
        elif wk == "neg":
            w = [round(r.uniform(-3, -0.1), 2) for _ in range(c)]
        elif wk == "negzero":
            w = [r.choice([-0.0, 1.0, 0.5]) for _ in range(c)]
        else:
            w = [r.choice([1.0, -1.0, 0.0, 2.0, INF]) for _ in range(c)]
        red = r.choice(["none", "sum", "mean"])
        ls = r.choice([0.0, 0.0, 0.1, 1.0]) if op == "cross_entropy" else 0.0
        gn = rows if red == "none" else 1
        g = [r.choice([1.0, 0.5, -2.0, 1.0, 0.0]) for _ in range(gn)]
        cases.append({
            "grid": "nonfinite", "op": op, "dtype": dtype, "shape": shape,
            "x": [enc(v) for v in x], "tshape": tshape, "target": targets,
            "weight": None if w is None else [enc(v) for v in w],
            "ignore_index": ign, "reduction": red, "ls": ls, "g": g,
        })
    return cases



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    r = random.Random(a.seed)
    cases = [run(c) for c in empty_grid(r) + nonfinite_grid(r, a.count)]
    for i, c in enumerate(cases):
        c["name"] = f"{c['grid']}_{i:04}_{c['op']}"
    write_fixture(a.out, json.dumps({"torch": torch.__version__, "seed": a.seed, "cases": cases},
                                    separators=(",", ":")) + "\n")
    print(len(cases), "cases")


if __name__ == "__main__":
    main()
