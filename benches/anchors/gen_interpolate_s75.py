#!/usr/bin/env python3
"""Session 75: PyTorch 2.15's CPU answers (one thread) for F.interpolate,
written to crates/strata-autograd/tests/data/interpolate_s75.json.gz
(crates/strata-autograd/tests/suite/interpolate_s75.rs checks strata's
Tensor and Var forms and the input's gradient).

Inputs [N, C, ...] with 1 to 3 spatial dims of 1 to 7 (N may be 0), f32,
f64, f16, bf16, u8 or i64; modes nearest, nearest-exact, linear, bilinear,
trilinear (usually matching the rank) and area; an output size or a scale
factor (0.5, 0.7, 1, 1.5, 2, 2.5, 3 or 1/3, per dim or for all), with
recompute_scale_factor now and then, align_corners None, true or false for
the linear modes (sometimes given to another mode; u8 never with
bilinear, whose PyTorch kernel works in fixed point); now and then both size
and scale_factor, neither, or a size of 0. Recorded: the result or the fact
that PyTorch raised, and for f32/f64 inputs the input's gradient for the
upstream gradient whose element j is `((3 j) mod 7 - 3) / 2`.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_interpolate_s75.py \\
        crates/strata-autograd/tests/data/interpolate_s75.json.gz
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

LINEAR = {3: "linear", 4: "bilinear", 5: "trilinear"}


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/interpolate_s75.json.gz"
    r = random.Random(7505)
    cases = []
    for _ in range(1500):
        d = r.choice([1, 2, 2, 3])
        shape = [r.choice([0, 1, 2, 2]), r.choice([1, 2, 3])] + [r.randint(1, 7 if d < 3 else 4) for _ in range(d)]
        dtype = r.choice(["f32", "f32", "f64", "f16", "bf16", "u8", "i64"])
        mode = r.choice(["nearest", "nearest-exact", "linear-ish", "linear-ish", "area"])
        if mode == "linear-ish":
            mode = LINEAR[d + 2] if r.random() < 0.93 else r.choice(list(LINEAR.values()))
        if mode == "bilinear" and dtype == "u8":
            # PyTorch's u8 bilinear kernel works in fixed point; strata
            # refuses u8 for the linear modes. Never asked.
            dtype = "f32"
        args = {"mode": mode}
        if r.random() < 0.5:
            args["size"] = ([r.randint(1, 9)] if r.random() < 0.4 else [r.randint(1, 9) for _ in range(d)])
        else:
            factors = [0.5, 0.7, 1.0, 1.5, 2.0, 2.5, 3.0, 1 / 3]
            args["scale_factor"] = ([r.choice(factors)] if r.random() < 0.5 else [r.choice(factors) for _ in range(d)])
            if r.random() < 0.2:
                args["recompute_scale_factor"] = True
        if "linear" in mode and r.random() < 0.6:
            args["align_corners"] = r.random() < 0.5
        if r.random() < 0.06:
            bad = r.choice(["both", "neither", "zero", "align"])
            if bad == "both":
                args["size"], args["scale_factor"] = [3], [2.0]
            elif bad == "neither":
                args.pop("size", None)
                args.pop("scale_factor", None)
            elif bad == "zero":
                args.pop("scale_factor", None)
                args["size"] = [0]
            else:
                args["align_corners"] = True
        vals = [r.randint(0, 9) if dtype in ("u8", "i64") else r.uniform(-2, 2) for _ in range(math.prod(shape))]
        x = torch.tensor(vals, dtype=torch.float64).to(m.DTYPES[dtype]).reshape(shape)
        xd = {"dtype": dtype, "shape": shape,
              "values": [fmt(float(v)) if dtype not in ("u8", "i64") else int(v) for v in x.flatten().tolist()],
              "t": False}

        def call(x):
            kw = dict(args)
            for k in ("size", "scale_factor"):
                if k in kw:
                    kw[k] = kw[k][0] if len(kw[k]) == 1 else kw[k]
            return F.interpolate(x, **kw)
        c = {"op": "interpolate", "x": xd, "args": {k: ([fmt(float(v)) for v in a] if k == "scale_factor" else a)
                                                     for k, a in args.items()}}
        try:
            c["result"] = m.tensor_record(call(x))
        except Exception as e:  # noqa: BLE001
            c["error"] = str(e).split("\n")[0][:200]
        if "result" in c and dtype in ("f32", "f64"):
            xg = x.clone().requires_grad_(True)
            y = call(xg)
            try:
                y.backward(m.upstream(list(y.shape)).to(y.dtype))
                c["grad_x"] = [fmt(float(v)) for v in xg.grad.double().flatten().tolist()]
            except RuntimeError:
                pass
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_interpolate_s75.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
