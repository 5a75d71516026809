#!/usr/bin/env python3
"""Session 76: PyTorch 2.15's CPU answers (one thread) for F.pixel_shuffle
and F.pixel_unshuffle, written to
crates/strata-autograd/tests/data/pixel_shuffle_s76.json.gz
(crates/strata-autograd/tests/suite/pixel_shuffle_s76.rs checks strata's
Tensor and Var forms and the input's gradient).

Inputs of 2 to 5 dims (sizes 0 to 6; the channel dim mostly a multiple of
the factor's square for pixel_shuffle, the last two mostly multiples of the
factor for pixel_unshuffle), factors 0 to 3 (a negative one now and then),
dtypes f32, f64, bf16, i64, bool. Recorded: the result or the fact that
PyTorch raised, and for f32/f64 inputs the input's gradient for the upstream
gradient whose element j is `((3 j) mod 7 - 3) / 2`.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_pixel_shuffle_s76.py \\
        crates/strata-autograd/tests/data/pixel_shuffle_s76.json.gz
"""
import json
import random
import sys

import torch
import torch.nn.functional as F

from fixture_io import write_fixture
import gen_math_s74 as m
from gen_fold_s76 import input_grad, small_int_tensor

torch.set_num_threads(1)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/pixel_shuffle_s76.json.gz"
    r = random.Random(7602)
    cases = []
    for _ in range(1000):
        op = r.choice(["pixel_shuffle", "pixel_unshuffle"])
        factor = r.choice([1, 2, 2, 3]) if r.random() < 0.93 else r.choice([0, -1])
        nd = r.choice([3, 4, 4, 5]) if r.random() < 0.93 else 2
        shape = [r.randint(1, 3) for _ in range(nd)]
        f = max(factor, 1)
        if nd >= 3:
            if op == "pixel_shuffle" and r.random() < 0.85:
                shape[-3] = f * f * r.randint(1, 2)
            if op == "pixel_unshuffle" and r.random() < 0.85:
                shape[-2] = f * r.randint(1, 2)
                shape[-1] = f * r.randint(1, 2)
        if r.random() < 0.05:
            shape[r.randrange(nd)] = 0
        dtype = r.choice(["f32", "f32", "f64", "bf16", "i64", "bool"])
        x, xd = small_int_tensor(r, dtype, shape, 5)

        def call(t):
            return F.pixel_shuffle(t, factor) if op == "pixel_shuffle" else F.pixel_unshuffle(t, factor)
        c = {"op": op, "x": xd, "args": {"factor": factor}}
        try:
            c["result"] = m.tensor_record(call(x))
        except Exception as e:  # noqa: BLE001
            c["error"] = str(e).split("\n")[0][:200]
        if "result" in c and dtype in ("f32", "f64"):
            # PyTorch's backward of some empty inputs fails (a gradient of
            # the wrong shape); no gradient is recorded there.
            grad = input_grad(call, x)
            if grad is not None:
                c["grad_x"] = grad
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_pixel_shuffle_s76.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
