#!/usr/bin/env python3
"""Writes conformance/safety.json: PyTorch's answers to strata's safety cases.

The cases probe the argument checks and conversions strata must share with
PyTorch: `fill_`/`full` of floats into integer tensors (truncation toward
zero) and of values out of the dtype's range, scalar bounds of `clamp`
checked against the computation dtype, bool tensors in arithmetic, the dtype
and size rules of `arange`, and integer scalar arithmetic. The file has the
format of ../../shared/conformance (FORMAT.md) and is replayed by
crates/strata-tensor/tests/conformance.rs on the CPU and on cuda:0.

Usage:
    python3 conformance/probe_safety.py [--out PATH]   # with PyTorch: the oracle
    python3 conformance/probe_safety.py --hand         # without: the hand-written
                                                       # expectations (no torch)

Each case runs in a worker process (restarted after a crash): a case that
kills PyTorch's interpreter (SIGFPE, SIGSEGV, a hang past --timeout) is
written with its hand-written expectation, the tag `torch_crash` and a
`torch_crash` field naming the signal, and the other cases still run.

With PyTorch, every answer that differs from the hand-written expectation
is printed (`DIFF ...`), so the expectations can be corrected; the written
file always holds PyTorch's answers. Error classes: when PyTorch raises, the
class written is the case's expected class (the classes of FORMAT.md section
6 are strata's names for PyTorch's messages); when PyTorch raises where no
error was expected the class is "UNCLASSIFIED" and the step is reported.
"""

import argparse
import json
import math
import os
import sys
import threading

F, I, B = "float", "int", "bool"


def inp(name, shape, dtype, data):
    return {"name": name, "shape": shape, "dtype": dtype, "data": data}


def st(op, args, out=None, error=None):
    s = {"op": op, "args": args}
    if out is not None:
        s["out"] = out
    if error is not None:
        s["error"] = error
    return s


def case(cid, doc, inputs, steps, expect, tags=()):
    """`expect`: the hand-written final values {var: [shape, dtype, data]}."""
    return {
        "id": "safety." + cid,
        "doc": doc,
        "tags": list(tags),
        "inputs": inputs,
        "steps": steps,
        "hand": expect,
    }


def s(kind, v):
    return {kind: v}


CASES = [
    # ---- fill_ / full: conversion of the value to the tensor's dtype ----
    case("fill_float_into_i32_truncates", "fill_ of 2.7 into i32 truncates toward zero",
         [inp("a", [3], "i32", [1, 2, 3])], [st("fill_", ["a", s(F, 2.7)])],
         {"a": [[3], "i32", [2, 2, 2]]}),
    case("fill_negative_float_into_i64_truncates", "fill_ of -2.7 into i64 gives -2",
         [inp("a", [2], "i64", [5, 6])], [st("fill_", ["a", s(F, -2.7)])],
         {"a": [[2], "i64", [-2, -2]]}),
    case("fill_float_into_u8_truncates", "fill_ of 3.99 into u8 gives 3",
         [inp("a", [2], "u8", [0, 1])], [st("fill_", ["a", s(F, 3.99)])],
         {"a": [[2], "u8", [3, 3]]}),
    case("fill_negative_fraction_into_u8", "fill_ of -0.5 into u8: below the range (value error)",
         [inp("a", [2], "u8", [0, 1])], [st("fill_", ["a", s(F, -0.5)], error="value")],
         {"a": [[2], "u8", [0, 1]]}, tags=["error"]),
    case("fill_nan_into_i32", "fill_ of NaN into i32 is an overflow error",
         [inp("a", [2], "i32", [1, 2])], [st("fill_", ["a", s(F, "nan")], error="value")],
         {"a": [[2], "i32", [1, 2]]}, tags=["error"]),
    case("fill_inf_into_i64", "fill_ of inf into i64 is an overflow error",
         [inp("a", [2], "i64", [1, 2])], [st("fill_", ["a", s(F, "inf")], error="value")],
         {"a": [[2], "i64", [1, 2]]}, tags=["error"]),
    case("fill_3e9_into_i32", "fill_ of 3e9 (float) into i32 is an overflow error",
         [inp("a", [2], "i32", [1, 2])], [st("fill_", ["a", s(F, 3e9)], error="value")],
         {"a": [[2], "i32", [1, 2]]}, tags=["error"]),
    case("fill_int_70000_into_f16", "fill_ of the int 70000 into f16 is an overflow error (not inf)",
         [inp("a", [2], "f16", [1.0, 2.0])], [st("fill_", ["a", s(I, 70000)], error="value")],
         {"a": [[2], "f16", [1.0, 2.0]]}, tags=["error"]),
    case("fill_float_1e39_into_f32", "fill_ of 1e39 into f32 is an overflow error (not inf)",
         [inp("a", [2], "f32", [1.0, 2.0])], [st("fill_", ["a", s(F, 1e39)], error="value")],
         {"a": [[2], "f32", [1.0, 2.0]]}, tags=["error"]),
    case("fill_65504_into_f16", "fill_ of 65504.0 (f16's largest) into f16",
         [inp("a", [2], "f16", [1.0, 2.0])], [st("fill_", ["a", s(F, 65504.0)])],
         {"a": [[2], "f16", [65504.0, 65504.0]]}),
    case("fill_inf_into_f16", "fill_ of -inf into f16 is allowed",
         [inp("a", [1], "f16", [1.0])], [st("fill_", ["a", s(F, "-inf")])],
         {"a": [[1], "f16", ["-inf"]]}),
    case("fill_fraction_into_bool", "fill_ of 0.5 into bool gives true (conversion to bool never overflows)",
         [inp("a", [2], "bool", [False, False])], [st("fill_", ["a", s(F, 0.5)])],
         {"a": [[2], "bool", [True, True]]}),
    case("fill_nan_into_bool", "fill_ of NaN into bool gives true",
         [inp("a", [1], "bool", [False])], [st("fill_", ["a", s(F, "nan")])],
         {"a": [[1], "bool", [True]]}),
    case("fill_int_300_into_bool", "fill_ of 300 into bool gives true",
         [inp("a", [1], "bool", [False])], [st("fill_", ["a", s(I, 300)])],
         {"a": [[1], "bool", [True]]}),
    case("full_float_into_i32", "full with 2.5 and dtype i32 truncates",
         [], [st("full", [[2], s(F, 2.5), "i32"], out="r")],
         {"r": [[2], "i32", [2, 2]]}),
    case("full_int_70000_f16", "full with 70000 and dtype f16 is an overflow error",
         [], [st("full", [[2], s(I, 70000), "f16"], out="r", error="value")],
         {}, tags=["error"]),
    case("full_neg_float_i64", "full with -1.9 and dtype i64 gives -1",
         [], [st("full", [[1], s(F, -1.9), "i64"], out="r")],
         {"r": [[1], "i64", [-1]]}),
    # ---- clamp: bounds converted to the computation dtype ----
    case("clamp_f16_min_70000", "clamp of f16 with min 70000 (int): cannot be converted to Half",
         [inp("a", [2], "f16", [1.0, 2.0])], [st("clamp", ["a", s(I, 70000), None], out="r", error="value")],
         {"a": [[2], "f16", [1.0, 2.0]]}, tags=["error"]),
    case("clamp_f16_max_1e6", "clamp of f16 with max 1e6 (float): cannot be converted to Half",
         [inp("a", [2], "f16", [1.0, 2.0])], [st("clamp", ["a", None, s(F, 1e6)], out="r", error="value")],
         {"a": [[2], "f16", [1.0, 2.0]]}, tags=["error"]),
    case("clamp_f16_min_neg_70000_float", "clamp_ of f16 with min -70000.0 in place: overflow, unchanged",
         [inp("a", [2], "f16", [1.0, 2.0])], [st("clamp_", ["a", s(F, -70000.0), None], error="value")],
         {"a": [[2], "f16", [1.0, 2.0]]}, tags=["error"]),
    case("clamp_i32_max_3e9_int", "clamp of i32 with max 3000000000 (int): cannot be converted to int",
         [inp("a", [2], "i32", [1, 2])], [st("clamp", ["a", None, s(I, 3000000000)], out="r", error="value")],
         {"a": [[2], "i32", [1, 2]]}, tags=["error"]),
    case("clamp_f16_inf_bound", "clamp of f16 with max inf is allowed",
         [inp("a", [2], "f16", [1.0, 2.0])], [st("clamp", ["a", None, s(F, "inf")], out="r")],
         {"a": [[2], "f16", [1.0, 2.0]], "r": [[2], "f16", [1.0, 2.0]]}),
    case("clamp_i32_float_min_promotes", "clamp of i32 with min 2.5 gives f32",
         [inp("a", [3], "i32", [1, 2, 3])], [st("clamp", ["a", s(F, 2.5), None], out="r")],
         {"a": [[3], "i32", [1, 2, 3]], "r": [[3], "f32", [2.5, 2.5, 3.0]]}, tags=["promotion"]),
    case("clamp_u8_min_minus_one_wraps", "clamp of u8 with min -1: the bound wraps to 255",
         [inp("a", [3], "u8", [0, 10, 255])], [st("clamp", ["a", s(I, -1), None], out="r")],
         {"a": [[3], "u8", [0, 10, 255]], "r": [[3], "u8", [255, 255, 255]]}, tags=["quirk"]),
    case("clamp_bool_bool_bounds", "clamp of a bool tensor with bool bounds is not implemented",
         [inp("a", [2], "bool", [True, False])], [st("clamp", ["a", s(B, False), s(B, True)], out="r", error="dtype")],
         {"a": [[2], "bool", [True, False]]}, tags=["error"]),
    case("clamp_bool_int_min_promotes", "clamp of a bool tensor with an int bound computes in i64",
         [inp("a", [3], "bool", [True, False, True])], [st("clamp", ["a", s(I, 0), None], out="r")],
         {"a": [[3], "bool", [True, False, True]], "r": [[3], "i64", [1, 0, 1]]}, tags=["promotion"]),
    case("clamp_inplace_bool_int_min", "clamp_ of a bool tensor with an int bound: i64 cannot be stored in bool",
         [inp("a", [2], "bool", [True, False])], [st("clamp_", ["a", s(I, 0), None], error="dtype")],
         {"a": [[2], "bool", [True, False]]}, tags=["error"]),
    case("clamp_inplace_i32_float_min", "clamp_ of i32 with min 2.5: f32 cannot be stored in i32",
         [inp("a", [2], "i32", [1, 5])], [st("clamp_", ["a", s(F, 2.5), None], error="dtype")],
         {"a": [[2], "i32", [1, 5]]}, tags=["error"]),
    # ---- bool tensors in arithmetic ----
    case("add_bool_bool", "bool + bool stays bool (true + true is true)",
         [inp("a", [3], "bool", [True, True, False]), inp("b", [3], "bool", [True, False, False])],
         [st("add", ["a", "b"], out="r")],
         {"a": [[3], "bool", [True, True, False]], "b": [[3], "bool", [True, False, False]],
          "r": [[3], "bool", [True, True, False]]}),
    case("mul_bool_bool", "bool * bool stays bool",
         [inp("a", [3], "bool", [True, True, False]), inp("b", [3], "bool", [True, False, False])],
         [st("mul", ["a", "b"], out="r")],
         {"a": [[3], "bool", [True, True, False]], "b": [[3], "bool", [True, False, False]],
          "r": [[3], "bool", [True, False, False]]}),
    case("div_bool_bool", "bool / bool is true division in f32",
         [inp("a", [2], "bool", [True, False]), inp("b", [2], "bool", [True, True])],
         [st("div", ["a", "b"], out="r")],
         {"a": [[2], "bool", [True, False]], "b": [[2], "bool", [True, True]], "r": [[2], "f32", [1.0, 0.0]]}),
    case("div_trunc_bool_bool", "bool // bool with rounding mode trunc is not implemented",
         [inp("a", [2], "bool", [True, False]), inp("b", [2], "bool", [True, True])],
         [st("div", ["a", "b", "trunc"], out="r", error="dtype")],
         {"a": [[2], "bool", [True, False]], "b": [[2], "bool", [True, True]]}, tags=["error"]),
    case("sub_bool_int_scalar", "bool tensor - int scalar is rejected",
         [inp("a", [2], "bool", [True, False])], [st("sub", ["a", s(I, 1)], out="r", error="dtype")],
         {"a": [[2], "bool", [True, False]]}, tags=["error"]),
    case("sub_i32_bool_scalar", "i32 tensor - bool scalar is rejected",
         [inp("a", [2], "i32", [1, 2])], [st("sub", ["a", s(B, True)], out="r", error="dtype")],
         {"a": [[2], "i32", [1, 2]]}, tags=["error"]),
    case("add_bool_int_scalar", "bool + int scalar gives i64",
         [inp("a", [2], "bool", [True, False])], [st("add", ["a", s(I, 2)], out="r")],
         {"a": [[2], "bool", [True, False]], "r": [[2], "i64", [3, 2]]}, tags=["promotion"]),
    case("add_bool_float_scalar", "bool + float scalar gives f32",
         [inp("a", [2], "bool", [True, False])], [st("add", ["a", s(F, 1.5)], out="r")],
         {"a": [[2], "bool", [True, False]], "r": [[2], "f32", [2.5, 1.5]]}, tags=["promotion"]),
    case("add_inplace_bool_bool", "bool.add_(bool) in place",
         [inp("a", [2], "bool", [True, False]), inp("b", [2], "bool", [False, False])],
         [st("add_", ["a", "b"])],
         {"a": [[2], "bool", [True, False]], "b": [[2], "bool", [False, False]]}),
    case("mul_inplace_bool_int", "bool.mul_(2): the i64 result cannot be stored in bool",
         [inp("a", [2], "bool", [True, False])], [st("mul_", ["a", s(I, 2)], error="dtype")],
         {"a": [[2], "bool", [True, False]]}, tags=["error"]),
    case("div_inplace_bool", "bool.div_(bool): the f32 result cannot be stored in bool",
         [inp("a", [2], "bool", [True, False]), inp("b", [2], "bool", [True, True])],
         [st("div_", ["a", "b"], error="dtype")],
         {"a": [[2], "bool", [True, False]], "b": [[2], "bool", [True, True]]}, tags=["error"]),
    case("addcmul_bool", "addcmul_ on bool tensors is not implemented",
         [inp("a", [2], "bool", [True, False]), inp("b", [2], "bool", [True, True])],
         [st("addcmul_", ["a", "b", "b", s(I, 1)], error="dtype")],
         {"a": [[2], "bool", [True, False]], "b": [[2], "bool", [True, True]]}, tags=["error"]),
    case("relu_inplace_bool", "relu_ of bool is rejected",
         [inp("a", [2], "bool", [True, False])], [st("relu_", ["a"], error="dtype")],
         {"a": [[2], "bool", [True, False]]}, tags=["error"]),
    case("mean_bool", "mean of bool is rejected",
         [inp("a", [2], "bool", [True, False])], [st("mean", ["a"], out="r", error="dtype")],
         {"a": [[2], "bool", [True, False]]}, tags=["error"]),
    # ---- integer scalar arithmetic ----
    case("i32_plus_float_scalar", "i32 + 0.5 gives f32 (the default float dtype)",
         [inp("a", [2], "i32", [1, -2])], [st("add", ["a", s(F, 0.5)], out="r")],
         {"a": [[2], "i32", [1, -2]], "r": [[2], "f32", [1.5, -1.5]]}, tags=["promotion"]),
    case("i64_div_int_scalar", "i64 / 2 is true division in f32",
         [inp("a", [3], "i64", [1, 2, 3])], [st("div", ["a", s(I, 2)], out="r")],
         {"a": [[3], "i64", [1, 2, 3]], "r": [[3], "f32", [0.5, 1.0, 1.5]]}, tags=["promotion"]),
    case("i32_div_zero_int_scalar", "i32 / 0 is true division: inf, nan, -inf",
         [inp("a", [3], "i32", [1, 0, -1])], [st("div", ["a", s(I, 0)], out="r")],
         {"a": [[3], "i32", [1, 0, -1]], "r": [[3], "f32", ["inf", "nan", "-inf"]]}),
    case("u8_times_float_scalar", "u8 * 0.5 gives f32",
         [inp("a", [2], "u8", [3, 200])], [st("mul", ["a", s(F, 0.5)], out="r")],
         {"a": [[2], "u8", [3, 200]], "r": [[2], "f32", [1.5, 100.0]]}, tags=["promotion"]),
    case("u8_plus_minus_one_wraps", "u8 + (-1) wraps (the scalar becomes 255)",
         [inp("a", [3], "u8", [0, 1, 2])], [st("add", ["a", s(I, -1)], out="r")],
         {"a": [[3], "u8", [0, 1, 2]], "r": [[3], "u8", [255, 0, 1]]}, tags=["overflow"]),
    case("i32_plus_huge_int_wraps", "i32 + 2**40 stays i32; the scalar wraps to 0",
         [inp("a", [2], "i32", [1, 2])], [st("add", ["a", s(I, 2 ** 40)], out="r")],
         {"a": [[2], "i32", [1, 2]], "r": [[2], "i32", [1, 2]]}, tags=["overflow", "quirk"]),
    case("u8_times_256_wraps", "u8 * 256 stays u8; the scalar wraps to 0",
         [inp("a", [2], "u8", [3, 7])], [st("mul", ["a", s(I, 256)], out="r")],
         {"a": [[2], "u8", [3, 7]], "r": [[2], "u8", [0, 0]]}, tags=["overflow", "quirk"]),
    case("i32_inplace_mul_float_scalar", "i32.mul_(1.5): f32 cannot be stored in i32",
         [inp("a", [2], "i32", [1, 2])], [st("mul_", ["a", s(F, 1.5)], error="dtype")],
         {"a": [[2], "i32", [1, 2]]}, tags=["error"]),
    case("i64_floor_div_negative", "i64 // -2 floors",
         [inp("a", [3], "i64", [7, -7, 0])], [st("div", ["a", s(I, -2), "floor"], out="r")],
         {"a": [[3], "i64", [7, -7, 0]], "r": [[3], "i64", [-4, 3, 0]]}),
    case("f16_plus_huge_float_scalar", "f16 + 1e6: the scalar rounds to inf in f16 (no error)",
         [inp("a", [2], "f16", [1.0, -1.0])], [st("add", ["a", s(F, 1e6)], out="r")],
         {"a": [[2], "f16", [1.0, -1.0]], "r": [[2], "f16", ["inf", "inf"]]}, tags=["rounding"]),
    # ---- arange: dtype and size rules ----
    case("arange_bool_dtype", "arange with dtype bool is not implemented",
         [], [st("arange", [s(I, 0), s(I, 3), s(I, 1), "bool"], out="r", error="dtype")], {}, tags=["error"]),
    case("arange_i64_float_args_truncate", "arange(0.5, 3.7, 1, int64): bounds truncated first, length from them",
         [], [st("arange", [s(F, 0.5), s(F, 3.7), s(I, 1), "i64"], out="r")],
         {"r": [[3], "i64", [0, 1, 2]]}, tags=["quirk"]),
    case("arange_i32_float_args_length_from_floats", "arange(0.5, 3.7, 1, int32): values from truncated bounds, length ceil(3.2) from the float ones",
         [], [st("arange", [s(F, 0.5), s(F, 3.7), s(I, 1), "i32"], out="r")],
         {"r": [[4], "i32", [0, 1, 2, 3]]}, tags=["quirk"]),
    case("arange_i64_negative_float_start", "arange(-2.5, 2.5, 1, int64) starts at -2",
         [], [st("arange", [s(F, -2.5), s(F, 2.5), s(I, 1), "i64"], out="r")],
         {"r": [[4], "i64", [-2, -1, 0, 1]]}, tags=["quirk"]),
    case("arange_i64_fractional_step", "arange(0, 5, 0.5, int64): the step truncates to 0",
         [], [st("arange", [s(I, 0), s(I, 5), s(F, 0.5), "i64"], out="r", error="value")], {}, tags=["error"]),
    case("arange_infinite_end", "arange(0, inf): unsupported range",
         [], [st("arange", [s(F, 0.0), s(F, "inf"), s(F, 1.0)], out="r", error="value")], {}, tags=["error"]),
    case("arange_nan_start", "arange(nan, 1): unsupported range",
         [], [st("arange", [s(F, "nan"), s(F, 1.0), s(F, 1.0)], out="r", error="value")], {}, tags=["error"]),
    case("arange_nan_step", "arange(0, 1, nan): the step is not nonzero",
         [], [st("arange", [s(F, 0.0), s(F, 1.0), s(F, "nan")], out="r", error="value")], {}, tags=["error"]),
    case("arange_full_i64_range", "arange(i64 min, i64 max): too many elements",
         [], [st("arange", [s(I, -2 ** 63), s(I, 2 ** 63 - 1), s(I, 1)], out="r", error="value")], {}, tags=["error"]),
    case("arange_huge_float_length", "arange(0, 1e20, 1e-5): the length exceeds int64",
         [], [st("arange", [s(F, 0.0), s(F, 1e20), s(F, 1e-5)], out="r", error="value")], {}, tags=["error"]),
    case("arange_wrong_sign", "arange(1, 0, 1): bounds inconsistent with the step's sign",
         [], [st("arange", [s(I, 1), s(I, 0), s(I, 1)], out="r", error="value")], {}, tags=["error"]),
    case("arange_negative_step", "arange(10, 0, -3) counts down",
         [], [st("arange", [s(I, 10), s(I, 0), s(I, -3)], out="r")],
         {"r": [[4], "i64", [10, 7, 4, 1]]}),
    case("arange_f64_fraction", "arange(0, 1, 0.3, f64): ceil gives 4 values, start + i*step",
         [], [st("arange", [s(I, 0), s(I, 1), s(F, 0.3), "f64"], out="r")],
         {"r": [[4], "f64", [0.0, 0.3, 0.6, 0.8999999999999999]]}),
    case("arange_float_default_dtype", "arange(0, 1.5, 0.5) defaults to f32",
         [], [st("arange", [s(I, 0), s(F, 1.5), s(F, 0.5)], out="r")],
         {"r": [[3], "f32", [0.0, 0.5, 1.0]]}),
    case("arange_f16_end_beyond_float", "arange(0, 1e39, 1e38, f16): the bound does not fit the accumulate type",
         [], [st("arange", [s(F, 0.0), s(F, 1e39), s(F, 1e38), "f16"], out="r", error="value")], {}, tags=["error"]),
    case("arange_u8", "arange(0, 4, 1, u8)",
         [], [st("arange", [s(I, 0), s(I, 4), s(I, 1), "u8"], out="r")],
         {"r": [[4], "u8", [0, 1, 2, 3]]}),
    case("arange_empty", "arange(3, 3) is empty",
         [], [st("arange", [s(I, 3), s(I, 3), s(I, 1)], out="r")],
         {"r": [[0], "i64", []]}, tags=["empty"]),
]

CREATION = {"zeros", "ones", "full", "arange", "eye"}
DTYPES = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"]


def contiguous_strides(shape):
    strides, acc = [], 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= max(d, 1)
    return strides


def fmt_float(x):
    if isinstance(x, str):
        return x
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def record(shape, dtype, data, strides, offset, contiguous, storage, layout):
    if dtype in ("f32", "f64", "f16", "bf16"):
        data = [fmt_float(x) for x in data]
    return {"shape": shape, "dtype": dtype, "data": data, "strides": strides,
            "offset": offset, "contiguous": contiguous, "storage": storage, "layout": layout}


def meta(c):
    """The `ops` and `dtypes` fields and automatic tags of a case."""
    ops = sorted({step["op"] for step in c["steps"]})
    dts = {i["dtype"] for i in c["inputs"]}
    for step in c["steps"]:
        for a in step["args"]:
            if isinstance(a, str) and a in DTYPES:
                dts.add(a)
    for v in c["expect"].values():
        if "dtype" in v:
            dts.add(v["dtype"])
    tags = list(c["tags"])
    if any("error" in step for step in c["steps"]) and "error" not in tags:
        tags.append("error")
    return ops, sorted(dts), tags


def hand_expect(c):
    """FORMAT.md's `expect` from the hand-written final values."""
    out = {}
    creators = {step.get("out"): step["op"] for step in c["steps"] if "error" not in step}
    for name, (shape, dtype, data) in c["hand"].items():
        is_input = any(i["name"] == name for i in c["inputs"])
        layout = "checked" if is_input or creators.get(name) in CREATION else "info"
        out[name] = record(shape, dtype, data, contiguous_strides(shape), 0, True, name, layout)
    return out


def finish(c, expect, steps):
    c = dict(c)
    c["steps"] = steps
    c["expect"] = expect
    del c["hand"]
    ops, dts, tags = meta(c)
    return {"id": c["id"], "doc": c["doc"], "tags": tags, "ops": ops, "dtypes": dts,
            "inputs": c["inputs"], "steps": c["steps"], "expect": c["expect"]}


# ---- the PyTorch oracle ----------------------------------------------------

def torch_run(c):
    import torch

    tdt = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
           "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64,
           "u8": torch.uint8, "bool": torch.bool}
    name_of = {v: k for k, v in tdt.items()}
    env, order = {}, []

    def scalar(v):
        (k, x), = v.items()
        if k == "float" and isinstance(x, str):
            return float(x)
        return x

    def arg(v):
        if isinstance(v, str):
            return env[v]
        if isinstance(v, dict):
            return scalar(v)
        return v

    for i in c["inputs"]:
        data = [float(x) if isinstance(x, str) else x for x in i["data"]]
        env[i["name"]] = torch.tensor(data, dtype=tdt[i["dtype"]]).reshape(i["shape"])
        order.append(i["name"])
    steps = []
    for step in c["steps"]:
        step = dict(step)
        a = step["args"]
        op = step["op"]
        opt = lambda k: a[k] if len(a) > k else None  # noqa: E731
        try:
            if op == "fill_":
                env[a[0]].fill_(arg(a[1]))
                r = None
            elif op == "full":
                r = torch.full(a[0], arg(a[1]), dtype=tdt[a[2]] if opt(2) else None)
            elif op == "arange":
                r = torch.arange(arg(a[0]), arg(a[1]), arg(a[2]), dtype=tdt[a[3]] if opt(3) else None)
            elif op in ("clamp", "clamp_"):
                lo = None if a[1] is None else arg(a[1])
                hi = None if opt(2) is None else arg(a[2])
                r = torch.clamp(env[a[0]], lo, hi) if op == "clamp" else env[a[0]].clamp_(lo, hi)
            elif op in ("add", "sub", "mul", "add_", "sub_", "mul_"):
                r = getattr(env[a[0]], op)(arg(a[1]))
            elif op in ("div", "div_"):
                r = getattr(env[a[0]], op)(arg(a[1]), rounding_mode=opt(2))
            elif op == "addcmul_":
                r = env[a[0]].addcmul_(env[a[1]], env[a[2]], value=arg(a[3]))
            elif op in ("relu_", "neg", "relu"):
                r = getattr(env[a[0]], op)()
            elif op == "mean":
                r = env[a[0]].mean()
            else:
                raise SystemExit(f"probe: unknown op {op}")
            if op.endswith("_"):
                r = None
            if "error" in step:
                print(f"DIFF {c['id']}: {op} succeeded in PyTorch, hand-written expectation was a "
                      f"{step['error']} error")
                del step["error"]
            if r is not None:
                env[step["out"]] = r
                if step["out"] not in order:
                    order.append(step["out"])
        except Exception as e:  # noqa: BLE001 - PyTorch raises RuntimeError, TypeError, ...
            if "error" not in step:
                print(f"DIFF {c['id']}: {op} failed in PyTorch ({e}), hand-written expectation was success")
                step["error"] = "UNCLASSIFIED"
            step["torch_message"] = str(e).split("\n")[0]
        steps.append(step)
    expect = {}
    for name in order:
        t = env[name]
        first = next(n for n in order
                     if env[n].untyped_storage().data_ptr() == t.untyped_storage().data_ptr())
        is_input = any(i["name"] == name for i in c["inputs"])
        made_by = next((s_["op"] for s_ in c["steps"] if s_.get("out") == name), None)
        layout = "checked" if is_input or made_by in CREATION else "info"
        data = t.reshape(-1).tolist()
        expect[name] = record(list(t.shape), name_of[t.dtype], data, list(t.stride()),
                              t.storage_offset(), t.is_contiguous(), first, layout)
    return expect, steps, torch


# Each case runs in a worker process: a case that kills PyTorch's interpreter
# (PyTorch 2.11 dies of SIGFPE on `arange(0, 5, 0.5, dtype=int64)`, whose step
# truncates to 0; seen on the H200 machine,
# docs/bench-results/2026-11-26-h200-pytorch-rules.jsonl) is recorded as a
# `torch_crash` (the case keeps its hand-written expectation, strata's typed
# error) and a fresh worker carries on with the next case.
MARK = "@@probe "


def worker(start):
    """Runs CASES[start:] in this process, one protocol line per case."""
    import torch

    torch.set_num_threads(1)
    for idx in range(start, len(CASES)):
        print(MARK + json.dumps({"begin": idx}), flush=True)
        expect, steps, _ = torch_run(CASES[idx])
        print(MARK + json.dumps({"done": idx, "expect": expect, "steps": steps}), flush=True)


def run_isolated(timeout):
    """{case index: (expect, steps) or the crash's description}, each case in a
    worker process that is restarted after a crash or a hang."""
    import signal
    import subprocess

    results = {}
    start = 0
    while start < len(CASES):
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(start)],
                                stdout=subprocess.PIPE, text=True)
        current = None
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            for line in proc.stdout:
                if not line.startswith(MARK):
                    sys.stdout.write(line)
                    continue
                msg = json.loads(line[len(MARK):])
                if "begin" in msg:
                    current = msg["begin"]
                    timer.cancel()
                    timer = threading.Timer(timeout, proc.kill)
                    timer.start()
                else:
                    results[msg["done"]] = (msg["expect"], msg["steps"])
                    current = None
            rc = proc.wait()
        finally:
            timer.cancel()
        if current is None:
            if rc != 0 and len(results) < len(CASES) - start:
                raise SystemExit(f"probe: worker exited with status {rc} between cases")
            break
        if rc < 0:
            try:
                why = signal.Signals(-rc).name
            except ValueError:
                why = f"signal {-rc}"
        else:
            why = f"exit status {rc}"
        if rc == -signal.SIGKILL:
            why += f" (killed after {timeout} s)"
        results[current] = why
        print(f"CRASH {CASES[current]['id']}: PyTorch's interpreter died ({why}); "
              "recorded as torch_crash with the hand-written expectation")
        start = current + 1
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hand", action="store_true",
                    help="write the hand-written expectations (no PyTorch)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "safety.json"),
                    help="where to write the vectors (default: conformance/safety.json)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds one case may take before its worker is killed (default 120)")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        worker(args.worker)
        return
    cases = []
    header = {"format": "strata-conformance", "format_version": 1}
    if args.hand:
        header.update({"torch_version": "none (hand-written from PyTorch 2.x semantics)",
                       "python_version": sys.version.split()[0],
                       "oracle": "hand-written; regenerate with PyTorch: python3 conformance/probe_safety.py"})
    else:
        import torch

        header.update({"torch_version": torch.__version__, "python_version": sys.version.split()[0],
                       "oracle": "PyTorch on the CPU, one thread, each case in a worker process"})
    header.update({"generator": "conformance/probe_safety.py", "group": "safety", "split": "project"})
    results = {} if args.hand else run_isolated(args.timeout)
    crashed = []
    for idx, c in enumerate(CASES):
        if args.hand:
            cases.append(finish(c, hand_expect(c), c["steps"]))
            continue
        r = results.get(idx, "no result from the worker")
        if isinstance(r, str):
            crashed.append(c["id"])
            c = dict(c)
            c["tags"] = list(c["tags"]) + ["torch_crash"]
            out = finish(c, hand_expect(c), c["steps"])
            out["torch_crash"] = r
            cases.append(out)
            continue
        expect, steps = r
        want = hand_expect(c)
        for k in set(want) | set(expect):
            w, g = want.get(k), expect.get(k)
            if w is None or g is None or (w["shape"], w["dtype"], w["data"]) != (g["shape"], g["dtype"], g["data"]):
                print(f"DIFF {c['id']}: {k}: hand-written {w and (w['shape'], w['dtype'], w['data'])}, "
                      f"PyTorch {g and (g['shape'], g['dtype'], g['data'])}")
        cases.append(finish(c, expect, steps))
    header["count"] = len(cases)
    header["cases"] = cases
    with open(args.out, "w") as f:
        json.dump(header, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out}"
          + (f"; PyTorch crashed on {len(crashed)}: {', '.join(crashed)}" if crashed else ""))


if __name__ == "__main__":
    main()
