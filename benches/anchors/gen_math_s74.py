#!/usr/bin/env python3
"""Session 74: PyTorch 2.15's CPU answers (one thread) for the element-wise
math strata added in session 74, written to two fixtures:

- crates/strata-tensor/tests/data/math_s74.json.gz
  (crates/strata-tensor/tests/suite/math_s74.rs): tan, asin, acos, atan,
  sinh, cosh, asinh, acosh, atanh, log2, log10, exp2, erfc, floor, ceil,
  round, trunc, frac, square (each also in place), isnan, isinf, isfinite,
  isposinf, isneginf, nan_to_num (default and given replacements, also in
  place), logical_not, atan2, remainder, fmod (also in place),
  logical_and, logical_or and logical_xor, on every strata dtype;
- crates/strata-autograd/tests/data/math_grad_s74.json.gz
  (crates/strata-autograd/tests/suite/math_grad_s74.rs): the gradients of
  the differentiable ones for f32 and f64 inputs (and a float second
  operand), for the upstream gradient whose element j is
  `((3 j) mod 7 - 3) / 2`.

Each input is a tensor of 0 to 3 dims (empty ones included), sometimes the
transpose of a stored 2-d base, holding values drawn from a pool with the
edge cases of the ops (signed zeros, halves for round's ties, ±1 for the
inverse functions' borders, values past exp's and exp2's overflow, ±inf,
NaN, the integer dtypes' extremes) and uniform ones. A second operand is a
tensor of a broadcastable shape and any dtype, or a Python scalar (int,
float or bool) where PyTorch takes one (remainder and fmod). Recorded:
PyTorch's result dtype, shape and values, or the fact that it raised; for
in-place calls, self's values after the call.

Left out: integer remainder and fmod of the smallest i32/i64 value by -1
(undefined in C; x86 traps), which the pools never pair.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_math_s74.py \\
        crates/strata-tensor/tests/data/math_s74.json.gz \\
        crates/strata-autograd/tests/data/math_grad_s74.json.gz
"""
import json
import math
import random
import sys

import torch

from fixture_io import fmt, write_fixture

torch.set_num_threads(1)

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
FLOAT_POOL = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1.0, -1.0, 0.99, -0.99, 3.0, -7.0,
              1e-8, -1e-8, 100.0, -100.0, 1e30, -1e30, 1e300, math.inf, -math.inf, math.nan,
              88.5, 130.0, 0.7, -3.7, 12345.678, 4.5, 1.0000001, 1e-40, 710.0, -30.0]
INT_POOL = [0, 1, -1, 2, -3, 7, 100, -128, 127, 255, 2 ** 31 - 1, -2 ** 31 + 1, 2 ** 62, -2 ** 62,
            2 ** 63 - 1]
SHAPES = [[], [0], [1], [5], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [3, 1, 4]]
UNARY = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10",
         "exp2", "erfc", "floor", "ceil", "round", "trunc", "frac", "square"]
PREDICATES = ["isnan", "isinf", "isfinite", "isposinf", "isneginf", "logical_not"]
BINARY = ["atan2", "remainder", "fmod", "logical_and", "logical_or", "logical_xor"]
SCALAR_OK = {"remainder", "fmod"}
INPLACE_BINARY = {"atan2", "remainder", "fmod"}
DIFFERENTIABLE = set(UNARY) | {"atan2", "remainder", "fmod", "nan_to_num"}
RANGES = {"i32": (-2 ** 31, 2 ** 31 - 1), "i64": (-2 ** 63, 2 ** 63 - 1), "u8": (0, 255)}


def draw_values(r, dtype, n):
    if dtype == "bool":
        return [r.random() < 0.5 for _ in range(n)]
    if dtype in RANGES:
        lo, hi = RANGES[dtype]
        pool = [v for v in INT_POOL if lo <= v <= hi]
        return [r.choice(pool) if r.random() < 0.6 else r.randint(max(lo, -20), min(hi, 20))
                for _ in range(n)]
    return [r.choice(FLOAT_POOL) if r.random() < 0.5 else
            r.choice([r.uniform(-5, 5), r.uniform(-1, 1), r.uniform(-1000, 1000)]) for _ in range(n)]


def draw_tensor(r, dtype, shape):
    """A tensor of `shape` (for a 2-d shape, one time in three the transpose
    of a stored base) and its description."""
    transposed = len(shape) == 2 and r.random() < 0.33
    base_shape = [shape[1], shape[0]] if transposed else shape
    vals = draw_values(r, dtype, math.prod(base_shape))
    base = torch.tensor(vals, dtype=DTYPES[dtype]).reshape(base_shape)
    x = base.t() if transposed else base
    # The stored values are the base's after rounding to the dtype.
    stored = [fmt(float(v)) if dtype[0] in "fb" and dtype != "bool" else (bool(v) if dtype == "bool" else int(v))
              for v in base.flatten().tolist()]
    return x, {"dtype": dtype, "shape": base_shape, "values": stored, "t": transposed}


def broadcast_shape(r, shape):
    """A shape that broadcasts with `shape` (usually), or a random one."""
    if r.random() < 0.1:
        return r.choice(SHAPES)
    out = [s if r.random() < 0.6 else 1 for s in shape]
    while out and r.random() < 0.3:
        out = out[1:]
    return out


def tensor_record(t):
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape),
            "data": [fmt(float(v)) for v in t.detach().double().flatten().tolist()]}


def upstream(shape):
    n = math.prod(shape)
    return torch.tensor([((3 * j) % 7 - 3) / 2 for j in range(n)], dtype=torch.float64).reshape(shape)


def call(op, x, other, args, inplace):
    if op == "nan_to_num":
        return (x.nan_to_num_ if inplace else x.nan_to_num)(**args)
    if other is None:
        return getattr(x, op + "_" if inplace else op)()
    return getattr(x, op + "_" if inplace else op)(other)


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/math_s74.json.gz"
    grad_path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/math_grad_s74.json.gz"
    r = random.Random(7401)
    cases, grads = [], []
    ops = UNARY * 3 + PREDICATES + BINARY * 4 + ["nan_to_num"] * 3
    for _ in range(9000):
        op = r.choice(ops)
        dtype = r.choice(list(DTYPES) + ["f32", "f64", "f16", "bf16"])
        shape = r.choice(SHAPES)
        x, xd = draw_tensor(r, dtype, shape)
        c = {"op": op, "x": xd}
        other, args = None, {}
        if op in BINARY:
            if op in SCALAR_OK and r.random() < 0.35:
                kind = r.choice(["int", "float", "float", "bool"])
                other = {"int": lambda: r.choice([0, 1, -1, 2, -3, 5, 7, 2 ** 40]),
                         "float": lambda: r.choice([0.0, 0.5, -1.5, 2.0, 3.7, math.inf, -math.inf,
                                                    math.nan, -0.0, 1e-3, 1e10]),
                         "bool": lambda: r.random() < 0.5}[kind]()
                c["scalar"] = {"kind": kind, "value": fmt(float(other)) if kind == "float" else other}
            else:
                od = r.choice(list(DTYPES) + [dtype] * 4)
                other, c["other"] = draw_tensor(r, od, broadcast_shape(r, shape))
            if op in ("remainder", "fmod") and dtype in ("i32", "i64"):
                # Never the smallest value by -1 (the pools hold neither minimum).
                assert not (x == torch.iinfo(x.dtype).min).any()
        if op == "nan_to_num":
            for k in ("nan", "posinf", "neginf"):
                if r.random() < 0.5:
                    args[k] = r.choice([0.0, -1.0, 7.5, 1e10, -1e10, math.inf, -math.inf, 1e300])
            c["args"] = {k: fmt(v) for k, v in args.items()}
        inplace = (op in UNARY or op in INPLACE_BINARY or op == "nan_to_num") and r.random() < 0.3
        c["inplace"] = inplace
        target = x.clone() if inplace else x
        try:
            y = call(op, target, other, args, inplace)
            c["result"] = tensor_record(target if inplace else y)
        except Exception as e:  # noqa: BLE001 - PyTorch raises several types
            c["error"] = str(e).split("\n")[0][:200]
        cases.append(c)
        # The gradient, for float inputs of the differentiable ops.
        if (op in DIFFERENTIABLE and not inplace and "result" in c and dtype in ("f32", "f64")
                and c["result"]["dtype"] == dtype):
            xg = x.detach().clone().requires_grad_(True)
            og = None
            if isinstance(other, torch.Tensor) and other.dtype in (torch.float32, torch.float64):
                og = other.detach().clone().requires_grad_(True)
            y = call(op, xg, og if og is not None else other, args, False)
            y.backward(upstream(list(y.shape)).to(y.dtype))
            g = {"case": len(cases) - 1, "grad_x": [fmt(float(v)) for v in xg.grad.double().flatten().tolist()]}
            if og is not None:
                g["grad_other"] = [fmt(float(v)) for v in og.grad.double().flatten().tolist()]
            grads.append(dict(c, **g))
    doc = {"generator": "benches/anchors/gen_math_s74.py", "torch": torch.__version__, "cases": cases}
    write_fixture(tensor_path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), tensor_path))
    doc = {"generator": "benches/anchors/gen_math_s74.py", "torch": torch.__version__, "cases": grads}
    write_fixture(grad_path, json.dumps(doc, allow_nan=False))
    print("%d gradient cases -> %s" % (len(grads), grad_path))


if __name__ == "__main__":
    main()
