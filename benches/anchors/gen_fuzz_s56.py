#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread, AVX2) for
crates/strata-tensor/tests/suite/fuzz_s56.rs, written to
crates/strata-tensor/tests/data/fuzz_s56.json.gz: what the session-56
conformance sweep (fuzz_conformance_core.py / fuzz_conformance_ops.py seeds
3314-3319, fuzz_conformance_s55.py seeds 3320-3323) found.

"layouts": the strides of the results PyTorch allocates itself. Its
TensorIterator lays an element-wise op's output out dense in the order of
its operands' strides (a transposed input gives a transposed result; all
operands contiguous: row-major; all of one shape with the same
non-overlapping and dense strides: those strides, size-1 dims included),
after converting on the CPU an operand of another dtype with `.to()`, which
keeps a dense layout and makes any other dense in its own order;
`torch.where` converts on every device, the condition first in the order;
`empty_like`/`zeros_like`/`ones_like`/`full_like` keep the input's dense
layout; `masked_fill`, `triu`/`tril` and `pow(scalar, tensor)` are
row-major. Each case: the op, its operands (values of a base storage viewed
with "size", "stride", "offset"), its scalar arguments, and PyTorch's
result: shape, strides, dtype, values (exact ones compared exactly, the
others to 1e-6). "errors": programs whose PyTorch answer is an error.

"gelu": f32 F.gelu(approximate='none') bit for bit. A contiguous tensor of
two elements or more goes to oneDNN's eltwise_gelu_erf (AVX2:
Abramowitz-Stegun with oneDNN's exp); any other to GeluKernelImpl:
Vectorized<float>::erf on whole chunks of 16 elements of each inner row of
TensorIterator, the scalar functor (glibc's erff) on the rest and on every
element of a row the input is not contiguous along. "sweep": the
f32 patterns (i * 0x9E3779B1) mod 2^32 for i < 2^20 as one contiguous
tensor (oneDNN), as rows of 16 cut out of rows of 32 (vectorised loop) and
as x[::2] of a doubled storage (scalar functor): FNV-1a 64 of each
result's patterns (little-endian u32, every NaN as 0x7fc00000). "values":
specials, subnormals, huge values and patterns where the three paths
differ, with the three results as hex. "cases": views of a base storage
(hex patterns) and PyTorch's result patterns and strides.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_fuzz_s56.py \\
        crates/strata-tensor/tests/data/fuzz_s56.json.gz
"""
import json
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

from fixture_io import write_fixture

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}
NAME = {v: k for k, v in DT.items()}


def num(x):
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return x
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


# ------------------------------------------------------------------ layouts
def operand(dt, size, stride, offset=0, seed=0):
    """A view of a base storage holding small exact values."""
    n = offset + 1 + sum((a - 1) * b for a, b in zip(size, stride)) if 0 not in size else offset
    vals = [((3 * i + 7 * seed) % 11 - 5) / 4.0 for i in range(max(n, 1))]
    if dt == "bool":
        base = torch.tensor([v > 0 for v in vals])
    elif dt in ("i32", "i64"):
        base = torch.tensor([int(4 * v) for v in vals], dtype=DT[dt])
    elif dt == "u8":
        base = torch.tensor([int(4 * v) + 5 for v in vals], dtype=DT[dt])
    else:
        base = torch.tensor(vals, dtype=torch.float64).to(DT[dt])
    spec = {"dtype": dt, "base": [num(v) for v in base.tolist()], "size": list(size),
            "stride": list(stride), "offset": offset}
    return spec, base.as_strided(size, stride, offset)


def run(op, xs, args):
    a = xs[0] if xs else None
    if op in ("neg", "abs", "exp", "sqrt", "sigmoid", "relu", "sign"):
        return getattr(torch, op)(a)
    if op in ("silu", "gelu"):
        return getattr(F, op)(a)
    if op == "clamp":
        return torch.clamp(a, args["lo"], args["hi"])
    if op in ("add", "sub", "mul", "div", "lt", "eq", "maximum"):
        b = xs[1] if len(xs) > 1 else args["scalar"]
        return getattr(torch, op)(a, b)
    if op == "pow":
        return torch.pow(a, xs[1] if len(xs) > 1 else args["scalar"])
    if op == "scalar_pow":
        return torch.pow(args["scalar"], a)
    if op == "where":
        return torch.where(a, xs[1] if len(xs) > 1 else args["a"], xs[2] if len(xs) > 2 else args["b"])
    if op == "addcmul":
        return torch.addcmul(a, xs[1], xs[2], value=args["value"])
    if op in ("zeros_like", "ones_like", "empty_like"):
        kw = {"dtype": DT[args["dtype"]]} if args.get("dtype") else {}
        return getattr(torch, op)(a, **kw)
    if op == "full_like":
        kw = {"dtype": DT[args["dtype"]]} if args.get("dtype") else {}
        return torch.full_like(a, args["value"], **kw)
    if op == "mse_loss":
        return F.mse_loss(a, xs[1], reduction="none", weight=xs[2] if len(xs) > 2 else None)
    if op == "masked_fill":
        return a.masked_fill(xs[1], args["value"])
    if op == "triu":
        return torch.triu(a, args.get("diagonal", 0))
    raise SystemExit(f"unknown op {op}")


# Operand layouts: (size, stride, offset) of 2-D and 3-D views.
T23 = ([2, 3], [1, 2], 0)         # transposed
C23 = ([2, 3], [3, 1], 0)         # contiguous
S23 = ([2, 3], [6, 2], 1)         # stepped (not dense)
E23 = ([2, 3], [1, 0], 0)         # expanded along dim 1
P234 = ([2, 3, 4], [1, 8, 2], 0)  # permuted
C234 = ([2, 3, 4], [12, 4, 1], 0)
N234 = ([2, 3, 4], [1, 10, 3], 0)  # permuted and stepped (not dense)
ODD131 = ([1, 3, 1], [7, 1, 5], 0)  # odd strides on size-1 dims (contiguous)
PERM131 = ([1, 3, 1], [3, 1, 1], 0)
T1 = ([3], [1], 0)
ROW = ([1, 3], [3, 1], 0)
COL = ([2, 1], [1, 1], 0)


def layout_cases():
    cases = []

    def add(name, op, ops, args=None, exact=True):
        args = args or {}
        specs, xs = [], []
        for k, (dt, (size, stride, off)) in enumerate(ops):
            s, t = operand(dt, size, stride, off, seed=k)
            specs.append(s)
            xs.append(t)
        y = run(op, xs, args)
        rec = {"name": name, "op": op, "inputs": specs, "args": args,
               "out": {"shape": list(y.shape), "strides": list(y.stride()), "dtype": NAME[y.dtype],
                       "exact": exact}}
        if op != "empty_like":
            vals = y.reshape(-1).tolist()
            rec["out"]["values"] = [num(v) for v in vals]
        cases.append(rec)

    for lay, ln in [(T23, "transposed"), (S23, "stepped"), (E23, "expanded"), (P234, "permuted"),
                    (N234, "permuted stepped"), (ODD131, "odd size-1 strides")]:
        add(f"neg {ln}", "neg", [("f32", lay)])
        add(f"abs i32 {ln}", "abs", [("i32", lay)])
        add(f"exp {ln}", "exp", [("f32", lay)], exact=False)
        add(f"sqrt of i64 {ln}", "sqrt", [("i64", lay)], exact=False)
        add(f"relu bf16 {ln}", "relu", [("bf16", lay)])
        add(f"sigmoid f16 {ln}", "sigmoid", [("f16", lay)], exact=False)
        add(f"silu f64 {ln}", "silu", [("f64", lay)], exact=False)
        add(f"gelu f32 {ln}", "gelu", [("f32", lay)], exact=False)
        add(f"clamp i32 to float {ln}", "clamp", [("i32", lay)], {"lo": 0.5, "hi": None})
        add(f"sign u8 {ln}", "sign", [("u8", lay)])
        add(f"add scalar {ln}", "add", [("f32", lay)], {"scalar": 1})
        add(f"lt scalar {ln}", "lt", [("i64", lay)], {"scalar": 0.5})
        add(f"zeros_like {ln}", "zeros_like", [("f32", lay)])
        add(f"ones_like f64 of i32 {ln}", "ones_like", [("i32", lay)], {"dtype": "f64"})
        add(f"full_like {ln}", "full_like", [("bf16", lay)], {"value": 2.5})
        add(f"empty_like {ln}", "empty_like", [("u8", lay)])
        add(f"pow scalar exponent {ln}", "pow", [("f32", lay)], {"scalar": 2})
        add(f"scalar_pow {ln}", "scalar_pow", [("f32", lay)], {"scalar": 2}, exact=False)
        add(f"masked_fill {ln}", "masked_fill", [("f32", lay), ("bool", (lay[0], [0] * len(lay[0]), 0))],
            {"value": 9.0})
        if len(lay[0]) >= 2:
            add(f"triu {ln}", "triu", [("f32", lay)], {"diagonal": 0})
    # Binary: the first operand's order decides, broadcast strides skipped.
    pairs = [
        ("transposed + contiguous", T23, C23), ("contiguous + transposed", C23, T23),
        ("transposed + transposed", T23, T23), ("expanded + transposed", E23, T23),
        ("transposed + row", T23, ROW), ("row + transposed", ROW, T23),
        ("col + transposed", COL, T23), ("stepped + transposed", S23, T23),
        ("transposed + 1-D", T23, T1), ("permuted + contiguous", P234, C234),
        ("contiguous + permuted", C234, P234), ("permuted + permuted stepped", P234, N234),
        ("odd size-1 + contiguous", ODD131, PERM131),
    ]
    for name, la, lb in pairs:
        add(f"add {name}", "add", [("f32", la), ("f32", lb)])
        add(f"mul i64 x f16 {name}", "mul", [("i64", la), ("f16", lb)])
        add(f"div i32 {name}", "div", [("i32", la), ("i32", lb)], exact=False)
        add(f"eq bool x u8 {name}", "eq", [("bool", la), ("u8", lb)])
        add(f"maximum f64 x f32 {name}", "maximum", [("f64", la), ("f32", lb)])
        add(f"sub f16 x bf16 {name}", "sub", [("f16", la), ("bf16", lb)])
        add(f"pow {name}", "pow", [("f32", la), ("f32", lb)], exact=False)
        add(f"mse_loss {name}", "mse_loss", [("f32", la), ("f32", lb)])
        add(f"where {name}", "where", [("bool", la), ("f32", lb), ("f32", C23 if la[0] == [2, 3] else la)])
    # A converted operand: dense ones keep their order, others become dense.
    add("add f32 + expanded f64", "add", [("f32", T23), ("f64", E23)])
    add("add expanded f16 + transposed f32", "add", [("f16", E23), ("f32", T23)])
    add("add stepped i32 + transposed f32", "add", [("i32", S23), ("f32", T23)])
    add("where condition transposed, scalars", "where", [("bool", T23)], {"a": 1.0, "b": -1.0})
    add("where condition contiguous, operands transposed", "where",
        [("bool", C23), ("f32", T23), ("f32", T23)])
    add("where u8 condition transposed", "where", [("u8", T23), ("i64", C23), ("i64", C23)])
    add("addcmul transposed first", "addcmul", [("f32", T23), ("f32", C23), ("f32", C23)], {"value": 2})
    add("addcmul contiguous first", "addcmul", [("f32", C23), ("f32", T23), ("f32", T23)], {"value": 2})
    add("addcmul expanded first", "addcmul", [("f64", E23), ("f32", T23), ("f32", C23)], {"value": 0.5})
    add("mse_loss weighted transposed", "mse_loss", [("f32", T23), ("f32", T23), ("f32", C23)])
    add("mse_loss broadcast row", "mse_loss", [("f32", ROW), ("f32", T23)])
    add("mse_loss f16 x bf16 expanded", "mse_loss", [("f16", E23), ("bf16", T23)], exact=False)
    add("mse_loss bool x f32 transposed", "mse_loss", [("bool", T23), ("f32", C23)])
    return cases


def error_cases():
    out = []
    b = torch.tensor([True, False])
    f = torch.tensor([1.0, 2.0])
    w = torch.tensor([1.0, 3.0])
    for name, xs in [("mse_loss bool input, weight", (b, f, w)), ("mse_loss bool target, weight", (f, b, w))]:
        try:
            F.mse_loss(xs[0], xs[1], reduction="none", weight=xs[2])
            raise SystemExit(f"{name}: PyTorch succeeded")
        except RuntimeError as e:
            out.append({"name": name, "inputs": [[num(v) for v in t.tolist()] for t in xs],
                        "dtypes": [NAME[t.dtype] for t in xs], "class": "dtype",
                        "torch_message": str(e).split("\n")[0]})
    return out


# --------------------------------------------------------------------- gelu
def u32(t):
    return t.contiguous().view(torch.int32).numpy().view(np.uint32).reshape(-1)


def canon(b):
    b = b.copy()
    f = b.view(np.float32)
    b[np.isnan(f)] = 0x7FC00000
    return b


def fnv(b):
    h = 0xCBF29CE484222325
    for byte in canon(b).astype("<u4").tobytes():
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def hexs(b):
    return "".join("%08x" % int(v) for v in b)


def paths(x):
    """F.gelu of the f32 `x` (1-D, length a multiple of 16) through oneDNN,
    the vectorised loop and the scalar functor."""
    n = x.numel()
    onednn = F.gelu(x)
    wide = torch.zeros(n // 16, 32)
    wide[:, :16] = x.reshape(-1, 16)
    vec = F.gelu(wide[:, :16]).reshape(-1)
    w2 = torch.zeros(n, 2)
    w2[:, 0] = x
    sca = F.gelu(w2[:, 0])
    return u32(onednn), u32(vec), u32(sca)


def gelu_record():
    rec = {}
    i = np.arange(1 << 20, dtype=np.uint64)
    pats = ((i * 0x9E3779B1) & 0xFFFFFFFF).astype(np.uint32)
    x = torch.from_numpy(pats.view(np.float32).copy())
    o, v, s = paths(x)
    rec["sweep"] = {"n": 1 << 20, "multiplier": 0x9E3779B1, "onednn": fnv(o), "vectorised": fnv(v),
                    "scalar": fnv(s),
                    "differ": {"onednn_scalar": int((canon(o) != canon(s)).sum()),
                               "vectorised_scalar": int((canon(v) != canon(s)).sum()),
                               "onednn_vectorised": int((canon(o) != canon(v)).sum())}}
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38,
                        -1.1754942e-38, 1.17549435e-38, 3.4028235e38, -3.4028235e38, 1e-30, -1e-30,
                        1e-7, -1e-7, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 5.0, -5.0, 5.5, -5.5, 9.0, -9.0,
                        10.0, -10.0, 13.0, -13.0, 14.0, -14.0, 1e10, -1e10, 1e20, -1e20],
                       dtype=np.float32).view(np.uint32)
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00000, 0x7FC12345], dtype=np.uint32)
    rng = np.random.default_rng(56)
    sub = (rng.integers(1, 0x007FFFFF, 64, dtype=np.uint32)
           | (rng.integers(0, 2, 64, dtype=np.uint32) << 31)).astype(np.uint32)
    dense = (rng.standard_normal(4096) * rng.choice([0.3, 1.0, 2.5, 4.0], 4096)).astype(np.float32)
    dense = dense.view(np.uint32)
    od, vd, sd = paths(torch.from_numpy(dense.view(np.float32).copy()))
    hard = np.concatenate([dense[od != sd][:600], dense[vd != sd][:600], dense[od != vd][:300]])
    vals = np.concatenate([special, nans, sub, hard, dense[:512]])
    vals = vals[: len(vals) - len(vals) % 16]
    o, v, s = paths(torch.from_numpy(vals.view(np.float32).copy()))
    rec["values"] = {"x": hexs(vals), "onednn": hexs(o), "vectorised": hexs(v), "scalar": hexs(s)}
    # Layout cases over a base of hard, special and random values.
    base_bits = np.concatenate([special, nans[:2], sub[:8], hard[:200], dense[512:1024]])
    base = torch.from_numpy(base_bits.view(np.float32).copy())
    cases = []

    def add(name, size, stride, offset=0):
        xv = base.as_strided(size, stride, offset)
        y = F.gelu(xv)
        extent = offset + 1 + sum((a - 1) * b for a, b in zip(size, stride)) if xv.numel() else offset
        cases.append({"name": name, "base": hexs(u32(base[:max(extent, 1)])), "size": list(size),
                      "stride": list(stride), "offset": offset, "out": hexs(u32(y)),
                      "strides": list(y.stride())})

    for n in (0, 1, 2, 3, 15, 16, 17, 31, 33, 100, 700):
        add(f"len {n}", (n,), (1,))
    add("0-d", (), ())
    add("offset 5 len 37", (37,), (1,), 5)
    for r, c in [(3, 15), (3, 16), (2, 17), (4, 33), (17, 3), (5, 1), (1, 19), (19, 19)]:
        add(f"{r}x{c}", (r, c), (c, 1))
        add(f"{r}x{c} transposed", (c, r), (1, c))
    for w, c, o in [(24, 19, 0), (40, 33, 1), (20, 16, 3), (40, 31, 2)]:
        add(f"4x{c} of width {w} at {o}", (4, c), (w, 1), o)
        add(f"4x{c} of width {w} at {o} transposed", (c, 4), (1, w), o)
    add("stepped 1-D", (40,), (2,))
    add("stepped columns", (3, 20), (40, 2))
    add("3-D permuted", (5, 17, 2), (1, 10, 5))
    add("expanded", (40,), (0,), 5)
    add("expanded rows", (3, 20), (0, 1))
    add("size-1 dims", (1, 20, 1), (99, 1, 7))
    rec["cases"] = cases
    return rec


def main():
    torch.set_num_threads(1)
    out = {"torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(),
           "layouts": layout_cases(), "errors": error_cases(), "gelu": gelu_record()}
    write_fixture(sys.argv[1], json.dumps(out, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
