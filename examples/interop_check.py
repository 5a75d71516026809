#!/usr/bin/env python3
"""PyTorch's and NumPy's side of strata's model-file exchange.

    python3 examples/interop_check.py DIR

1. Loads DIR/strata_tensors.safetensors (written by `cargo run --example
   interop -- --out DIR`) with `safetensors.torch.load_file` (onto the GPU
   when there is one) and DIR/strata_*.npy with `numpy.load`, and checks
   every tensor's dtype, shape and values.
2. Writes DIR/torch_tensors.safetensors (`safetensors.torch.save_file`) and
   DIR/numpy_*.npy (`numpy.save`: Fortran order, big-endian, int16/int8,
   bool, 0-d) for strata to load (`--load FILE`).

Values follow one rule on both sides (see examples/examples/interop.rs), so
neither side trusts the other: element i of an n-element tensor is
(i - n//2) * 0.25 for floats, 3i - 7 for integers, 37i mod 256 for uint8
and i mod 3 == 0 for bool.

Prints PASS/FAIL per check and a closing line; exits 1 on a failure.
Needs torch, safetensors and numpy.
"""

import os
import sys

import numpy as np

try:
    import torch
    from safetensors.torch import load_file, save_file
except ImportError as e:  # pragma: no cover - the GPU machine has them
    print(f"FAIL: {e} (pip install torch safetensors numpy)")
    sys.exit(2)

FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
NP_FLOATS = {np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)}


def rule(n, kind):
    """The n values of the rule as float64 (kind: float, int, u8, bool)."""
    i = np.arange(n, dtype=np.int64)
    if kind == "float":
        return (i - n // 2).astype(np.float64) * 0.25
    if kind == "int":
        return (3 * i - 7).astype(np.float64)
    if kind == "u8":
        return ((37 * i) % 256).astype(np.float64)
    return (i % 3 == 0).astype(np.float64)


def torch_kind(dtype):
    if dtype in FLOATS:
        return "float"
    if dtype == torch.uint8:
        return "u8"
    if dtype == torch.bool:
        return "bool"
    return "int"


def np_kind(dtype):
    if dtype in NP_FLOATS:
        return "float"
    if dtype == np.uint8:
        return "u8"
    if dtype == np.bool_:
        return "bool"
    return "int"


def torch_expected(dtype, shape, device="cpu"):
    n = int(np.prod(shape)) if shape else 1
    v = torch.from_numpy(rule(n, torch_kind(dtype))).reshape(shape)
    return v.to(dtype).to(device)


def np_expected(dtype, shape):
    n = int(np.prod(shape)) if shape else 1
    return rule(n, np_kind(np.dtype(dtype))).astype(dtype).reshape(shape)


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
            print(f"PASS {what}")
        else:
            self.failed += 1
            print(f"FAIL {what}")


# What strata's example writes: name -> (dtype, shape); "transposed" is the
# transpose of the rule's [5, 3] f32 tensor.
STRATA_SAFETENSORS = {
    "fc1.weight": (torch.float32, [8, 4]),
    "fc1.bias": (torch.float32, [8]),
    "fc2.weight": (torch.bfloat16, [2, 8]),
    "fc2.bias": (torch.float16, [2]),
    "f64": (torch.float64, [3, 3]),
    "i64": (torch.int64, [5]),
    "i32": (torch.int32, [2, 3]),
    "u8": (torch.uint8, [4, 4]),
    "bool": (torch.bool, [7]),
    "scalar": (torch.float32, []),
    "empty": (torch.float32, [0, 3]),
}
STRATA_NPY = {
    "strata_f32.npy": (np.float32, (2, 3, 4)),
    "strata_f16.npy": (np.float16, (3, 2)),
    "strata_i64.npy": (np.int64, (5,)),
    "strata_bool.npy": (np.bool_, (7,)),
    "strata_u8.npy": (np.uint8, (2, 2)),
}


def check_strata_files(c, d, device):
    path = os.path.join(d, "strata_tensors.safetensors")
    loaded = load_file(path, device=device)
    want_names = set(STRATA_SAFETENSORS) | {"transposed"}
    c.check(set(loaded) == want_names, f"safetensors names {sorted(loaded)}")
    for name, (dtype, shape) in STRATA_SAFETENSORS.items():
        t = loaded.get(name)
        want = torch_expected(dtype, shape, device)
        ok = (t is not None and t.dtype == dtype and list(t.shape) == shape
              and torch.equal(t, want))
        c.check(ok, f"torch loads strata's {name} {dtype} {shape}"
                + ("" if ok or t is None else f": got {t.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}"))
    t = loaded.get("transposed")
    want = torch_expected(torch.float32, [5, 3], device).t()
    c.check(t is not None and list(t.shape) == [3, 5] and torch.equal(t, want),
            "torch loads strata's transposed (written contiguously)")

    for file, (dtype, shape) in STRATA_NPY.items():
        a = np.load(os.path.join(d, file))
        want = np_expected(dtype, shape)
        c.check(a.dtype == np.dtype(dtype) and a.shape == shape and np.array_equal(a, want),
                f"numpy loads {file} {a.dtype} {a.shape}")
    a = np.load(os.path.join(d, "strata_transposed.npy"))
    c.check(a.shape == (3, 5) and np.array_equal(a, np_expected(np.float32, (5, 3)).T),
            "numpy loads strata_transposed.npy")


def write_files(d):
    """Files for strata to load; every tensor follows the rule in row-major order."""
    tensors = {}
    for name, dtype, shape in [
        ("float32", torch.float32, [3, 4]),
        ("float64", torch.float64, [2, 2]),
        ("float16", torch.float16, [5]),
        ("bfloat16", torch.bfloat16, [2, 3]),
        ("int64", torch.int64, [4]),
        ("int32", torch.int32, [3]),
        ("int16", torch.int16, [6]),      # strata reads it as i32
        ("int8", torch.int8, [4]),        # strata reads it as i32
        ("uint8", torch.uint8, [10]),
        ("bool", torch.bool, [5]),
        ("scalar", torch.float32, []),
        ("empty", torch.float32, [0, 2]),
    ]:
        tensors[name] = torch_expected(dtype, shape)
    st = os.path.join(d, "torch_tensors.safetensors")
    save_file(tensors, st)
    files = [st]
    for name, arr in [
        ("numpy_f32_fortran.npy", np.asfortranarray(np_expected(np.float32, (3, 4)))),
        ("numpy_f64_bigendian.npy", np_expected(np.float64, (2, 3)).astype(">f8")),
        ("numpy_i32_fortran3d.npy", np.asfortranarray(np_expected(np.int32, (2, 3, 4)))),
        ("numpy_i16.npy", np_expected(np.int16, (5,))),
        ("numpy_i8.npy", np_expected(np.int8, (4,))),
        ("numpy_bool.npy", np_expected(np.bool_, (6,))),
        ("numpy_u8.npy", np_expected(np.uint8, (3, 3))),
        ("numpy_f16.npy", np_expected(np.float16, (4,))),
        ("numpy_i64_0d.npy", np_expected(np.int64, ())),
    ]:
        p = os.path.join(d, name)
        np.save(p, arr)
        files.append(p)
    return files


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    d = sys.argv[1]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__} numpy {np.__version__} device {device}")
    c = Checks()
    check_strata_files(c, d, device)
    files = write_files(d)
    print("wrote " + " ".join(files))
    with open(os.path.join(d, "python_files.txt"), "w") as f:
        f.write("\n".join(files) + "\n")
    print(f"interop_check: {c.passed} passed, {c.failed} failed")
    print("PASS" if c.failed == 0 else "FAIL")
    sys.exit(0 if c.failed == 0 else 1)


if __name__ == "__main__":
    main()
