#!/usr/bin/env python3
"""Session 54c's hostile-input sweep of the CPU paths session 54 added,
answered by PyTorch 2.15 (CPU, one thread):

- strata-tensor (`tests/data/hostile_sweep_s54c.json.gz`): f32 cross_entropy
  (class and probability targets) over empty, one-class, no-class, 1-D and
  (N, C, d1, d2, d3) inputs with dims of size 0 and 1, non-contiguous,
  transposed and expanded logits, weights holding 0 / NaN / inf / negative
  values, ignored targets, odd ignore_index and label_smoothing values,
  every reduction; sums and means over an outer dim (every dtype, keepdim,
  empty dims, ncols 1..70, a 1<<20 x 3 input); log_softmax along dim 0 /
  -2; f16 / bf16 exact gelu on short, odd-length and strided inputs.
- strata-autograd (`tests/data/hostile_sweep_s54c.json.gz`): the strides
  and values of a leaf's first `.grad` for leaves that are empty, 0-d, with
  size-1 dims of odd strides, transposed, permuted, stepped, expanded,
  overlapping; a first gradient of another dtype; repeated backward.

Every tensor is stored as (dtype, flat base values, size, stride, offset)
and rebuilt with as_strided on both sides; values are the f64 bits in hex,
so NaN payloads aside they compare bit for bit. An error is stored as
{"error": message}.

Run: OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_hostile_sweep_s54c.py
"""

import gzip
import io
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DT = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "bool": torch.bool,
}
NAME = {v: k for k, v in DT.items()}


def hexf(v):
    return struct.pack(">d", float(v)).hex()


def hexes(t):
    return "".join(hexf(v) for v in t.detach().reshape(-1).double().tolist())


class Rng:
    """SplitMix64, values k / 64 - 4 rounded to the dtype (exact in f16)."""

    def __init__(self, seed):
        self.s = seed

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    def vals(self, n, scale=4.0):
        return [((self.next() >> 40) / float(1 << 24) * 2 - 1) * scale for _ in range(n)]


class Rand:
    """A base of `n` SplitMix64 values from `seed` (Rng.vals), each made
    `float(int(abs(v) * 30)) % mod` when `mod` is set; stored as its recipe."""

    seed = 54003

    def __init__(self, n, scale=4.0, mod=None):
        Rand.seed += 1
        self.desc = {"seed": Rand.seed, "n": n, "scale": scale, "mod": mod}
        v = Rng(Rand.seed).vals(n, scale)
        if mod is not None:
            v = [float(int(abs(x) * 30)) % mod for x in v]
        self.vals = v


class _Vals:
    def vals(self, n, scale=4.0):
        return Rand(n, scale)


RNG = _Vals()
TRNG = Rng(7)


def spec(dtype, base, size, stride=None, offset=0):
    """A tensor spec and its PyTorch tensor."""
    size = list(size)
    if stride is None:
        stride = []
        acc = 1
        for s in reversed(size):
            stride.insert(0, acc)
            acc *= max(s, 1)
    rand = isinstance(base, Rand)
    b = torch.tensor(base.vals if rand else base, dtype=torch.float64).to(DT[dtype])
    t = torch.as_strided(b, size, list(stride), offset)
    s = {"dtype": dtype, "base": base.desc if rand else hexes(b), "size": size, "stride": list(stride), "offset": offset}
    return s, t


def dense(dtype, size, vals=None, scale=4.0):
    n = math.prod(size)
    if vals is None:
        vals = RNG.vals(n, scale)
    return spec(dtype, vals, size)


def result(fn):
    try:
        out = fn()
    except Exception as e:  # noqa: BLE001 - PyTorch's refusal is the answer
        return {"error": str(e).split("\n")[0][:200]}
    return {"dtype": NAME[out.dtype], "size": list(out.shape), "values": hexes(out)}


# ---------------------------------------------------------------- strata-tensor
def ce_cases():
    cases = []

    def add(name, xs, ts, ws=None, ignore_index=-100, ls=0.0, reductions=("none", "mean", "sum")):
        (xsp, x), (tsp, t) = xs, ts
        wsp, w = ws if ws is not None else (None, None)
        for red in reductions:
            out = result(
                lambda: F.cross_entropy(
                    x, t, weight=w, ignore_index=ignore_index, reduction=red, label_smoothing=ls
                )
            )
            cases.append(
                {
                    "name": f"{name} {red} ls={ls} ii={ignore_index}",
                    "x": xsp,
                    "target": tsp,
                    "weight": wsp,
                    "ignore_index": ignore_index,
                    "label_smoothing": hexf(ls),
                    "reduction": red,
                    "out": out,
                }
            )

    def tgt(size, c, ignore=None, every=3):
        n = math.prod(size)
        v = [float(TRNG.next() % max(c, 1)) for _ in range(n)]
        if ignore is not None:
            v = [ignore if i % every == 1 else x for i, x in enumerate(v)]
        return spec("i64", v, size)

    lss = (0.0, 0.25)
    # Shapes: empty batch, one class, no class, 1-D, (N, C, d...) with 0/1.
    shapes = [
        ((0, 5), (0,)),
        ((4, 1), (4,)),
        ((5,), ()),
        ((1,), ()),
        ((2, 3, 0), (2, 0)),
        ((2, 3, 1), (2, 1)),
        ((2, 3, 1, 1, 1), (2, 1, 1, 1)),
        ((2, 3, 1, 2, 1), (2, 1, 2, 1)),
        ((2, 3, 0, 2, 2), (2, 0, 2, 2)),
        ((2, 3, 2, 0, 1), (2, 2, 0, 1)),
        ((0, 3, 2, 2), (0, 2, 2)),
        ((2, 4, 3, 3), (2, 3, 3)),
        ((1, 5, 9), (1, 9)),
        ((2, 3, 33), (2, 33)),
        ((1, 6, 40), (1, 40)),
        ((3, 2, 8), (3, 8)),
    ]
    for xs, ts in shapes:
        c = xs[1] if len(xs) > 1 else xs[0]
        for ls in lss:
            add(f"shape {xs}", dense("f32", xs), tgt(ts, c), ls=ls)
            add(
                f"shape {xs} weighted ignored",
                dense("f32", xs),
                tgt(ts, c, ignore=-100),
                ws=dense("f32", (c,), [0.5 + 0.25 * i for i in range(c)]),
                ls=ls,
            )
    # No class: (N, 0) with every target ignored, and with one not.
    for ls in lss:
        add("C=0 all ignored", dense("f32", (3, 0)), spec("i64", [-100.0] * 3, (3,)), ls=ls)
        add("C=0 a class", dense("f32", (3, 0)), spec("i64", [0.0] * 3, (3,)), ls=ls)
        add("C=0 nd", dense("f32", (2, 0, 3)), spec("i64", [-100.0] * 6, (2, 3)), ls=ls)
        add("C=0 1-D", dense("f32", (0,)), spec("i64", [-100.0], ()), ls=ls)
    # Non-contiguous logits.
    base = RNG.vals(60).vals
    for ls in lss:
        add("transposed", spec("f32", base, (5, 4), (1, 5)), tgt((5,), 4), ls=ls)
        add("expanded rows", spec("f32", base, (6, 4), (0, 1)), tgt((6,), 4), ls=ls)
        add("expanded classes", spec("f32", base, (3, 5), (1, 0)), tgt((3,), 5), ls=ls)
        add("stepped", spec("f32", base, (4, 5), (12, 2), 1), tgt((4,), 5), ls=ls)
        add("nd permuted", spec("f32", base, (2, 3, 4), (1, 2, 6)), tgt((2, 4), 3), ls=ls)
        add("nd expanded inner", spec("f32", base, (2, 3, 9), (3, 1, 0)), tgt((2, 9), 3), ls=ls)
        add(
            "nd offset stepped",
            spec("f32", base, (2, 4, 3, 2), (20, 1, 5, 2), 3),
            tgt((2, 3, 2), 4),
            ls=ls,
        )
        add("1-D stepped", spec("f32", base, (7,), (3,), 2), tgt((), 7), ls=ls)
        add("1-D expanded", spec("f32", base, (7,), (0,), 2), tgt((), 7), ls=ls)
        # A transposed / expanded target.
        add(
            "nd target transposed",
            dense("f32", (3, 4, 2)),
            spec("i64", [float(i % 4) for i in range(6)], (3, 2), (1, 3)),
            ls=ls,
        )
        add("target expanded", dense("f32", (5, 4)), spec("i64", [2.0], (5,), (0,)), ls=ls)
    # Weights with 0 / NaN / inf / negative; all-zero weights.
    for wname, wv in [
        ("zero", [0.0, 1.0, 2.0, 0.5]),
        ("nan", [1.0, float("nan"), 2.0, 0.5]),
        ("inf", [1.0, 2.0, float("inf"), 0.5]),
        ("-inf", [1.0, 2.0, 0.5, float("-inf")]),
        ("negative", [-1.0, 2.0, -0.5, 0.5]),
        ("all zero", [0.0, 0.0, 0.0, 0.0]),
        ("sum zero", [1.0, -1.0, 1.0, -1.0]),
    ]:
        for ls in lss + (1.0,):
            add(
                f"weight {wname}",
                dense("f32", (6, 4)),
                spec("i64", [0.0, 1.0, 2.0, 3.0, 1.0, -100.0], (6,)),
                ws=spec("f32", wv, (4,)),
                ls=ls,
            )
            add(
                f"weight {wname} nd",
                dense("f32", (2, 4, 3)),
                spec("i64", [0.0, 1.0, 2.0, 3.0, 1.0, 0.0], (2, 3)),
                ws=spec("f32", wv, (4,)),
                ls=ls,
            )
    # A strided / expanded weight.
    add("weight stepped", dense("f32", (4, 3)), tgt((4,), 3), ws=spec("f32", [1, 9, 2, 9, 3], (3,), (2,)))
    add("weight expanded", dense("f32", (4, 3)), tgt((4,), 3), ws=spec("f32", [1.5], (3,), (0,)), ls=0.5)
    add("weight wrong size", dense("f32", (4, 3)), tgt((4,), 3), ws=spec("f32", [1, 2], (2,)))
    add("weight 2-D", dense("f32", (4, 3)), tgt((4,), 3), ws=spec("f32", [1, 2, 3], (1, 3)))
    # Ignored targets; odd ignore_index values.
    for ls in lss:
        for ws in (None, "w"):
            wsp = spec("f32", [0.5, 1.5, 2.0], (3,)) if ws else None
            add("all ignored", dense("f32", (4, 3)), spec("i64", [-100.0] * 4, (4,)), ws=wsp, ls=ls)
            add(
                "all ignored nd",
                dense("f32", (2, 3, 2)),
                spec("i64", [-100.0] * 4, (2, 2)),
                ws=wsp,
                ls=ls,
            )
            add("all ignored 1-D", dense("f32", (3,)), spec("i64", [-100.0], ()), ws=wsp, ls=ls)
            add(
                "ignore a class",
                dense("f32", (5, 3)),
                spec("i64", [1.0, 0.0, 1.0, 2.0, 1.0], (5,)),
                ws=wsp,
                ignore_index=1,
                ls=ls,
            )
            add(
                "ignore -1",
                dense("f32", (4, 3)),
                spec("i64", [-1.0, 0.0, -1.0, 2.0], (4,)),
                ws=wsp,
                ignore_index=-1,
                ls=ls,
            )
            add(
                "ignore huge",
                dense("f32", (4, 3)),
                spec("i64", [float(2**62), 0.0, 1.0, 2.0], (4,)),
                ws=wsp,
                ignore_index=2**62,
                ls=ls,
            )
            add(
                "ignore i64 min",
                dense("f32", (3, 3)),
                spec("i64", [float(-(2**63)), 0.0, 2.0], (3,)),
                ws=wsp,
                ignore_index=-(2**63),
                ls=ls,
            )
    # Bad targets.
    add("target out of range", dense("f32", (3, 3)), spec("i64", [0.0, 3.0, 1.0], (3,)))
    add("target negative", dense("f32", (3, 3)), spec("i64", [0.0, -2.0, 1.0], (3,)))
    add("target huge", dense("f32", (3, 3)), spec("i64", [0.0, float(2**62), 1.0], (3,)))
    add("target shape", dense("f32", (3, 3)), spec("i64", [0.0, 1.0], (2,)))
    add("target nd shape", dense("f32", (2, 3, 4)), spec("i64", [0.0] * 8, (2, 4)))
    add("target i32", dense("f32", (3, 3)), spec("i32", [0.0, 1.0, 2.0], (3,)))
    add("target 0-d for 2-D", dense("f32", (1, 3)), spec("i64", [1.0], ()))
    add("input 0-d", spec("f32", [1.0], ()), spec("i64", [0.0], ()))
    # Label smoothing values.
    for ls in (0.0, 1.0, 1e-30, 5e-8, -0.5, float("nan"), 1.5, float("inf"), float("-inf")):
        for ws in (None, spec("f32", [0.5, 1.5, 2.0], (3,))):
            add("smoothing", dense("f32", (4, 3)), spec("i64", [0.0, 2.0, -100.0, 1.0], (4,)), ws=ws, ls=ls)
            add(
                "smoothing nd",
                dense("f32", (2, 3, 9)),
                spec("i64", [float(i % 3) for i in range(18)], (2, 9)),
                ws=ws,
                ls=ls,
            )
    # Special logits.
    sp = [float("nan"), 1.0, 2.0, float("inf"), 0.0, 1.0, float("-inf"), float("-inf"), float("-inf"), 1e30, -1e30, 0.0]
    for ls in lss:
        add("special logits", spec("f32", sp, (4, 3)), spec("i64", [1.0, 0.0, 2.0, 1.0], (4,)), ls=ls)
        add("special logits nd", spec("f32", sp, (2, 3, 2)), spec("i64", [1.0, 0.0, 2.0, 1.0], (2, 2)), ls=ls)
        add("special logits colwise", spec("f32", sp, (1, 3, 4), (12, 1, 3)), spec("i64", [2.0, 0.0, 2.0, 1.0], (1, 4)), ls=ls)
    # Probability targets with NaN / inf and bad shapes.
    pt = [0.25, 0.75, 0.0, float("nan"), 0.5, 0.5, float("inf"), 0.0, 1.0, -0.5, 1.5, 0.0]
    for ls in lss + (1.0,):
        for ws in (None, spec("f32", [0.5, 1.5, 2.0], (3,))):
            add("prob nan inf", dense("f32", (4, 3)), spec("f32", pt, (4, 3)), ws=ws, ls=ls)
            add("prob nd", dense("f32", (2, 3, 2)), spec("f32", pt, (2, 3, 2)), ws=ws, ls=ls)
            add("prob 1-D", dense("f32", (3,)), spec("f32", pt[:3], (3,)), ws=ws, ls=ls)
            add("prob empty", dense("f32", (0, 3)), spec("f32", [], (0, 3)), ws=ws, ls=ls)
            add("prob inner 0", dense("f32", (2, 3, 0)), spec("f32", [], (2, 3, 0)), ws=ws, ls=ls)
            add("prob C=0", dense("f32", (2, 0)), spec("f32", [], (2, 0)), ls=ls)
            add("prob transposed", spec("f32", base, (4, 3), (1, 4)), spec("f32", pt, (4, 3), (1, 4)), ws=ws, ls=ls)
    add("prob shape", dense("f32", (4, 3)), spec("f32", pt[:8], (4, 2)))
    add("prob f64 target", dense("f32", (4, 3)), spec("f64", pt, (4, 3)))
    add("prob f16 target", dense("f32", (4, 3)), spec("f16", pt, (4, 3)))
    return cases


def sum_cases():
    cases = []

    def add(name, xs, dims, keepdim, ops=("sum", "mean")):
        xsp, x = xs
        for op in ops:
            fn = torch.sum if op == "sum" else torch.mean
            out = result(lambda: fn(x, dim=dims, keepdim=keepdim))
            cases.append({"name": f"{name} {op} dims={dims} keep={keepdim}", "x": xsp, "op": op, "dims": dims, "keepdim": keepdim, "out": out})

    floats = ("f32", "f64", "f16", "bf16")
    ints = ("i32", "i64", "u8", "bool")
    for dt in floats + ints:
        def vals(n):
            if dt in ints:
                return Rand(n, 3.0, 2 if dt == "bool" else 200)
            return Rand(n, 3.0 if dt not in ("f16", "bf16") else 2.0)

        for nrows, ncols in [(0, 8), (5, 0), (0, 0), (1, 8), (3, 1), (2, 64)]:
            add(f"{dt} [{nrows},{ncols}]", spec(dt, vals(nrows * ncols), (nrows, ncols)), [0], False)
        for ncols in list(range(1, 71)) if dt in ("f32", "bf16") else (1, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 70):
            nrows = 5 + ncols % 13
            add(f"{dt} [{nrows},{ncols}]", spec(dt, vals(nrows * ncols), (nrows, ncols)), [0], ncols % 2 == 0)
        add(f"{dt} [3,7,20] d1", spec(dt, vals(420), (3, 7, 20)), [1], False)
        add(f"{dt} [3,7,20] d-2 keep", spec(dt, vals(420), (3, 7, 20)), [-2], True)
        add(f"{dt} [4,0,6] d1", spec(dt, [], (4, 0, 6)), [1], True)
        add(f"{dt} [40,300]", spec(dt, vals(12000), (40, 300)), [0], False)
        add(f"{dt} [20,270] stepped", spec(dt, vals(20 * 540), (20, 270), (540, 2)), [0], False)
        add(f"{dt} [17,33] transposed", spec(dt, vals(17 * 33), (17, 33), (1, 17)), [0], False)
        add(f"{dt} [600,9]", spec(dt, vals(600 * 9), (600, 9)), [0], False)
        add(f"{dt} [9,6,1]", spec(dt, vals(54), (9, 6, 1)), [0], False)
        add(f"{dt} [9,1,6]", spec(dt, vals(54), (9, 1, 6)), [0], True)
        add(f"{dt} [12,7] stepped", spec(dt, vals(12 * 14), (12, 7), (14, 2)), [0], False)
        add(f"{dt} [6,4,37] stepped d1", spec(dt, vals(6 * 4 * 111), (6, 4, 37), (444, 111, 3)), [1], False)
        add(f"{dt} [5,33] stepped keep", spec(dt, vals(5 * 99), (5, 33), (99, 3)), [0], True)
    # Huge nrows: the base is made on both sides (`hash` below).
    for dt in ("f32", "f64", "bf16", "f16", "i64"):
        n = (1 << 20) * 3
        k = torch.arange(n, dtype=torch.int64)
        v = ((k * 2654435761) % (1 << 20)).double() / 1024 - 512
        if dt == "i64":
            v = ((k * 2654435761) % 1000).double()
        if dt in ("f16", "bf16"):
            v = ((k * 2654435761) % 256).double() / 16 - 8
        x = v.to(DT[dt]).reshape(1 << 20, 3)
        for op in ("sum", "mean"):
            fn = torch.sum if op == "sum" else torch.mean
            out = result(lambda: fn(x, dim=[0], keepdim=False))
            cases.append({"name": f"{dt} huge {op}", "x": {"hash": dt, "size": [1 << 20, 3]}, "op": op, "dims": [0], "keepdim": False, "out": out})
    return cases


def lsm_cases():
    cases = []

    def add(name, xs, dim):
        xsp, x = xs
        cases.append({"name": f"{name} dim={dim}", "x": xsp, "dim": dim, "out": result(lambda: torch.log_softmax(x, dim))})

    sp = [float("nan"), 1.0, float("inf"), float("-inf"), 0.0, 1e30, -1e30, 2.0]
    for dim in (0, -2):
        for size in [(0, 5), (5, 0), (1, 5), (5, 1), (0, 0), (2, 0, 3), (3, 1, 1), (1, 1), (4, 9), (3, 17), (6, 33)]:
            add(f"{size}", dense("f32", size), dim)
        # NaN / inf in a column; all -inf; all +inf; mixed.
        add("special col", spec("f32", sp * 3, (8, 3), (1, 8)), dim)
        add("special rows", spec("f32", sp * 2, (4, 4)), dim)
        add("all -inf", spec("f32", [float("-inf")] * 12, (3, 4)), dim)
        add("all +inf", spec("f32", [float("inf")] * 12, (3, 4)), dim)
        add("all nan", spec("f32", [float("nan")] * 18, (2, 9)), dim)
        add("expanded", spec("f32", [1.0, 2.0, 3.0], (4, 3), (0, 1)), dim)
        add("stepped", spec("f32", RNG.vals(60).vals, (5, 6), (12, 2), 1), dim)
        add("3-D", dense("f32", (3, 4, 10)), dim)
    return cases


def gelu_cases():
    cases = []

    def add(name, xs):
        xsp, x = xs
        # PyTorch's vector-loop value of every element (its scalar loop,
        # std::erf, takes the elements past the last whole 32 of a
        # contiguous run and every element of a gapped input).
        flat = x.reshape(-1)
        pad = torch.cat([flat, torch.zeros(32 * (flat.numel() // 32 + 1) - flat.numel(), dtype=x.dtype)])
        vec = F.gelu(pad)[: flat.numel()].reshape(x.shape)
        cases.append({"name": name, "x": xsp, "out": result(lambda: F.gelu(x)), "vec": result(lambda: vec)})

    for dt in ("f16", "bf16"):
        allv = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(DT[dt]).float()
        allv = allv[torch.isfinite(allv)]
        vec = F.gelu(allv.to(DT[dt]))
        # The values where PyTorch's scalar loop and its vector loop differ.
        strided = torch.empty(allv.numel() * 2, dtype=DT[dt])
        strided[::2] = allv.to(DT[dt])
        sc = F.gelu(strided[::2])
        diff = allv[(sc.float() != vec.float()) & ~(torch.isnan(sc) & torch.isnan(vec))]
        hard = diff.tolist()[:40]
        vals = RNG.vals(70, 5.0)
        for n in (0, 1, 31, 32, 33, 64, 65):
            v = (hard + vals.vals)[:n] if n < 40 else (vals.vals[: n - len(hard[:8])] + hard[:8])
            add(f"{dt} len {n}", spec(dt, v, (n,)))
        add(f"{dt} stepped", spec(dt, hard + vals.vals + vals.vals, (40,), (2,)))
        add(f"{dt} transposed", spec(dt, hard + vals.vals, (8, 5), (1, 8)))
        add(f"{dt} expanded", spec(dt, hard[:1], (40,), (0,)))
        add(f"{dt} 0-d", spec(dt, hard[:1], ()))
        add(f"{dt} special", spec(dt, [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 65504.0 if dt == "f16" else 3e38], (6,)))
        cases.append({"name": f"{dt} scalar-vector differ count", "count": int(diff.numel())})
    return cases


# ------------------------------------------------------------- strata-autograd
def grad_cases():
    cases = []

    def add(name, size, stride, offset=0, dtype="f32", prog="wsum", passes=1, base_len=None):
        n = base_len
        if n is None:
            n = offset + 1 + sum((s - 1) * st for s, st in zip(size, stride)) if 0 not in size else offset
        base = [((3 * i) % 17 - 8) / 4.0 for i in range(n)]
        sp, t = spec(dtype, base, size, stride, offset)
        p = t.detach().requires_grad_(True)
        expected = []
        for _ in range(passes):
            try:
                w = torch.tensor([((2 + 3 * i) % 17 - 8) / 4.0 for i in range(p.numel())], dtype=p.dtype).reshape(p.shape)
                if prog == "wsum":
                    loss = (p * w).sum()
                elif prog == "sum":
                    loss = p.sum()
                elif prog == "half":
                    loss = (p.to(torch.float16) * w.to(torch.float16)).float().sum()
                elif prog == "double":
                    loss = (p.double() * w.double()).sum()
                elif prog == "t":
                    loss = (p.t() * w.t()).sum()
                elif prog == "exp":
                    loss = (p.exp() * w).sum()
                else:
                    raise ValueError(prog)
                loss.backward()
                g = p.grad
                expected.append({"strides": list(g.stride()), "values": hexes(g)})
            except RuntimeError as e:
                expected.append({"error": str(e).split("\n")[0][:200]})
        cases.append({"name": name, "leaf": sp, "prog": prog, "expected": expected})

    for prog in ("wsum", "sum", "half", "double", "exp"):
        add(f"empty {prog}", [0], [1], prog=prog)
        add(f"empty 2-D {prog}", [3, 0], [1, 3], prog=prog)
        add(f"empty 0 stride {prog}", [0, 4], [0, 0], prog=prog)
        add(f"0-d {prog}", [], [], prog=prog)
        add(f"0-d offset {prog}", [], [], offset=3, prog=prog, base_len=5)
        add(f"size-1 odd strides {prog}", [1, 3, 1], [7, 1, 5], prog=prog, base_len=3)
        add(f"size-1 stride 0 {prog}", [3, 1], [1, 0], prog=prog)
        add(f"all size-1 {prog}", [1, 1, 1], [9, 4, 2], prog=prog, base_len=1)
        add(f"transposed {prog}", [3, 4], [1, 3], prog=prog)
        add(f"permuted {prog}", [2, 3, 4], [1, 8, 2], prog=prog)
        add(f"permuted size-1 {prog}", [2, 1, 4], [1, 11, 2], prog=prog)
        add(f"stepped {prog}", [3, 4], [10, 2], offset=1, prog=prog)
        add(f"stepped 1-D {prog}", [5], [3], prog=prog)
        add(f"expanded {prog}", [3, 4], [0, 1], prog=prog)
        add(f"expanded all {prog}", [2, 3], [0, 0], prog=prog)
        add(f"overlapping {prog}", [3, 3], [1, 1], prog=prog)
        add(f"overlapping 2 {prog}", [4, 2], [2, 3], prog=prog)
        add(f"offset dense {prog}", [2, 3], [3, 1], offset=4, prog=prog)
        add(f"transposed 3 passes {prog}", [4, 2], [1, 4], prog=prog, passes=3)
        add(f"expanded 2 passes {prog}", [2, 3], [1, 0], prog=prog, passes=2)
    for dt in ("f16", "bf16", "f64"):
        add(f"{dt} transposed", [3, 4], [1, 3], dtype=dt)
        add(f"{dt} transposed double", [3, 4], [1, 3], dtype=dt, prog="double")
        add(f"{dt} expanded double", [3, 4], [0, 1], dtype=dt, prog="double")
        add(f"{dt} size-1 double", [1, 3, 1], [7, 1, 5], dtype=dt, prog="double", base_len=3)
    return cases


def write(path, obj):
    raw = json.dumps(obj, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=f, mtime=0) as g:
            g.write(raw)
    print(path, len(raw), os.path.getsize(path))


def main():
    assert torch.__version__.startswith("2.15"), torch.__version__
    t = {"version": torch.__version__, "ce": ce_cases(), "sum": sum_cases(), "lsm": lsm_cases(), "gelu": gelu_cases()}
    write(os.path.join(ROOT, "crates/strata-tensor/tests/data/hostile_sweep_s54c.json.gz"), t)
    a = {"version": torch.__version__, "grad": grad_cases()}
    write(os.path.join(ROOT, "crates/strata-autograd/tests/data/hostile_sweep_s54c.json.gz"), a)


if __name__ == "__main__":
    main()
