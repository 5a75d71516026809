#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread, its AVX2 kernels) for
crates/strata-tensor/tests/suite/softmax_erf_s53b.rs, written to
crates/strata-tensor/tests/data/softmax_erf_s53b.json.gz:

- "softmax": f32 softmax and log_softmax along the last dim of one row per
  length (1..64, then every 7th up to 200, plus rows with -inf, +inf, NaN
  and all-equal values). Inputs are not stored: element i of the row of
  length n with seed k is `((i * 40503 + n * 977 + k * 131) % 4093 - 2046)
  / 2046 * scale`, computed in f64 and rounded to f32 (the Rust test
  computes the same), scale cycling over 0.1, 1, 3, 10, 30. Outputs are
  f32 bit patterns, 8 hex digits each, one string per row.
- "erf": torch.erf of f16 and bf16 tensors holding the bit patterns
  0..1023 (the smallest magnitudes), 32768..33791 (their negatives) and
  every 8th pattern besides; outputs are 4-hex-digit bit patterns.
- "gelu": F.gelu (approximate "none" and "tanh") of inf, -inf, NaN and huge
  and tiny values in f32, f64, f16 and bf16; outputs as Python reprs of
  the values (f16/bf16 as their exact f64 values).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_softmax_erf_s53b.py \\
        crates/strata-tensor/tests/data/softmax_erf_s53b.json.gz
"""
import json
import struct
import sys

import torch
import torch.nn.functional as F
from fixture_io import write_fixture

SCALES = [0.1, 1.0, 3.0, 10.0, 30.0]


def row_input(n, k):
    scale = SCALES[k % len(SCALES)]
    return [((i * 40503 + n * 977 + k * 131) % 4093 - 2046) / 2046 * scale for i in range(n)]


def hex32(t):
    return "".join("%08x" % struct.unpack("<I", struct.pack("<f", v))[0] for v in t.tolist())



def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    rows = []
    lengths = list(range(1, 65)) + list(range(65, 201, 7))
    for k, n in enumerate(lengths):
        rows.append({"n": n, "k": k, "special": None})
    # Special rows: (special kind, position) replaces one element.
    for n in [1, 5, 8, 13, 40]:
        for kind in ["-inf", "inf", "nan", "equal"]:
            rows.append({"n": n, "k": n + 7, "special": kind})
    for r in rows:
        x = torch.tensor(row_input(r["n"], r["k"]), dtype=torch.float32)
        if r["special"] == "equal":
            x = torch.full_like(x, 2.5)
        elif r["special"] is not None:
            x[r["n"] // 2] = float(r["special"])
        r["softmax"] = hex32(torch.softmax(x.unsqueeze(0), -1)[0])
        r["log_softmax"] = hex32(torch.log_softmax(x.unsqueeze(0), -1)[0])
    pats = sorted(set(range(0, 1024)) | set(range(32768, 33792)) | set(range(0, 65536, 8)))
    erf = {"patterns": "".join("%04x" % p for p in pats)}
    for dt, name in [(torch.float16, "f16"), (torch.bfloat16, "bf16")]:
        x = torch.tensor(pats, dtype=torch.int32).to(torch.int16).view(dt)
        y = torch.erf(x).view(torch.int16).to(torch.int32) & 0xFFFF
        erf[name] = "".join("%04x" % v for v in y.tolist())
    vals = [float("inf"), float("-inf"), float("nan"), 3.4e38, -3.4e38, 1e38, -1e38, 1e30, -1e30,
            1e20, -1e20, 1e10, -1e10, 65504.0, -65504.0, 1e5, -1e5, 100.0, -100.0, 10.0, -10.0,
            1e-30, -1e-30, 1e-45, 0.0, -0.0, 1.7e308, -1.7e308]
    gelu = []
    for dt, name in [(torch.float32, "f32"), (torch.float64, "f64"), (torch.float16, "f16"),
                     (torch.bfloat16, "bf16")]:
        x = torch.tensor(vals, dtype=torch.float64).to(dt)
        for ap in ["none", "tanh"]:
            y = F.gelu(x, approximate=ap)
            gelu.append({"dtype": name, "approximate": ap,
                         "x": [repr(v) for v in x.double().tolist()],
                         "y": [repr(v) for v in y.double().tolist()]})
    write_fixture(out, json.dumps({"torch": torch.__version__, "softmax": rows, "erf": erf, "gelu": gelu},
                                  separators=(",", ":")))


if __name__ == "__main__":
    main()
