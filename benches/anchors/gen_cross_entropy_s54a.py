#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread, its AVX2 kernels) for
F.cross_entropy of f32 logits, for
crates/strata-tensor/tests/suite/cross_entropy_s54a.rs, written to
crates/strata-tensor/tests/data/cross_entropy_s54a.json.

Each case draws its inputs from SplitMix64 seeded with the case's "seed"
(the Rust test draws the same numbers, so inputs are not stored):

- the logits, in row-major order of "shape": u = next() >> 40 (24 bits),
  x = (u / 2**24 * 2 - 1) * scale computed in f64, rounded to f32; then the
  "special" entries [flat index, "inf" | "-inf" | "nan" | number] replace
  single logits;
- class-index targets (not "prob"), one per row in row-major order of the
  shape without its class dim: z = next(); the target is ignore_index where
  (z >> 32) % 100 < "ign", else z % C;
- probability targets ("prob"): one draw u / 2**24 per logit, in row-major
  order (PyTorch does not ask them to sum to 1, and a softmax here would
  test strata's softmax as well);
- the class weight ("w"): C draws, w = 0.25 + u / 2**24 * 2 in f64, rounded
  to f32.

"out" is the loss as f32 bit patterns (8 hex digits each), "out_shape" its
shape. Options: "red" (reduction), "ls" (label_smoothing), "ii"
(ignore_index).

"sums" are `x.sum(dim)` over a dim followed by others (PyTorch's outer
reductions, which the smoothing term and probability targets of
(N, C, d1, ...) inputs run): x drawn as the logits (scale 10) in f32, then
converted to "dtype" (f32, f64, bf16); "out" the sums' bit patterns (hex,
the dtype's width).

"log_softmax" is f32 `torch.log_softmax(x, dim)` along a dim other than
the last (x drawn as the logits, "special" as there); "out" as "out" of
the cases.

Usage (the committed fixture is seed 54, 220 cases; a larger draw is a
probe, checked when STRATA_CE_S54A_PROBE names it):
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_cross_entropy_s54a.py \\
        crates/strata-tensor/tests/data/cross_entropy_s54a.json [--seed 54] [--count 220]
"""
import argparse
import json
import random
import struct

import torch
import torch.nn.functional as F

M64 = (1 << 64) - 1


class SplitMix:
    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def unit(self):
        return (self.next() >> 40) / float(1 << 24)


def hex32(t):
    return "".join("%08x" % struct.unpack("<I", struct.pack("<f", v))[0]
                   for v in t.reshape(-1).tolist())


def draw_logits(g, shape, scale):
    n = 1
    for s in shape:
        n *= s
    v = [(g.unit() * 2 - 1) * scale for _ in range(n)]
    return torch.tensor(v, dtype=torch.float64).to(torch.float32).reshape(shape)


def make_inputs(case):
    shape = case["shape"]
    g = SplitMix(case["seed"])
    x = draw_logits(g, shape, case["scale"])
    flat = x.reshape(-1)
    for idx, v in case["special"]:
        flat[idx] = float(v)
    c = shape[0] if len(shape) == 1 else shape[1]
    if case["prob"]:
        t = torch.tensor([g.unit() for _ in range(x.numel())],
                         dtype=torch.float64).to(torch.float32).reshape(shape)
    else:
        rows_shape = [] if len(shape) == 1 else [shape[0]] + shape[2:]
        nrows = 1
        for s in rows_shape:
            nrows *= s
        tv = []
        for _ in range(nrows):
            z = g.next()
            if (z >> 32) % 100 < case["ign"] or c == 0:
                tv.append(case["ii"])
            else:
                tv.append(z % c)
        t = torch.tensor(tv, dtype=torch.int64).reshape(rows_shape)
    w = None
    if case["w"]:
        w = torch.tensor([0.25 + g.unit() * 2 for _ in range(c)],
                         dtype=torch.float64).to(torch.float32)
    return x, t, w


def random_case(r, k, seed):
    kind = r.choice(["1d", "2d", "2d", "2d", "2d_wide", "3d", "3d", "4d", "5d"])
    if kind == "1d":
        shape = [r.randint(1, 40)]
    elif kind == "2d":
        shape = [r.randint(0, 24) if r.random() < 0.1 else r.randint(1, 24), r.randint(1, 40)]
    elif kind == "2d_wide":
        shape = [r.randint(1, 4), r.randint(41, 300)]
    elif kind == "3d":
        shape = [r.randint(1, 4), r.randint(1, 12), r.randint(1, 20)]
    elif kind == "4d":
        shape = [r.randint(1, 3), r.randint(1, 9), r.randint(1, 5), r.randint(1, 5)]
    else:
        shape = [r.randint(1, 2), r.randint(1, 6), r.randint(1, 3), r.randint(1, 3),
                 r.randint(1, 3)]
    n = 1
    for s in shape:
        n *= s
    special = []
    if n > 0 and r.random() < 0.25:
        for _ in range(r.randint(1, 3)):
            special.append([r.randrange(n), r.choice(["-inf", "-inf", "-inf", "inf", "nan",
                                                      "1e30", "-1e30", "80.5"])])
    c = shape[0] if len(shape) == 1 else shape[1]
    prob = r.random() < 0.12
    ii = -100 if prob else r.choice([-100, -100, 0, 1])
    return {
        "seed": seed * 100003 + k,
        "shape": shape,
        "scale": r.choice([0.1, 1.0, 3.0, 10.0, 30.0, 100.0]),
        "special": special,
        "prob": prob,
        "ign": 0 if prob else r.choice([0, 0, 10, 30, 100]),
        "ii": ii,
        "w": r.random() < 0.5,
        "red": r.choice(["none", "sum", "mean"]),
        "ls": r.choice([0.0, 0.0, 0.1, 0.05, 0.3, 1.0]),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=54)
    ap.add_argument("--count", type=int, default=220)
    a = ap.parse_args()
    torch.set_num_threads(1)
    r = random.Random(a.seed)
    cases = []
    for k in range(a.count):
        case = random_case(r, k, a.seed)
        x, t, w = make_inputs(case)
        y = F.cross_entropy(x, t, weight=w, ignore_index=case["ii"], reduction=case["red"],
                            label_smoothing=case["ls"])
        case["out"] = hex32(y)
        case["out_shape"] = list(y.shape)
        cases.append(case)
    sums = []
    dts = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
    for k in range(a.count // 4):
        while True:
            nd = r.choice([2, 3, 3, 4])
            shape = [r.randint(1, 3)] + [r.randint(1, 40) for _ in range(nd - 1)]
            if r.random() < 0.3:
                shape[-1] = r.choice([4, 7, 8, 9, 16, 31, 32, 33, 64, 70, 300])
            dim = r.randrange(nd - 1)
            outs = 1
            for i, n in enumerate(shape):
                outs *= 1 if i == dim else n
            if outs <= 400:
                break
        name = r.choice(["f32", "f32", "f64", "bf16"])
        case = {"seed": a.seed * 100003 + 50000 + k, "shape": shape, "dim": dim, "dtype": name}
        x = draw_logits(SplitMix(case["seed"]), shape, 10.0).to(dts[name])
        y = x.sum(dim)
        bits = {"f32": (torch.int32, 8), "f64": (torch.int64, 16), "bf16": (torch.int16, 4)}
        it, width = bits[name]
        mask = (1 << (4 * width)) - 1
        case["out"] = "".join("%0*x" % (width, v & mask)
                              for v in y.reshape(-1).view(it).tolist())
        sums.append(case)
    lsm = []
    for k in range(a.count // 8):
        while True:
            nd = r.choice([2, 3, 3, 4])
            shape = [r.randint(1, 3)] + [r.randint(1, 30) for _ in range(nd - 1)]
            if r.random() < 0.3:
                shape[-1] = r.choice([1, 1, 7, 8, 9, 16, 17, 33])
            n = 1
            for v in shape:
                n *= v
            if n <= 600:
                break
        dim = r.randrange(nd - 1)
        case = {"seed": a.seed * 100003 + 70000 + k, "shape": shape, "dim": dim,
                "scale": r.choice([0.1, 1.0, 10.0, 30.0]), "special": []}
        x = draw_logits(SplitMix(case["seed"]), shape, case["scale"])
        if r.random() < 0.2:
            idx = r.randrange(n)
            case["special"] = [[idx, r.choice(["-inf", "inf", "nan"])]]
            x.reshape(-1)[idx] = float(case["special"][0][1])
        case["out"] = hex32(torch.log_softmax(x, dim))
        lsm.append(case)
    with open(a.out, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases, "sums": sums,
                   "log_softmax": lsm}, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
