#!/usr/bin/env python3
"""Session 79: PyTorch 2.15's CPU answers (one thread) to hostile calls of
the element-wise math session 79 added (erfinv, lgamma, digamma, polygamma,
mvlgamma, i0, special.i0e/i1/i1e, sinc, special.entr/ndtr/ndtri/log_ndtr/
erfcx, logit, xlog1py, hypot, copysign, nextafter, fmax/fmin, heaviside,
gcd/lcm, the shifts, signbit, ldexp, frexp, float_power, true_divide,
floor_divide, isclose, isreal, rad2deg/deg2rad, angle, positive), written
to two fixtures:

- crates/strata-tensor/tests/data/hostile_s79.json.gz
  (crates/strata-tensor/tests/suite/hostile_sweep_s79.rs): each call's
  results (dtype, shape, values; integers exactly) or the first line of
  PyTorch's error;
- crates/strata-autograd/tests/data/hostile_s79_grad.json.gz
  (crates/strata-autograd/tests/suite/hostile_sweep_s79.rs): gradients at
  the singular and edge points (sum of the output's backward with an
  upstream of ones), PyTorch's values including its inf and NaN.

Unlike gen_math_ops_s79.py's random draws the cases are listed one by one:
every unary op at the edges of its domain in every dtype strata has, on
empty, 0-d, transposed, stepped and expanded (stride 0) operands;
polygamma's and mvlgamma's integer arguments at 0, the ends of int64 and
negative; gcd/lcm at i64::MIN and with u8 wrap-around; shifts by negative
amounts, by the bit width and beyond, by scalars of other kinds; ldexp with
huge exponents; frexp of zeros, infinities, NaN and subnormals; nextafter
at the ends of each float dtype; mixed dtypes, bool operands and broadcasts
that fail; isclose's argument checks; floor_divide by zero and
i64::MIN // -1.

Left out: the sign of a NaN (JSON's "nan" has none: -NaN for signbit
and angle, and copysign by NaN in bf16, where PyTorch's vectorised f64 to
bf16 conversion of an operand of 4 or more elements sets NaN's sign bit and
a shorter one does not); polygamma with n = 2^31 - 1 (PyTorch's kernel
forms `n + 1` in a C int, which overflows: undefined behaviour, NaN or inf
by the compiler's choice); mvlgamma with p = 2^31 (PyTorch and strata both
form a [..., p] intermediate, 16 GiB an element of the input: the answer depends on the
machine's memory, and an overcommitting kernel kills the process).

Each input: pytorch_fixture::input's format, plus `expand` (a shape to
expand the tensor to) or `step` (every step-th element along dim 0).
Scalar operands: args.scalar {kind: bool|int|float, value}.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_hostile_s79.py \\
        crates/strata-tensor/tests/data/hostile_s79.json.gz \\
        crates/strata-autograd/tests/data/hostile_s79_grad.json.gz
"""
import json
import math
import sys
import warnings

import torch

from fixture_io import fmt, write_fixture

torch.set_num_threads(1)
warnings.simplefilter("ignore")

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = ["f64", "f32", "f16", "bf16"]
INTS = ["i64", "i32", "u8"]
inf, nan = math.inf, math.nan
I64_MAX, I64_MIN = 2 ** 63 - 1, -2 ** 63


def values_of(t):
    if t.dtype == torch.bool:
        return [bool(v) for v in t.flatten().tolist()]
    if t.dtype.is_floating_point:
        return [fmt(float(v)) for v in t.double().flatten().tolist()]
    return [int(v) for v in t.flatten().tolist()]


def record(t):
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data": values_of(t)}


class In:
    """An input: its description for the test and the tensor itself."""

    def __init__(self, values, dtype, shape=None, expand=None, step=None, t=False):
        if dtype in INTS:
            base = torch.tensor(values, dtype=torch.int64).to(DTYPES[dtype]) if dtype != "u8" else \
                torch.tensor([v % 256 for v in values] if isinstance(values, list) else values % 256,
                             dtype=torch.int64).to(torch.uint8)
        elif dtype == "bool":
            base = torch.tensor(values, dtype=torch.float64).to(torch.bool)
        else:
            base = torch.tensor(values, dtype=torch.float64).to(DTYPES[dtype])
        if shape is not None:
            base = base.reshape(shape)
        self.desc = {"dtype": dtype, "shape": list(base.shape), "values": values_of(base), "t": t}
        x = base.t() if t else base
        if expand is not None:
            self.desc["expand"] = expand
            x = x.expand(*expand)
        if step is not None:
            self.desc["step"] = step
            x = x[::step]
        self.t = x


def outcome(call):
    try:
        y = call()
        ys = list(y) if isinstance(y, (tuple, list)) else [y]
        return {"results": [record(t) for t in ys]}
    except Exception as e:  # noqa: BLE001 - PyTorch raises several types
        return {"error": str(e).split("\n")[0][:200]}


CASES = []


def case(note, op, inputs, args, call):
    c = {"note": note, "op": op, "args": args, "inputs": [i.desc for i in inputs]}
    if "-v" in sys.argv:
        print(note, file=sys.stderr, flush=True)
    small = [i for i in inputs if i.t.numel() < 2 ** 20]
    before = [i.t.clone() for i in small]
    c.update(outcome(call))
    for b, i in zip(before, small):
        assert torch.equal(b, i.t) or (b.is_floating_point() and torch.equal(b.isnan(), i.t.isnan())), note
    CASES.append(c)


def scalar_arg(v):
    if isinstance(v, bool):
        return {"kind": "bool", "value": v}
    if isinstance(v, int):
        return {"kind": "int", "value": v}
    return {"kind": "float", "value": fmt(v)}


S = torch.special
UNARY = {
    "erfinv": (torch.erfinv, [1.0, -1.0, 1.0000001, -1.5, 0.0, -0.0, 0.9999999, inf, nan, 1e-300]),
    "lgamma": (torch.lgamma, [0.0, -0.0, -1.0, -2.0, -100.0, 1e308, 1e-308, 5e-324, -1e-308, inf, -inf, nan,
                              1.0, 2.0, -0.5, 2.5e305, -4503599627370497.0]),
    "digamma": (torch.digamma, [0.0, -0.0, -1.0, -2.0, -1e10, 1e308, 1e-308, 5e-324, -5e-324, inf, -inf, nan,
                                1.0, -0.5, 1e17, -1e17]),
    "i0": (torch.i0, [0.0, -0.0, 700.0, 713.0, -713.0, 1e10, inf, -inf, nan, 88.0, 89.0, -30.0]),
    "special_i0e": (S.i0e, [0.0, -0.0, 1e300, -1e300, inf, -inf, nan, 8.0, -8.0, 5e-324]),
    "special_i1": (S.i1, [0.0, -0.0, 700.0, 713.0, -713.0, 1e10, inf, -inf, nan, 90.0, -90.0, 5e-324]),
    "special_i1e": (S.i1e, [0.0, -0.0, 1e300, -1e300, inf, -inf, nan, 8.0, -8.0, 5e-324]),
    "sinc": (torch.sinc, [0.0, -0.0, inf, -inf, nan, 1e300, -1e300, 1.0, -1.0, 1e-300, 5e-324, 1e16]),
    "special_entr": (S.entr, [0.0, -0.0, -1.0, -5e-324, inf, -inf, nan, 1e308, 5e-324, 1.0]),
    "special_ndtr": (S.ndtr, [0.0, -0.0, -40.0, 40.0, inf, -inf, nan, -1e300, 5e-324]),
    "special_ndtri": (S.ndtri, [0.0, -0.0, 1.0, 1.0000001, -0.5, 2.0, inf, -inf, nan, 5e-324, 0.5,
                                0.9999999999999999, 1e-300]),
    "special_log_ndtr": (S.log_ndtr, [-40.0, -1e10, -1e200, -inf, inf, nan, 0.0, 40.0, -38.5, 1e300]),
    "special_erfcx": (S.erfcx, [-30.0, -27.0, -26.5, -1e300, -inf, inf, nan, 1e300, 1e10, 0.0, -0.0, 50.0]),
    "signbit": (torch.signbit, [0.0, -0.0, nan, inf, -inf, -5e-324, 1.0]),
    "frexp": (torch.frexp, [0.0, -0.0, inf, -inf, nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1e308, 1.0,
                            0.5, 3.0, 1e-45, 6e-8, 9.2e-41]),
    "rad2deg": (torch.rad2deg, [0.0, -0.0, inf, -inf, nan, 1e308, -1e308, 5e-324]),
    "deg2rad": (torch.deg2rad, [0.0, -0.0, inf, -inf, nan, 1e308, 5e-324]),
    "angle": (torch.angle, [0.0, -0.0, -1.0, inf, -inf, nan, 5e-324, -5e-324]),
    "positive": (torch.positive, [0.0, -0.0, nan, inf]),
    "isreal": (torch.isreal, [0.0, nan, inf]),
}
INT_VALUES = [0, 1, -1, 2, -2, 5, 100, I64_MAX, I64_MIN]
INT32_VALUES = [0, 1, -1, 2, -2, 5, 100, 2 ** 31 - 1, -2 ** 31]
U8_VALUES = [0, 1, 2, 5, 100, 255]


def int_values(d):
    return {"i64": INT_VALUES, "i32": INT32_VALUES, "u8": U8_VALUES}[d]


def unary_cases():
    for op, (f, vals) in UNARY.items():
        for d in FLOATS:
            case(f"{op} edges {d}", op, [In(vals, d)], {}, lambda f=f, d=d, v=vals: f(In(v, d).t))
        for d in INTS:
            x = In(int_values(d), d)
            case(f"{op} {d}", op, [x], {}, lambda f=f, x=x: f(x.t))
        x = In([1.0, 0.0, 1.0], "bool")
        case(f"{op} bool", op, [x], {}, lambda f=f, x=x: f(x.t))
        # Layouts: empty, 0-d, transposed, stepped, expanded (stride 0).
        for note, x in [("empty", In([], "f32")), ("empty 2-d", In([], "f64", shape=[3, 0])),
                        ("0-d", In(0.25, "f32")), ("0-d f64", In(-0.0, "f64")),
                        ("transposed", In([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], "f64", shape=[2, 3], t=True)),
                        ("stepped", In([0.9, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7], "f32", step=3)),
                        ("expanded", In([0.375], "f32", expand=[4, 3])),
                        ("expanded row", In([0.1, 0.2, 0.3], "f64", shape=[1, 3], expand=[2, 3])),
                        ("empty i64", In([], "i64")), ("0-d i64", In(3, "i64"))]:
            case(f"{op} {note}", op, [x], {}, lambda f=f, x=x: f(x.t))


def polygamma_mvlgamma_cases():
    pv = [0.0, -0.0, 1.0, -1.0, -2.5, 1e-300, 5e-324, 1e300, inf, -inf, nan, 0.5]
    for n in [0, 1, 2, 3, 5, 30, 2 ** 31, 2 ** 32 + 5, 2 ** 32 - 1, I64_MAX, -1, -2 ** 31, I64_MIN, 171]:
        for d in ["f64", "f32"]:
            x = In(pv, d)
            case(f"polygamma n={n} {d}", "polygamma", [x], {"n": n}, lambda x=x, n=n: torch.polygamma(n, x.t))
    for n in [0, 1, 3, 2 ** 31, 2 ** 32 + 3]:
        for d in ["f16", "bf16", "i64", "bool", "u8"]:
            x = In([1.0, 2.0, 0.0] if d != "i64" else [1, 2, 0, -3], d)
            case(f"polygamma n={n} {d}", "polygamma", [x], {"n": n}, lambda x=x, n=n: torch.polygamma(n, x.t))
        x = In([], "f32")
        case(f"polygamma n={n} empty", "polygamma", [x], {"n": n}, lambda x=x, n=n: torch.polygamma(n, x.t))
        x = In([0.5, 1.5, 2.5], "f64", expand=[2, 3], shape=[1, 3])
        case(f"polygamma n={n} expanded", "polygamma", [x], {"n": n}, lambda x=x, n=n: torch.polygamma(n, x.t))
    x = In([], "f32")
    case("polygamma n=-1 empty", "polygamma", [x], {"n": -1}, lambda x=x: torch.polygamma(-1, x.t))
    for p in [1, 2, 3, 0, -1, 1000, I64_MAX, I64_MIN]:
        for d, vals in [("f64", [3.0, 10.0, 1e300, inf]), ("f64", [1.0, 1.5]), ("f64", [0.5]),
                        ("f64", [nan]), ("f32", [2.0, 3.0])]:
            x = In(vals, d)
            case(f"mvlgamma p={p} {d} {vals}", "mvlgamma", [x], {"p": p},
                 lambda x=x, p=p: torch.mvlgamma(x.t, p))
    for p in [1, 2, 3]:
        edge = (p - 1) / 2
        for d in ["f64", "f32", "f16", "bf16"]:
            for vals in [[edge + 1.0, edge], [edge + 1e-6, edge + 2.0], [edge - 1e-3], [-inf], [inf, 100.0]]:
                x = In(vals, d)
                case(f"mvlgamma p={p} edge {d} {vals}", "mvlgamma", [x], {"p": p},
                     lambda x=x, p=p: torch.mvlgamma(x.t, p))
        for d in ["i64", "u8", "bool", "i32"]:
            x = In([3, 5] if d != "bool" else [1.0, 1.0], d)
            case(f"mvlgamma p={p} {d}", "mvlgamma", [x], {"p": p}, lambda x=x, p=p: torch.mvlgamma(x.t, p))
        for x in [In([], "f32"), In(4.0, "f32"), In([3.0, 4.0], "f64", expand=[3, 2])]:
            case(f"mvlgamma p={p} layout", "mvlgamma", [x], {"p": p}, lambda x=x, p=p: torch.mvlgamma(x.t, p))


def logit_cases():
    vals = [0.0, -0.0, 1.0, -0.5, 1.5, 0.5, inf, -inf, nan, 5e-324, 1e-300, 0.9999999]
    for eps in [None, 0.0, 0.5, 0.6, -0.1, 1.0, 2.0, 1e-6, 1e-300, inf, -inf, nan, 0.25]:
        for d in FLOATS + ["i64", "bool"]:
            if d in ("i64", "bool") and eps not in (None, 0.25, -0.1):
                continue
            x = In(vals if d in FLOATS else ([0, 1, 2, -1] if d == "i64" else [0.0, 1.0]), d)
            case(f"logit eps={eps} {d}", "logit", [x], {"eps": None if eps is None else fmt(eps)},
                 lambda x=x, eps=eps: torch.logit(x.t, eps))
    for x in [In([], "f32"), In(0.3, "f64"), In([0.1, 0.2, 0.3, 0.4], "f32", shape=[2, 2], t=True),
              In([0.2], "f32", expand=[5])]:
        case("logit layout", "logit", [x], {"eps": 0.25}, lambda x=x: torch.logit(x.t, 0.25))


def binary(op, f, a, b, note="", args=None):
    args = dict(args or {})
    case(f"{op} {note}", op, [a, b], args, lambda: f(a.t, b.t))


def binary_scalar(op, f, a, s, note=""):
    case(f"{op} scalar {note}", op, [a], {"scalar": scalar_arg(s)}, lambda: f(a.t, s))


def float_binary_cases():
    z = [0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 5e-324, 1e308]
    n = len(z)
    ax = [v for v in z for _ in range(n)]
    bx = [v for _ in range(n) for v in z]
    for op, f in [("hypot", torch.hypot), ("copysign", torch.copysign), ("nextafter", torch.nextafter),
                  ("fmax", torch.fmax), ("fmin", torch.fmin), ("xlog1py", S.xlog1py),
                  ("special_xlog1py", S.xlog1py), ("heaviside", torch.heaviside), ("ldexp", torch.ldexp),
                  ("float_power", torch.float_power), ("true_divide", torch.true_divide),
                  ("floor_divide", torch.floor_divide)]:
        for d in FLOATS:
            if op == "copysign" and d == "bf16":
                keep = [i for i, v in enumerate(bx) if not math.isnan(v)]
                binary(op, f, In([ax[i] for i in keep], d), In([bx[i] for i in keep], d), f"pairs {d} (no NaN sign)")
                continue
            binary(op, f, In(ax, d), In(bx, d), f"pairs {d}")
        # Mixed dtypes, integer and bool operands.
        for da, db in [("f32", "f64"), ("f16", "bf16"), ("i64", "f32"), ("f16", "i64"), ("i64", "i64"),
                       ("bool", "bool"), ("i32", "bool"), ("u8", "i32"), ("bf16", "bool"), ("u8", "u8")]:
            av = [0.0, 1.0, 1.0] if da == "bool" else ([0, 3, -2] if da in ("i64", "i32") else [0, 3, 200]
                                                      if da == "u8" else [0.0, -1.5, 3.0])
            bv = [1.0, 0.0, 1.0] if db == "bool" else ([2, 0, -3] if db in ("i64", "i32") else [2, 0, 7]
                                                      if db == "u8" else [2.0, -0.0, inf])
            binary(op, f, In(av, da), In(bv, db), f"{da} {db}")
        # Broadcasting: 0-d with n-d, empty, a failing broadcast, expanded and transposed operands.
        binary(op, f, In(2.0, "f64"), In([[1.0, -2.0], [0.0, 3.0]], "f32"), "0-d f64 with 2-d f32")
        binary(op, f, In([1.0, -2.0, 0.5], "f32"), In(-0.0, "f64"), "1-d f32 with 0-d f64")
        binary(op, f, In([], "f32"), In([1.0], "f32"), "empty with 1")
        binary(op, f, In([], "f32", shape=[0, 3]), In([1.0, 2.0, 3.0], "f32"), "[0,3] with [3]")
        binary(op, f, In([1.0, 2.0, 3.0], "f32"), In([1.0, 2.0], "f32"), "3 with 2")
        binary(op, f, In([], "f32"), In([1.0, 2.0], "f32"), "0 with 2")
        binary(op, f, In([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "f64", shape=[2, 3], t=True),
               In([0.5, -0.5, 2.0], "f64", shape=[3, 1], expand=[3, 2]), "transposed with expanded")
        binary(op, f, In([1.5, -2.5, 3.5, 4.5, 5.5, 6.5, 7.5], "f32", step=2),
               In([2.0], "f32", expand=[4]), "stepped with expanded")
        # Scalars of every kind where PyTorch's op takes one.
        if op in ("copysign", "xlog1py", "special_xlog1py", "float_power", "true_divide", "floor_divide"):
            for s in [True, 0, -3, I64_MAX, 2.5, -0.0, inf, nan]:
                for d in ["f32", "f16", "i64", "bool"]:
                    av = [0.0, 1.0] if d == "bool" else ([0, -7, 5] if d == "i64" else [0.0, -7.5, 5.0, -0.0])
                    binary_scalar(op, f, In(av, d), s, f"{d} {s}")


def nextafter_ends():
    fi = {"f16": torch.finfo(torch.float16), "bf16": torch.finfo(torch.bfloat16),
          "f32": torch.finfo(torch.float32), "f64": torch.finfo(torch.float64)}
    for d in FLOATS:
        i = fi[d]
        tiny, mx = i.tiny, i.max
        sub = tiny * i.eps  # the smallest subnormal
        a = [0.0, -0.0, 0.0, -0.0, sub, -sub, tiny, tiny, mx, mx, -mx, inf, -inf, 1.0, 1.0, nan, 1.0, 0.0]
        b = [inf, -inf, -0.0, 0.0, 0.0, 0.0, 0.0, inf, inf, -inf, -inf, 0.0, inf, 1.0, nan, 1.0, 2.0, 0.0]
        binary("nextafter", torch.nextafter, In(a, d), In(b, d), f"ends {d}")


def integer_binary_cases():
    for op, f in [("gcd", torch.gcd), ("lcm", torch.lcm)]:
        a = [I64_MIN, I64_MIN, I64_MIN, 0, 0, -4, 6, I64_MAX, -1, 12, -12, I64_MAX, 2 ** 62, 3037000500]
        b = [0, -1, 2, 0, -5, -6, -4, I64_MAX, I64_MIN, -18, -18, 2, 2 ** 62 + 1, 3037000501]
        binary(op, f, In(a, "i64"), In(b, "i64"), "i64 ends")
        a32 = [-2 ** 31, -2 ** 31, 0, -4, 65536, 2 ** 31 - 1, 46341]
        b32 = [0, -1, 0, -6, 65537, 2, 46342]
        binary(op, f, In(a32, "i32"), In(b32, "i32"), "i32 ends")
        binary(op, f, In([255, 200, 0, 16, 250], "u8"), In([254, 3, 0, 24, 100], "u8"), "u8 wraps")
        binary(op, f, In([255, 200], "u8"), In([-1, 3], "i64"), "u8 with i64")
        binary(op, f, In([1.0, 0.0], "bool"), In([1.0, 1.0], "bool"), "bool")
        binary(op, f, In([4, 6], "i64"), In([1.0, 0.0], "bool"), "i64 with bool")
        binary(op, f, In([4.0, 6.0], "f32"), In([2, 4], "i64"), "f32 with i64")
        binary(op, f, In([4, 6], "i32"), In([2.0, 4.0], "f16"), "i32 with f16")
        binary(op, f, In([], "i64"), In([3], "i64"), "empty")
        binary(op, f, In(12, "i64"), In([[8, 9], [-6, 0]], "i32"), "0-d with 2-d")
        binary(op, f, In([1, 2, 3], "i64"), In([1, 2], "i64"), "3 with 2")
        binary(op, f, In([12, 18, 24, 30, 36, 42], "i64", shape=[2, 3], t=True),
               In([8], "i64", expand=[3, 2]), "transposed with expanded")
    for op, f in [("bitwise_left_shift", torch.bitwise_left_shift),
                  ("bitwise_right_shift", torch.bitwise_right_shift)]:
        sh = [0, 1, -1, -64, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 100, I64_MAX, I64_MIN]
        for d, base in [("i64", [1, -1, I64_MIN, I64_MAX, 12345, -12345]),
                        ("i32", [1, -1, -2 ** 31, 2 ** 31 - 1, 12345, -12345]),
                        ("u8", [1, 255, 128, 7])]:
            a = [v for v in base for _ in sh]
            b = [s for _ in base for s in sh]
            bd = d if d != "u8" else "i64"
            if d == "i32":
                b = [s for s in b if -2 ** 31 <= s < 2 ** 31]
                a = [v for v in base for s in sh if -2 ** 31 <= s < 2 ** 31]
                bd = "i32"
            binary(op, f, In(a, d), In(b, bd), f"{d} by every amount")
        # u8 by u8 amounts (no negatives in u8).
        binary(op, f, In([1, 255, 128, 7, 1, 255], "u8"), In([0, 1, 7, 8, 9, 255], "u8"), "u8 by u8")
        for d in ["i64", "i32", "u8", "bool"]:
            av = [1.0, 0.0, 1.0] if d == "bool" else [1, 5, 255 if d == "u8" else -8]
            for s in [0, 3, -1, 8, 63, 64, 200, I64_MAX, I64_MIN, True, 1.5, 2.0]:
                binary_scalar(op, f, In(av, d), s, f"{d} by {s}")
        binary(op, f, In([1.0, 0.0], "bool"), In([1.0, 1.0], "bool"), "bool by bool")
        binary(op, f, In([1, 2], "i64"), In([1.0, 0.0], "bool"), "i64 by bool")
        binary(op, f, In([1.0, 2.0], "f32"), In([1, 2], "i64"), "f32 by i64")
        binary(op, f, In([1, 2], "i64"), In([1.0, 2.0], "f64"), "i64 by f64")
        binary(op, f, In([1, 2], "u8"), In([1, 2], "i32"), "u8 by i32")
        binary(op, f, In([], "i64"), In([3], "i64"), "empty")
        binary(op, f, In([1, 2, 3], "i64"), In([1, 2], "i64"), "3 with 2")
        binary(op, f, In(-5, "i64"), In([[1, 2], [70, -3]], "i32"), "0-d with 2-d")


def ldexp_frexp_cases():
    m = [1.0, -1.0, 0.0, -0.0, inf, nan, 5e-324, 1e308, 0.75]
    e = [2 ** 31, -2 ** 31, 1024, -1075, -1074, 2000, -2000, 63, 64, 0, -1, 10000, -10000, I64_MAX, I64_MIN]
    ax = [v for v in m for _ in e]
    for d in FLOATS:
        for ed in ["i64", "i32"]:
            ee = [x for x in e if ed == "i64" or -2 ** 31 <= x < 2 ** 31]
            ax = [v for v in m for _ in ee]
            bx = [x for _ in m for x in ee]
            binary("ldexp", torch.ldexp, In(ax, d), In(bx, ed), f"{d} by {ed} exponents")
    binary("ldexp", torch.ldexp, In([1.0, 3.0], "f16"), In([20.0, -30.0], "f16"), "f16 exponent")
    binary("ldexp", torch.ldexp, In([1.0, 3.0], "bf16"), In([200.0, -200.0], "bf16"), "bf16 exponent")
    binary("ldexp", torch.ldexp, In([1, 3], "i64"), In([200, -200], "i64"), "i64 by i64")
    binary("ldexp", torch.ldexp, In([1.0, 0.0], "bool"), In([1.0, 1.0], "bool"), "bool by bool")
    binary("ldexp", torch.ldexp, In([1, 3], "u8"), In([1.5, 0.5], "f64"), "u8 by f64")
    binary("ldexp", torch.ldexp, In([1.0], "f16"), In([1.5, 0.5], "f64"), "f16 by f64")
    for d in INTS + ["bool"]:
        x = In([1, 2] if d != "bool" else [1.0, 0.0], d)
        case(f"frexp {d}", "frexp", [x], {}, lambda x=x: torch.frexp(x.t))
    for d, sub in [("f16", [6e-8, 3e-5, -6.1e-5, 6.1035156e-05, 65504.0]),
                   ("bf16", [9.2e-41, -1.1e-38, 1.1754944e-38, 3.3895314e38]),
                   ("f32", [1.4e-45, -1.1754942e-38, 1.1754944e-38, 3.4028235e38])]:
        x = In(sub, d)
        case(f"frexp subnormals {d}", "frexp", [x], {}, lambda x=x: torch.frexp(x.t))


def float_power_divide_cases():
    fp = torch.float_power
    binary("float_power", fp, In([-8.0, -2.0, -0.0, 0.0, -inf, -1.0], "f32"),
           In([1 / 3, 0.5, -1.0, -1.0, 0.5, inf], "f32"), "negative base fractional")
    binary("float_power", fp, In([2, 0, -2, 0, I64_MAX], "i64"), In([-1, -1, -3, 0, 2], "i64"), "int negative exp")
    binary("float_power", fp, In([2, 0], "u8"), In([1.0, 0.0], "bool"), "u8 by bool")
    binary("float_power", fp, In([1.0, 0.0], "bool"), In([1.0, 1.0], "bool"), "bool by bool")
    binary("float_power", fp, In([2.0, 3.0], "f16"), In([100.0, -100.0], "f16"), "f16 overflow in f64")
    for op, f in [("floor_divide", torch.floor_divide), ("true_divide", torch.true_divide)]:
        for d in ["i64", "i32", "u8"]:
            av = [I64_MIN, 7, -7, 0, 5] if d == "i64" else ([-2 ** 31, 7, -7, 0, 5] if d == "i32" else
                                                              [255, 7, 0, 0, 5])
            bv = [-1, -2, 2, 3, 1] if d != "u8" else [1, 2, 3, 1, 255]
            binary(op, f, In(av, d), In(bv, d), f"{d} ends")
            binary(op, f, In(av, d), In([1, 0, 1, 1, 1] if d != "u8" else [1, 0, 1, 1, 1], d), f"{d} by zero")
            binary(op, f, In([0], d), In([0], d), f"{d} 0 by 0")
            binary_scalar(op, f, In(av, d), 0, f"{d} by scalar 0")
            binary_scalar(op, f, In(av, d), -1, f"{d} by scalar -1")
        binary(op, f, In([1.0, 0.0], "bool"), In([1.0, 1.0], "bool"), "bool by bool")
        binary(op, f, In([1.0, 0.0], "bool"), In([1.0, 0.0], "bool"), "bool by false")
        binary(op, f, In([1.0, -1.0, 0.0, -0.0, inf, nan, -5.0], "f64"),
               In([0.0, 0.0, 0.0, -0.0, 0.0, 0.0, -inf], "f64"), "f64 by zeros")
        binary(op, f, In([7.0, -7.0], "f16"), In([0.0, -0.0], "f16"), "f16 by zeros")
        binary(op, f, In([1e308, -1e308], "f64"), In([1e-308, 1e-308], "f64"), "f64 overflow")


def heaviside_isclose_cases():
    hv = torch.heaviside
    x = [0.0, -0.0, nan, -1.0, 1.0, inf, -inf, 0.0]
    v = [nan, 0.5, 0.5, nan, nan, 2.0, 2.0, -0.0]
    for d in FLOATS:
        binary("heaviside", hv, In(x, d), In(v, d), f"zeros and NaN {d}")
    binary("heaviside", hv, In([0, -3, 3], "i64"), In([7, 7, 7], "i64"), "i64")
    binary("heaviside", hv, In([0, 3], "u8"), In([9, 9], "u8"), "u8")
    binary("heaviside", hv, In([0.0, 1.0], "bool"), In([1.0, 0.0], "bool"), "bool")
    for da, db in [("f32", "f64"), ("i64", "i32"), ("f32", "i64"), ("bool", "i64"), ("f16", "bf16")]:
        binary("heaviside", hv, In([0, 1], da), In([1, 1], db), f"{da} {db}")
    binary("heaviside", hv, In([0.0, 1.0], "f32"), In(0.5, "f32"), "0-d values")
    binary("heaviside", hv, In([0.0, 1.0], "f32"), In([0.5, 1.0, 2.0], "f32"), "2 with 3")
    binary("heaviside", hv, In([0.0, 1.0], "f32"), In(0.5, "f64"), "0-d values of another dtype")
    ic = torch.isclose
    a = [1.0, nan, inf, -inf, inf, 0.0, -0.0, 1e308, 1.0, nan]
    b = [1.0 + 1e-7, nan, inf, inf, 1e308, -0.0, 5e-324, inf, 2.0, 1.0]
    for rtol, atol in [(1e-5, 1e-8), (0.0, 0.0), (-1e-5, 1e-8), (1e-5, -1.0), (inf, 0.0), (0.0, inf), (nan, 0.0),
                       (0.0, nan), (1.0, 1.0), (-0.0, -0.0)]:
        for en in [False, True]:
            for d in ["f64", "f32", "f16", "bf16"]:
                if d in ("f16", "bf16") and en:
                    continue
                args = {"rtol": fmt(rtol), "atol": fmt(atol), "equal_nan": en}
                binary("isclose", lambda p, q, r=rtol, t=atol, e=en: ic(p, q, r, t, e), In(a, d), In(b, d),
                       f"{d} rtol={rtol} atol={atol}", args)
    for da, db, av, bv in [("i64", "i64", [I64_MAX, I64_MIN, 5, 0], [I64_MIN, I64_MAX, 6, 0]),
                           ("i32", "i32", [2 ** 31 - 1, -2 ** 31, 5], [-2 ** 31, 2 ** 31 - 1, 6]),
                           ("u8", "u8", [255, 0, 5], [0, 255, 6]), ("bool", "bool", [1.0, 0.0], [0.0, 0.0]),
                           ("f32", "f64", [1.0], [1.0]), ("i64", "f32", [1], [1.0]), ("i32", "i64", [1], [1]),
                           ("bool", "i64", [1.0], [1])]:
        for rtol, atol, en in [(1e-5, 1e-8, False), (1.0, 0.0, True), (0.5, 2.0, False), (-1.0, 0.0, False)]:
            args = {"rtol": fmt(rtol), "atol": fmt(atol), "equal_nan": en}
            binary("isclose", lambda p, q, r=rtol, t=atol, e=en: ic(p, q, r, t, e), In(av, da), In(bv, db),
                   f"{da} {db} rtol={rtol} atol={atol} equal_nan={en}", args)
    args = {"rtol": 1e-5, "atol": 1e-8, "equal_nan": False}
    binary("isclose", lambda p, q: ic(p, q), In([1.0, 2.0], "f32"), In([1.0, 2.0, 3.0], "f32"), "2 with 3", args)
    binary("isclose", lambda p, q: ic(p, q), In([], "f32"), In(1.0, "f32"), "empty with 0-d", args)


def expanded_huge_cases():
    # Expanded (stride 0) operands whose results cannot be allocated: 2^62
    # elements (PyTorch: the storage size overflows) and 2^60 f32 (2^62
    # bytes; PyTorch's allocator refuses). Nothing smaller: a result of
    # 2^40 f32 is 4 TiB that an overcommitting kernel may hand out.
    for sh in [[2 ** 31, 2 ** 31], [2 ** 30, 2 ** 30]]:
        binary("hypot", torch.hypot, In([1.0], "f32", expand=sh), In([2.0], "f32"), f"{sh} result")
        binary("gcd", torch.gcd, In([4], "i64", expand=sh), In([6], "i64"), f"{sh} result")
        binary("copysign", torch.copysign, In([1.0], "f32", shape=[1, 1], expand=[sh[0], 1]),
               In([1.0], "f32", expand=[sh[1]]), f"broadcast to {sh}")
        x = In([0.5], "f64", expand=sh)
        case(f"lgamma {sh}", "lgamma", [x], {}, lambda x=x: torch.lgamma(x.t))


def grad_cases():
    """Gradients at the edges: y = f(x) (or f(x, z)), PyTorch's x.grad (and z.grad) of y.sum()."""
    out = []

    def g(note, op, xs, args, f, nondiff=None):
        ts = [torch.tensor(v, dtype=torch.float64 if d == "f64" else DTYPES[d], requires_grad=True)
              for v, d in xs]
        nd = None
        if nondiff is not None:
            nd = torch.tensor(nondiff[0], dtype=DTYPES[nondiff[1]])
        try:
            y = f(*ts, nd) if nd is not None else f(*ts)
            y.sum().backward()
            res = {"grads": [record(t.grad) if t.grad is not None else None for t in ts]}
        except Exception as e:  # noqa: BLE001
            res = {"error": str(e).split("\n")[0][:200]}
        c = {"note": note, "op": op, "args": args,
             "inputs": [{"dtype": d, "shape": list(t.shape), "values": values_of(t.detach()), "t": False}
                        for (v, d), t in zip(xs, ts)]}
        if nd is not None:
            c["other"] = {"dtype": nondiff[1], "shape": list(nd.shape), "values": values_of(nd), "t": False}
        c.update(res)
        out.append(c)

    edges = {
        "erfinv": [1.0, -1.0, 1.5, 0.0, nan, 0.999],
        "lgamma": [0.0, -0.0, -1.0, -2.0, inf, -inf, nan, 1e-300],
        "digamma": [0.0, -0.0, -1.0, inf, -inf, nan, 1e-300, 1e10],
        "i0": [0.0, 713.0, inf, -inf, nan],
        "special_i0e": [0.0, -0.0, inf, -inf, nan, 1e300],
        "special_i1": [0.0, -0.0, 713.0, inf, nan, 1e-300],
        "special_i1e": [0.0, -0.0, inf, -inf, nan, 1e300, 1e-300],
        "sinc": [0.0, -0.0, inf, -inf, nan, 1e-300, 1e300, 1.0],
        "special_entr": [0.0, -0.0, -1.0, inf, nan, 5e-324],
        "special_ndtr": [-40.0, 40.0, inf, -inf, nan],
        "special_ndtri": [0.0, 1.0, -0.5, 1.5, nan, 0.5],
        "special_log_ndtr": [-40.0, -1e10, -inf, inf, nan, 0.0],
        "special_erfcx": [-30.0, -27.0, inf, -inf, nan, 1e300],
        "rad2deg": [inf, nan, -0.0],
        "deg2rad": [inf, nan, -0.0],
        "angle": [0.0, -0.0, -1.0, inf, -inf, nan],
        "positive": [inf, nan],
    }
    for op, vals in edges.items():
        f = {"special_i0e": S.i0e, "special_i1": S.i1, "special_i1e": S.i1e, "special_entr": S.entr,
             "special_ndtr": S.ndtr, "special_ndtri": S.ndtri, "special_log_ndtr": S.log_ndtr,
             "special_erfcx": S.erfcx}.get(op) or getattr(torch, op)
        for d in ["f64", "f32"]:
            g(f"{op} edges {d}", op, [(vals, d)], {}, f)
    for n in [0, 1, 2, 5]:
        g(f"polygamma n={n}", "polygamma", [([0.0, -0.0, -1.0, inf, nan, 1e-300, 0.5], "f64")], {"n": n},
          lambda x, n=n: torch.polygamma(n, x))
    for p in [1, 2, 3]:
        g(f"mvlgamma p={p}", "mvlgamma", [([p - 0.5 + 1e-9, 10.0, inf], "f64")], {"p": p},
          lambda x, p=p: torch.mvlgamma(x, p))
    for eps in [None, 0.0, 0.25, 0.5, 0.6, -0.1]:
        g(f"logit eps={eps}", "logit", [([0.0, 1.0, -0.5, 1.5, 0.25, 0.75, 0.5, nan, 0.1], "f64")],
          {"eps": None if eps is None else fmt(eps)}, lambda x, e=eps: torch.logit(x, e))
    z = [0.0, -0.0, inf, -inf, nan, 1.0, -1.0]
    ax = [v for v in z for _ in z]
    bx = [v for _ in z for v in z]
    for op, f in [("hypot", torch.hypot), ("copysign", torch.copysign), ("fmax", torch.fmax),
                  ("fmin", torch.fmin), ("xlog1py", S.xlog1py), ("float_power", torch.float_power),
                  ("true_divide", torch.true_divide)]:
        for d in ["f64", "f32"]:
            g(f"{op} pairs {d}", op, [(ax, d), (bx, d)], {}, f)
    g("ldexp edges", "ldexp", [([1.0, 0.0, inf, nan, 1.0, 1.0], "f64")], {},
      lambda x, e: torch.ldexp(x, e), nondiff=([1, 2000, 3, 0, -2000, 1024], "i64"))
    g("ldexp f32 by 200", "ldexp", [([1.0, 0.0, -0.0], "f32")], {},
      lambda x, e: torch.ldexp(x, e), nondiff=([200, 200, -200], "i64"))
    return out


def main():
    unary_cases()
    polygamma_mvlgamma_cases()
    logit_cases()
    float_binary_cases()
    nextafter_ends()
    integer_binary_cases()
    ldexp_frexp_cases()
    float_power_divide_cases()
    heaviside_isclose_cases()
    expanded_huge_cases()
    write_fixture(sys.argv[1], json.dumps({"generator": "benches/anchors/gen_hostile_s79.py",
                                           "torch": torch.__version__, "cases": CASES}))
    grads = grad_cases()
    write_fixture(sys.argv[2], json.dumps({"generator": "benches/anchors/gen_hostile_s79.py",
                                           "torch": torch.__version__, "cases": grads}))
    print(len(CASES), "calls,", len(grads), "gradient cases", file=sys.stderr)


if __name__ == "__main__":
    main()
