#!/usr/bin/env python3
"""Session 75: PyTorch 2.15's CPU answers (one thread) for torch.linspace,
torch.logspace and F.one_hot, written to
crates/strata-tensor/tests/data/spaced_one_hot_s75.json.gz
(crates/strata-tensor/tests/suite/spaced_one_hot_s75.rs).

linspace/logspace: start and end from small integers, fractions, large and
negative values (and now and then inf or NaN), steps 0 to 40 (sometimes 257
or 1000), dtype None (f32), f64, f16, bf16, i64 or i32; logspace's base 10,
2, 0.5 or e. one_hot: i64 tensors of 0 to 3 dims (empty ones included) of
indices in [0, 6) (sometimes negative or too large), num_classes -1 (None)
or 0 to 8, and now and then an i32 or f32 tensor. Recorded: the result
(dtype, shape, values) or the fact that PyTorch raised.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_spaced_one_hot_s75.py \\
        crates/strata-tensor/tests/data/spaced_one_hot_s75.json.gz
"""
import json
import math
import random
import sys

import torch
import torch.nn.functional as F

from fixture_io import fmt, write_fixture
import gen_math_s74 as m

torch.set_num_threads(1)


def endpoint(r):
    return r.choice([0, 1, -1, 3, 10, -7, 100, 0.5, -2.25, 1e-3, 1e4, -1e5, 2.0 ** 30, 0.1, 1 / 3]
                    + ([math.inf, -math.inf, math.nan] if r.random() < 0.05 else []))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/spaced_one_hot_s75.json.gz"
    r = random.Random(7503)
    cases = []
    for _ in range(1500):
        op = r.choice(["linspace", "linspace", "logspace", "one_hot", "one_hot"])
        c = {"op": op}
        if op in ("linspace", "logspace"):
            dtype = r.choice([None, None, "f64", "f16", "bf16", "i64", "i32"])
            args = {"start": endpoint(r), "end": endpoint(r),
                    "steps": r.choice([0, 1, 2, 3, 5, 7, 10, 16, 33, 40] + ([257, 1000] if r.random() < 0.1 else [])),
                    "dtype": dtype}
            if op == "logspace":
                args["base"] = r.choice([10.0, 2.0, 0.5, math.e])
                args["start"], args["end"] = [max(-40, min(40, v)) if math.isfinite(v) else v
                                              for v in (args["start"], args["end"])]
            c["args"] = {k: (fmt(float(v)) if isinstance(v, float) else v) for k, v in args.items()}
            kw = {"dtype": m.DTYPES[dtype]} if dtype else {}
            try:
                if op == "linspace":
                    y = torch.linspace(args["start"], args["end"], args["steps"], **kw)
                else:
                    y = torch.logspace(args["start"], args["end"], args["steps"], args["base"], **kw)
                c["result"] = m.tensor_record(y)
            except Exception as e:  # noqa: BLE001
                c["error"] = str(e).split("\n")[0][:200]
        else:
            shape = [r.choice([0, 1, 2, 3, 4]) for _ in range(r.randint(0, 3))]
            n = math.prod(shape)
            vals = [r.randint(0, 5) if r.random() < 0.97 else r.choice([-1, 9]) for _ in range(n)]
            dtype = "i64" if r.random() < 0.95 else r.choice(["i32", "f32"])
            classes = r.choice([-1, -1, 6, 7, 8, 3, 0])
            c["x"] = {"dtype": dtype, "shape": shape, "values": vals, "t": False}
            c["args"] = {"num_classes": classes}
            try:
                y = F.one_hot(torch.tensor(vals, dtype=m.DTYPES[dtype]).reshape(shape), classes)
                c["result"] = m.tensor_record(y)
            except Exception as e:  # noqa: BLE001
                c["error"] = str(e).split("\n")[0][:200]
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_spaced_one_hot_s75.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
