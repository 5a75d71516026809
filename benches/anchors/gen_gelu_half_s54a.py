#!/usr/bin/env python3
"""PyTorch 2.15's CPU F.gelu of f16 and bf16 tensors (one thread, AVX2), both
approximations, for crates/strata-tensor/tests/suite/cross_entropy_s54a.rs
(its gelu test), written to crates/strata-tensor/tests/data/gelu_half_s54a.json.

PyTorch computes a 2-byte float's GELU in f32 (GeluKernelImpl converts each
vector to f32, computes, converts back). The inputs are the bit patterns
listed in "patterns" (4 hex digits each) as one contiguous tensor (a
multiple of 32 elements, so that every element takes the vectorised path);
the outputs are bit patterns too, under "<dtype>_<approximate>".

Usage (the committed fixture takes every --step'th pattern, 16 by default;
--step 1 writes all 65,536, a probe the test checks when
STRATA_GELU_S54A_PROBE names it):
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_gelu_half_s54a.py \\
        crates/strata-tensor/tests/data/gelu_half_s54a.json [--step 16]
"""
import argparse
import json

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--step", type=int, default=16)
    a = ap.parse_args()
    torch.set_num_threads(1)
    # Every step'th pattern, plus the neighbourhood of 1.0, 3.0 and their
    # negatives in both types (where erf's polynomial and tanh turn over).
    pats = set(range(0, 65536, a.step))
    for c in [0x3C00, 0x4200, 0xBC00, 0xC200, 0x3F80, 0x4040, 0xBF80, 0xC040]:
        pats |= set(range(c - 48, c + 48))
    pats = sorted(pats)
    pats += [0] * (-len(pats) % 32)
    out = {"torch": torch.__version__, "patterns": "".join("%04x" % p for p in pats)}
    for dt, name in [(torch.float16, "f16"), (torch.bfloat16, "bf16")]:
        x = torch.tensor(pats, dtype=torch.int32).to(torch.int16).view(dt)
        for approx in ["none", "tanh"]:
            y = F.gelu(x, approximate=approx).view(torch.int16).to(torch.int32) & 0xFFFF
            out["%s_%s" % (name, approx)] = "".join("%04x" % v for v in y.tolist())
    with open(a.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
