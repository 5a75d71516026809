#!/usr/bin/env python3
"""Session 75: PyTorch 2.15's CPU answers (one thread) for F.batch_norm,
written to crates/strata-autograd/tests/data/batch_norm_s75.json.gz
(crates/strata-autograd/tests/suite/batch_norm_s75.rs checks strata's
Tensor and Var forms, the running statistics and the gradients).

Inputs [N, C, *] of 2 to 4 dims (N may be 0 or 1, spatial sizes 1 to 3),
f32, f64, f16 or bf16 (sometimes i64 or 1-D); running statistics given or
not (their dtype the input's, or f32 for f16/bf16, sometimes another or a
wrong length; one without the other now and then), weight and bias likewise; training or evaluation; momentum
0, 0.1, 0.5 or 1; eps 1e-5, 0.1, or (rarely) 0 or negative. Values uniform in [-2, 2] with some
large ones; running variances positive. Recorded: PyTorch's result (or the
fact that it raised), the running statistics after the call, and for
f32/f64 the gradients of the input, weight and bias for the upstream
gradient whose element j is `((3 j) mod 7 - 3) / 2`. Also ("layers"):
nn.BatchNorm1d/2d/3d of random configurations (momentum 0.1, 0.3 or None,
affine or not, tracking running statistics or not) run for five steps
(training, training, evaluation, training, evaluation): each step's input
and output, and the buffers at the end.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_batch_norm_s75.py \\
        crates/strata-autograd/tests/data/batch_norm_s75.json.gz
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


def tensor(r, dtype, shape, positive=False):
    vals = [r.uniform(0.1, 3) if positive else (r.uniform(-2, 2) if r.random() < 0.95 else r.choice([50.0, -80.0]))
            for _ in range(math.prod(shape))]
    t = torch.tensor(vals, dtype=torch.float64).to(m.DTYPES[dtype]).reshape(shape)
    stored = [fmt(float(v)) if dtype != "i64" else int(v) for v in t.flatten().tolist()]
    return t, {"dtype": dtype, "shape": shape, "values": stored, "t": False}


def layers(r):
    """nn.BatchNorm1d/2d/3d run for a few steps (training, then evaluation,
    then training again): each step's input and output, and the buffers at
    the end."""
    out = []
    for _ in range(60):
        kind, ndim = r.choice([("BatchNorm1d", 2), ("BatchNorm1d", 3), ("BatchNorm2d", 4), ("BatchNorm3d", 5)])
        c = r.choice([1, 2, 3])
        cfg = {"kind": kind, "num_features": c, "eps": r.choice([1e-5, 1e-3]),
               "momentum": r.choice([0.1, 0.3, None]), "affine": r.random() < 0.7,
               "track_running_stats": r.random() < 0.8}
        layer = getattr(torch.nn, kind)(c, cfg["eps"], cfg["momentum"], cfg["affine"], cfg["track_running_stats"])
        steps = []
        for training in [True, True, False, True, False]:
            layer.train(training)
            shape = [r.choice([2, 3])] + [c] + [r.choice([1, 2, 3]) for _ in range(ndim - 2)]
            x, xd = tensor(r, "f32", shape)
            with torch.no_grad():
                y = layer(x)
            steps.append({"training": training, "x": xd, "y": [fmt(float(v)) for v in y.flatten().tolist()]})
        buffers = {k: [fmt(float(v)) for v in b.double().flatten().tolist()] for k, b in layer.named_buffers()}
        out.append({"config": cfg, "steps": steps, "buffers": buffers})
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/batch_norm_s75.json.gz"
    r = random.Random(7502)
    cases = []
    for _ in range(1500):
        dtype = r.choice(["f32", "f32", "f64", "f16", "bf16"] + (["i64"] if r.random() < 0.05 else []))
        c = r.choice([1, 2, 3])
        shape = [r.choice([0, 1, 2, 4]), c] + [r.choice([1, 2, 3]) for _ in range(r.randint(0, 2))]
        if r.random() < 0.03:
            shape = [c]
        pdtype = dtype if dtype not in ("f16", "bf16") or r.random() < 0.5 else "f32"
        if dtype == "i64":
            pdtype = "f32"
        if r.random() < 0.04:
            pdtype = r.choice(["f64", "f32", "bf16"])
        args = {"training": r.random() < 0.6, "momentum": r.choice([0.1, 0.1, 0.0, 0.5, 1.0]),
                "eps": r.choice([1e-5, 1e-5, 0.1]) if r.random() < 0.95 else r.choice([0.0, -1e-3])}
        x, xd = tensor(r, dtype, shape)
        case = {"op": "batch_norm", "x": xd, "args": args}
        params, running = {}, {}
        with_running = r.random() < 0.75
        for name in ["running_mean", "running_var", "weight", "bias"]:
            given = with_running if name.startswith("running") and r.random() < 0.95 else r.random() < 0.75
            if given:
                n = c if r.random() < 0.96 else c + 1
                t, d = tensor(r, pdtype, [n], positive=name == "running_var")
                (running if name.startswith("running") else params)[name] = t
                case[name] = d

        def call(x, p, rs):
            return F.batch_norm(x, rs.get("running_mean"), rs.get("running_var"), p.get("weight"),
                                p.get("bias"), args["training"], args["momentum"], args["eps"])
        rs = {k: v.clone() for k, v in running.items()}
        try:
            case["result"] = m.tensor_record(call(x, params, rs))
            for k, v in rs.items():
                case[k + "_after"] = [fmt(float(t)) for t in v.double().flatten().tolist()]
        except Exception as e:  # noqa: BLE001
            case["error"] = str(e).split("\n")[0][:200]
        if "result" in case and dtype in ("f32", "f64") and pdtype == dtype:
            xg = x.clone().requires_grad_(True)
            pg = {k: v.clone().requires_grad_(True) for k, v in params.items()}
            y = call(xg, pg, {k: v.clone() for k, v in running.items()})
            y.backward(m.upstream(list(y.shape)).to(y.dtype))
            case["grad_x"] = [fmt(float(v)) for v in xg.grad.double().flatten().tolist()]
            for k, v in pg.items():
                case["grad_" + k] = [fmt(float(t)) for t in v.grad.double().flatten().tolist()]
        cases.append(case)
    doc = {"generator": "benches/anchors/gen_batch_norm_s75.py", "torch": torch.__version__, "cases": cases,
           "layers": layers(r)}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
