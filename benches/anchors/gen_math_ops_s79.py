#!/usr/bin/env python3
"""Session 79: PyTorch 2.15's CPU answers (one thread) for the element-wise
math strata added in session 79, written to two fixtures:

- crates/strata-tensor/tests/data/math_ops_s79.json.gz
  (crates/strata-tensor/tests/suite/math_ops_s79.rs): every op's results
  (dtype, shape, values; both results of frexp) or the fact that PyTorch
  raised (with the first line of its message), on operands of every strata
  dtype, shapes with and without elements, 0-d, transposed
  (non-contiguous) operands, broadcasting, values with NaN, infinities,
  signed zeros, denormals and huge numbers, and arguments outside their
  domain;
- crates/strata-autograd/tests/data/math_ops_s79_grad.json.gz
  (crates/strata-autograd/tests/suite/math_ops_s79.rs): for the calls of
  the differentiable ops whose differentiable operands are all f32 or f64
  and that succeed, the gradient of every differentiable operand for the
  upstream gradient whose element j is `((3 j) mod 7 - 3) / 2`.

The ops: torch.erfinv, lgamma, digamma, polygamma, mvlgamma, i0, sinc,
logit, xlogy's sibling xlog1py (and special.xlog1py), hypot, copysign,
nextafter, fmax, fmin, heaviside, gcd, lcm, bitwise_left_shift,
bitwise_right_shift, signbit, ldexp, frexp, float_power, true_divide,
floor_divide, isclose, isreal, rad2deg, deg2rad, angle, positive;
torch.special.i0e, i1, i1e, entr, ndtr, ndtri, log_ndtr, erfcx.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_math_ops_s79.py \\
        crates/strata-tensor/tests/data/math_ops_s79.json.gz \\
        crates/strata-autograd/tests/data/math_ops_s79_grad.json.gz
"""
import json
import math
import random
import sys
import warnings

import torch

from fixture_io import fmt, write_fixture
import gen_math_s74 as m

torch.set_num_threads(1)
warnings.simplefilter("ignore")

FLOATS = ["f32", "f64", "f16", "bf16"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, math.inf, -math.inf, math.nan, 1e30, -1e30, 1e300,
           1e-8, 1e-40, 5e-324, 100.0, -100.0, 3.0, -3.5, 10.0, 60.0, -27.0, 1e8]
SHAPES = [[], [0], [1], [5], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [3, 1, 4], [4, 2]]

UNARY = ["erfinv", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "special_i0e", "special_i1",
         "special_i1e", "sinc", "special_entr", "special_ndtr", "special_ndtri", "special_log_ndtr",
         "special_erfcx", "logit", "signbit", "frexp", "rad2deg", "deg2rad", "angle", "positive", "isreal"]
BINARY = ["hypot", "copysign", "nextafter", "fmax", "fmin", "xlog1py", "special_xlog1py", "heaviside", "gcd",
          "lcm", "bitwise_left_shift", "bitwise_right_shift", "ldexp", "float_power", "true_divide",
          "floor_divide", "isclose"]
OPS = UNARY + BINARY
# Ops with a gradient in strata-autograd (the operands that take one).
DIFF = {"erfinv": [0], "lgamma": [0], "digamma": [0], "polygamma": [0], "mvlgamma": [0], "i0": [0],
        "special_i0e": [0], "special_i1": [0], "special_i1e": [0], "sinc": [0], "special_entr": [0],
        "special_ndtr": [0], "special_ndtri": [0], "special_log_ndtr": [0], "special_erfcx": [0], "logit": [0],
        "rad2deg": [0], "deg2rad": [0], "angle": [0], "positive": [0], "hypot": [0, 1], "copysign": [0, 1],
        "fmax": [0, 1], "fmin": [0, 1], "xlog1py": [0, 1], "special_xlog1py": [0, 1], "ldexp": [0],
        "float_power": [0, 1], "true_divide": [0, 1]}
# The domain each op's values are mostly drawn from.
DOMAIN = {"erfinv": (-1.0, 1.0), "special_ndtri": (0.0, 1.0), "logit": (0.0, 1.0), "mvlgamma": (1.0, 6.0),
          "special_entr": (0.0, 3.0), "lgamma": (-6.0, 12.0), "digamma": (-6.0, 12.0), "polygamma": (-4.0, 10.0),
          "special_log_ndtr": (-40.0, 8.0), "special_erfcx": (-8.0, 60.0), "special_ndtr": (-10.0, 10.0),
          "i0": (-30.0, 30.0), "special_i1": (-30.0, 30.0), "special_i0e": (-100.0, 100.0),
          "special_i1e": (-100.0, 100.0), "sinc": (-6.0, 6.0), "xlog1py": (-1.5, 4.0),
          "special_xlog1py": (-1.5, 4.0)}


def values(r, dtype, n, op, operand):
    if dtype == "bool":
        return [r.random() < 0.5 for _ in range(n)]
    if dtype in m.RANGES:
        lo, hi = m.RANGES[dtype]
        if op in ("bitwise_left_shift", "bitwise_right_shift") and operand == 1:
            pool = [0, 1, 2, 3, 7, 8, 15, 31, 32, 33, 63, 64, 100, 200, -1, -5]
            return [v if lo <= v <= hi else r.randint(0, min(hi, 70)) for v in (r.choice(pool) for _ in range(n))]
        pool = [v for v in m.INT_POOL + [12, 18, -24, 36, 0, 6, 9] if lo <= v <= hi]
        return [r.choice(pool) if r.random() < 0.5 else r.randint(max(lo, -40), min(hi, 40)) for _ in range(n)]
    lo, hi = DOMAIN.get(op, (-5.0, 5.0))
    if op == "ldexp" and operand == 1:
        return [float(r.randint(-30, 30)) if r.random() < 0.9 else r.choice(SPECIAL) for _ in range(n)]
    if op == "float_power" and operand == 1:
        return [r.choice([2.0, 0.5, -1.0, 3.0, 0.0, -2.5, 1.5]) if r.random() < 0.8 else r.choice(SPECIAL)
                for _ in range(n)]
    out = []
    for _ in range(n):
        u = r.random()
        if u < 0.18:
            out.append(r.choice(SPECIAL))
        elif u < 0.25 and op in ("lgamma", "digamma", "polygamma", "mvlgamma"):
            out.append(float(r.randint(-5, 6)) + r.choice([0.0, 0.5, 1e-9]))
        else:
            out.append(r.uniform(lo, hi))
    return out


def draw(r, dtype, shape, op, operand=0):
    saved = m.draw_values
    m.draw_values = lambda rr, dt, n: values(rr, dt, n, op, operand)
    try:
        return m.draw_tensor(r, dtype, shape)
    finally:
        m.draw_values = saved


def any_dtype(r):
    return r.choice(FLOATS * 3 + list(m.DTYPES))


def bshape(r, shape):
    return m.broadcast_shape(r, shape) if r.random() < 0.3 else list(shape)


def torch_fn(op):
    """PyTorch's function of `op` (`xlog1py` is only `torch.special.xlog1py`)."""
    if op == "xlog1py":
        return torch.special.xlog1py
    if op.startswith("special_"):
        return getattr(torch.special, op[len("special_"):])
    return getattr(torch, op)


def case(r, op):
    """The call's operands (tensors and records), its arguments (as
    recorded) and a callable."""
    int_op = op in ("gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift")
    if int_op:
        d = r.choice(["i32", "i64", "u8"] * 4 + FLOATS + ["bool"])
    else:
        d = any_dtype(r)
    d2 = d if r.random() < 0.75 else (r.choice(["i32", "i64", "u8"]) if int_op else any_dtype(r))
    shape = r.choice(SHAPES)
    ts, args = [], {}

    def add(t):
        ts.append(t)

    if op in UNARY:
        add(draw(r, d, shape, op))
        if op == "polygamma":
            n = r.choice([0, 1, 2, 3, 4, 6, -1])
            args = {"n": n}
            f = lambda x: torch.polygamma(n, x)
        elif op == "mvlgamma":
            p = r.choice([1, 2, 3, 5, 0])
            args = {"p": p}
            f = lambda x: torch.mvlgamma(x, p)
        elif op == "logit":
            eps = r.choice([None, None, 0.0, 1e-6, 0.1, 0.25, -1.0])
            args = {"eps": eps}
            f = lambda x: torch.logit(x, eps)
        else:
            f = torch_fn(op)
        return ts, args, f
    add(draw(r, d, shape, op, 0))
    scalar_ok = op in ("copysign", "bitwise_left_shift", "bitwise_right_shift", "float_power", "true_divide",
                       "floor_divide", "xlog1py", "special_xlog1py")
    if scalar_ok and r.random() < 0.2:
        if int_op:
            s = r.choice([0, 1, 3, 8, 33, -1, 64])
        else:
            s = r.choice([2.0, -1.0, -0.0, 0.5, 3, -2, 0, 1e10])
        args = {"scalar": s}
        g = torch_fn(op)
        return ts, args, lambda x: g(x, s)
    add(draw(r, d2, bshape(r, shape), op, 1))
    if op == "isclose":
        rtol = r.choice([1e-5, 0.0, 0.1, 1e-3, -1.0])
        atol = r.choice([1e-8, 0.0, 0.5, 1e-3, -1.0])
        nan = r.random() < 0.5
        args = {"rtol": rtol, "atol": atol, "equal_nan": nan}
        if r.random() < 0.6:
            # Mostly operands that are nearly equal.
            a, rec = ts[1]
            ts[1] = draw(r, d, shape, op, 1)
        return ts, args, lambda a, b: torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=nan)
    return ts, args, torch_fn(op)


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/math_ops_s79.json.gz"
    grad_path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/math_ops_s79_grad.json.gz"
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7901
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 6000
    r = random.Random(seed)
    cases, grads = [], []
    for i in range(count):
        op = OPS[i % len(OPS)]
        ts, args, f = case(r, op)
        c = {"op": op, "inputs": [rec for _, rec in ts],
             "args": {k: fmt(v) if isinstance(v, float) else v for k, v in args.items()}}
        try:
            out = f(*[t for t, _ in ts])
            outs = list(out) if isinstance(out, tuple) else [out]
            c["results"] = [m.tensor_record(o) for o in outs]
        except Exception as e:  # noqa: BLE001 - PyTorch raises several types
            c["error"] = str(e).split("\n")[0][:200]
        cases.append(c)
        diff = DIFF.get(op)
        if diff is None or "results" not in c or any(ts[j][1]["dtype"] not in ("f32", "f64") for j in diff
                                                     if j < len(ts)):
            continue
        diff = [j for j in diff if j < len(ts)]
        leaves = [t.detach().clone().requires_grad_(j in diff) for j, (t, _) in enumerate(ts)]
        try:
            out = f(*leaves)
            total = (out * m.upstream(list(out.shape)).to(out.dtype)).sum()
            total.backward()
        except Exception as e:  # noqa: BLE001
            grads.append(dict(c, grad_error=str(e).split("\n")[0][:200]))
            continue
        g = {}
        for j in diff:
            gr = leaves[j].grad
            g[str(j)] = None if gr is None else [fmt(float(v)) for v in gr.double().flatten().tolist()]
        grads.append(dict(c, grads=g))
    doc = {"generator": "benches/anchors/gen_math_ops_s79.py", "torch": torch.__version__, "seed": seed,
           "cases": cases}
    write_fixture(tensor_path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), tensor_path))
    doc = {"generator": "benches/anchors/gen_math_ops_s79.py", "torch": torch.__version__, "seed": seed,
           "cases": grads}
    write_fixture(grad_path, json.dumps(doc, allow_nan=False))
    print("%d gradient cases (%d errors) -> %s" % (len(grads), sum("grad_error" in g for g in grads), grad_path))


if __name__ == "__main__":
    main()
