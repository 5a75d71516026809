#!/usr/bin/env python3
"""Session 56's reference files for the interop loaders, written by
PyTorch 2.15 (`safetensors.torch.save`), safetensors 0.8 (`safetensors.numpy
.save`) and NumPy 2.4 (`numpy.save`, `numpy.lib.format.write_array`), for
`crates/strata-tensor/tests/suite/interop_hostile_s56.rs`.

Each file is emitted as a hex string with what the writer holds: per
tensor its name, the strata dtype it must load as (narrow integers widened:
i8/i16/u16 to i32, u32 to i64), its shape, and its elements in C order as
the bits of that dtype (IEEE bits for floats, two's complement for
integers, 0/1 for bool), so NaN payloads, -0.0 and subnormals are compared
exactly. Files holding a dtype strata does not read are emitted bare (the
test expects a typed dtype error; the expectations of what NumPy refuses are
noted in the test).

Run: /tmp/tv/bin/python benches/anchors/gen_interop_s56.py --write
(rewrites the block between the GENERATED markers of the test file; without
--write the block goes to stdout).

With --check DIR, instead loads every `*.npy` and `*.safetensors` that
strata wrote into DIR (and the `expect.json` beside them) with NumPy and
safetensors and checks dtype, shape and values; strata writes them with

  STRATA_S56_DUMP=DIR cargo test -p strata-tensor --release --test suite \
      dump_files_for_numpy_and_safetensors -- --ignored
"""

import io
import json
import math
import os
import sys

import numpy as np
import torch
from safetensors.numpy import load as st_load_np
from safetensors.numpy import save as st_save_np
from safetensors.torch import save as st_save_torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TEST = os.path.join(ROOT, "crates", "strata-tensor", "tests", "suite", "interop_hostile_s56.rs")

# ---- element bits ---------------------------------------------------------


def bits(a: np.ndarray) -> list:
    """The elements of `a` (C order) as unsigned bit patterns of strata's dtype."""
    a = np.ascontiguousarray(a)
    k = a.dtype.kind
    if k == "f":
        size = a.dtype.itemsize
        return [int(x) for x in a.astype(a.dtype.newbyteorder("<")).view(f"<u{size}").ravel()]
    if k == "b":
        return [int(bool(x)) for x in a.ravel()]
    if k in "iu":
        # Two's complement in 64 bits; the test truncates to the dtype.
        return [int(x) & 0xFFFF_FFFF_FFFF_FFFF for x in a.ravel()]
    raise ValueError(a.dtype)


def torch_bits(t: torch.Tensor) -> list:
    if t.dtype == torch.bfloat16:
        return [int(x) & 0xFFFF for x in t.contiguous().view(torch.int16).flatten().tolist()]
    if t.dtype in (torch.uint16, torch.uint32):
        return [int(x) for x in t.to(torch.int64).flatten().tolist()]
    return bits(t.numpy())


STRATA = {
    torch.float32: "F32",
    torch.float64: "F64",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int32: "I32",
    torch.int64: "I64",
    torch.uint8: "U8",
    torch.bool: "Bool",
    torch.int8: "I32",
    torch.int16: "I32",
    torch.uint16: "I32",
    torch.uint32: "I64",
}

NP_STRATA = {
    "f4": "F32",
    "f8": "F64",
    "f2": "F16",
    "i8": "I64",
    "i4": "I32",
    "u1": "U8",
    "b1": "Bool",
    "i2": "I32",
    "i1": "I32",
    "u2": "I32",
}

# ---- values ----------------------------------------------------------------

FLOATS = [1.5, -0.0, math.inf, math.nan, 1e-45, -2.25, 0.0, -math.inf, 3.0e38, -7.0, 65504.0, 6.0e-8]


def torch_values(dt: torch.dtype, n: int) -> torch.Tensor:
    if dt.is_floating_point:
        return torch.tensor(FLOATS[:n], dtype=torch.float64).to(dt)
    if dt == torch.bool:
        return torch.tensor([i % 3 == 1 for i in range(n)])
    info = torch.iinfo(dt)
    vals = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 7, info.min + 1, info.max - 1, 3, 100, 5, 6]
    return torch.tensor(vals[:n], dtype=torch.int64).to(dt)


def np_values(code: str, n: int) -> np.ndarray:
    dt = np.dtype("<" + code if code not in ("u1", "b1", "i1") else "|" + code)
    if dt.kind == "f":
        with np.errstate(over="ignore", under="ignore"):
            return np.array(FLOATS[:n], dtype=np.float64).astype(dt)
    if dt.kind == "b":
        return np.array([i % 3 == 1 for i in range(n)], dtype=dt)
    info = np.iinfo(dt)
    vals = [info.min, info.max, 0, 1, 2, 7, info.min + 1, info.max - 1, 3, 4, 5, 6]
    return np.array(vals[:n], dtype=dt)


# ---- the files ---------------------------------------------------------------

CASES = []  # (const name, bytes, [(tensor name, strata dtype, shape, bits)] or None)


def st_case(name, tensors, metadata=None, expect=True):
    data = st_save_torch(tensors, metadata=metadata)
    exp = None
    if expect:
        exp = [(k, STRATA[t.dtype], list(t.shape), torch_bits(t)) for k, t in sorted(tensors.items())]
    CASES.append((name, data, exp))


def npy_case(name, a, version=None, expect=True, strata_dtype=None):
    f = io.BytesIO()
    if version is None:
        np.save(f, a, allow_pickle=a.dtype.kind == "O")
    else:
        np.lib.format.write_array(f, a, version=version, allow_pickle=a.dtype.kind == "O")
    exp = None
    if expect:
        code = a.dtype.str[1:]
        exp = [("", strata_dtype or NP_STRATA[code], list(a.shape), bits(a))]
    CASES.append((name, f.getvalue(), exp))


def build():
    # safetensors written by PyTorch: every dtype strata reads, 2x3 each.
    everything = {}
    for dt in STRATA:
        everything[str(dt).removeprefix("torch.")] = torch_values(dt, 6).reshape(2, 3)
    st_case("ST_TORCH_EVERY_DTYPE", everything)
    # A scalar, empty tensors, a 1-element 4-d tensor and metadata.
    st_case(
        "ST_TORCH_SCALAR_EMPTY_META",
        {
            "scalar": torch.tensor(-3.5, dtype=torch.float64),
            "empty": torch.zeros(0, 3, dtype=torch.float32),
            "empty_i64": torch.zeros(2, 0, dtype=torch.int64),
            "one": torch.full((1, 1, 1, 1), 9, dtype=torch.int16),
            "bool0": torch.tensor(True),
            "\u00e9t\u00e9.w\"\\q": torch.tensor([1, 2], dtype=torch.uint8),
        },
        # One key: the writer orders a map of several at random.
        metadata={"note": "caf\u00e9 {}\"\\"},
    )
    # What safetensors' numpy writer gives for f32/f16 (no torch), 5 elements.
    arrays = {
        "a": np_values("f4", 5),
        "h": np_values("f2", 12).reshape(3, 4),
    }
    data = st_save_np(arrays)
    CASES.append(("ST_NUMPY_F32_F16", data, [(k, NP_STRATA[a.dtype.str[1:]], list(a.shape), bits(a)) for k, a in sorted(arrays.items())]))
    # dtypes strata does not read (a typed dtype error).
    st_case("ST_TORCH_U64", {"u": torch.tensor([1, 2], dtype=torch.uint64)}, expect=False)
    st_case("ST_TORCH_F8", {"f8": torch.tensor([1.0, 2.0]).to(torch.float8_e4m3fn)}, expect=False)
    st_case("ST_TORCH_C64", {"c": torch.tensor([1 + 2j], dtype=torch.complex64)}, expect=False)
    # For the writer comparison: what safetensors.torch.save writes for the
    # tensors the test builds (see `strata_writes_safetensors_bytes`).
    st_case(
        "ST_TORCH_WRITER",
        {
            "w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "b": torch.tensor([1, 0, 1], dtype=torch.bool),
            "h": torch.tensor([0.5, -2.0], dtype=torch.bfloat16),
            "i": torch.tensor([[-1], [2]], dtype=torch.int64),
            "s": torch.tensor(4.0, dtype=torch.float16),
            "e": torch.zeros(0, 2, dtype=torch.uint8),
            "d": torch.tensor([1.25], dtype=torch.float64),
            "k": torch.tensor([7, -8], dtype=torch.int32),
        },
    )

    # .npy written by NumPy: every dtype strata reads, little-endian, 2x3.
    for code in ["f4", "f8", "f2", "i8", "i4", "i2", "i1", "u2", "u1", "b1"]:
        npy_case(f"NPY_LE_{code.upper()}", np_values(code, 6).reshape(2, 3))
    # Big-endian.
    for code in ["f4", "f8", "f2", "i8", "i4", "i2", "u2"]:
        a = np_values(code, 6).reshape(3, 2)
        npy_case(f"NPY_BE_{code.upper()}", a.astype(a.dtype.newbyteorder(">")), strata_dtype=NP_STRATA[code])
    # Fortran order: 2x3 and 2x3x2 (values 0..), big-endian Fortran i2.
    npy_case("NPY_FORTRAN_F8", np.asfortranarray(np.arange(6, dtype="<f8").reshape(2, 3)))
    npy_case("NPY_FORTRAN_I4_3D", np.asfortranarray(np.arange(12, dtype="<i4").reshape(2, 3, 2)))
    npy_case("NPY_FORTRAN_BE_I2", np.asfortranarray(np.arange(-3, 3, dtype=">i2").reshape(3, 2)), strata_dtype="I32")
    # Scalars and empty arrays.
    npy_case("NPY_SCALAR_F4", np.array(2.5, dtype="<f4"))
    npy_case("NPY_SCALAR_B1", np.array(True))
    npy_case("NPY_EMPTY_F4", np.zeros((0, 3), dtype="<f4"))
    npy_case("NPY_EMPTY_FORTRAN_I8", np.asfortranarray(np.zeros((3, 0), dtype="<i8")))
    # Versions 2.0 and 3.0.
    npy_case("NPY_V2_I8", np.arange(-2, 2, dtype="<i8"), version=(2, 0))
    npy_case("NPY_V3_U1", np.arange(5, dtype="|u1"), version=(3, 0))
    # For the writer comparison: what numpy.save writes for the arrays the
    # test builds (see `strata_writes_numpys_npy_bytes`).
    npy_case("NPY_WRITER_F2_5", np.array([1.0, -0.0, 65504.0, 6e-8, -1.5], dtype="<f2"))
    npy_case("NPY_WRITER_B1_2X2", np.array([[True, False], [False, True]]))
    npy_case("NPY_WRITER_I8_SCALAR", np.array(-9, dtype="<i8"))
    npy_case("NPY_WRITER_U1_EMPTY", np.zeros((0,), dtype="|u1"))
    npy_case("NPY_WRITER_F8_1X1X1", np.array([[[0.1]]], dtype="<f8"))
    # dtypes strata does not read.
    npy_case("NPY_OBJECT", np.array([1, "a", None], dtype=object), expect=False)
    npy_case("NPY_C8", np.array([1 + 2j], dtype="<c8"), expect=False)
    npy_case("NPY_U4", np.array([1], dtype="<u4"), expect=False)
    npy_case("NPY_U8", np.array([1], dtype="<u8"), expect=False)
    npy_case("NPY_STRUCT", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i2")]), expect=False)
    npy_case("NPY_UNICODE", np.array(["ab", "c"]), expect=False)
    npy_case("NPY_DATETIME", np.array(["2020-01-01"], dtype="<M8[D]"), expect=False)
    # (Zeros: a stored 80-bit long double leaves its padding bytes as they
    # were, which would make the file differ from run to run.)
    npy_case("NPY_F16_LONGDOUBLE", np.zeros(1, dtype=np.longdouble), expect=False)


def rust_str(s: str) -> str:
    """A Rust string literal of `s` (non-ASCII and controls as \\u{..})."""
    out = []
    for c in s:
        if c in "\\\"":
            out.append("\\" + c)
        elif " " <= c <= "~":
            out.append(c)
        else:
            out.append(f"\\u{{{ord(c):x}}}")
    return '"' + "".join(out) + '"'


def rust_block() -> str:
    out = [
        "// BEGIN GENERATED by benches/anchors/gen_interop_s56.py (do not edit)",
        "#[rustfmt::skip]",
        "mod refs {",
        "use super::Expect;",
        "use strata_tensor::DType;",
    ]
    for name, data, exp in CASES:
        out.append(f"pub(super) const {name}: &str = \"{data.hex()}\";")
        if exp is not None:
            items = []
            for k, dt, shape, b in exp:
                shape_s = ", ".join(str(s) for s in shape)
                bits_s = ", ".join(hex(x) for x in b)
                items.append(f"    ({rust_str(k)}, DType::{dt}, &[{shape_s}], &[{bits_s}]),")
            out.append(f"pub(super) const {name}_EXPECT: &[Expect] = &[")
            out.extend(items)
            out.append("];")
    out.append("}")
    out.append("use refs::*;")
    out.append("// END GENERATED")
    return "\n".join(out) + "\n"


# ---- checking strata's files -------------------------------------------------------


def check(dirname: str) -> int:
    with open(os.path.join(dirname, "expect.json")) as f:
        expect = json.load(f)
    bad = 0
    for fname, tensors in sorted(expect.items()):
        path = os.path.join(dirname, fname)
        if fname.endswith(".npy"):
            a = np.load(path, allow_pickle=False)
            got = {"": a}
        else:
            with open(path, "rb") as f:
                raw = f.read()
            got = st_load_np(raw) if all(t["dtype"] != "bfloat16" for t in tensors.values()) else None
            if got is None:
                from safetensors.torch import load as st_load_torch

                got = {k: v for k, v in st_load_torch(raw).items()}
        for k, t in tensors.items():
            a = got[k]
            if isinstance(a, torch.Tensor):
                dt = str(a.dtype).removeprefix("torch.")
                shape = list(a.shape)
                b = torch_bits(a)
            else:
                dt = a.dtype.name
                shape = list(a.shape)
                b = bits(a)
            ok = dt == t["dtype"] and shape == t["shape"] and b == [int(x, 16) for x in t["bits"]]
            print(("ok  " if ok else "BAD ") + f"{fname}[{k!r}]: {dt} {shape}")
            bad += not ok
    print("FAIL" if bad else "PASS")
    return 1 if bad else 0


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    build()
    block = rust_block()
    if "--write" in sys.argv:
        with open(TEST) as f:
            text = f.read()
        start = text.index("// BEGIN GENERATED")
        end = text.index("// END GENERATED\n") + len("// END GENERATED\n")
        with open(TEST, "w") as f:
            f.write(text[:start] + block + text[end:])
    else:
        sys.stdout.write(block)


if __name__ == "__main__":
    main()
