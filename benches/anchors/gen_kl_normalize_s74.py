#!/usr/bin/env python3
"""Session 74: PyTorch 2.15's CPU answers (one thread) for F.kl_div (every
reduction, "batchmean" included, log_target or not) and F.normalize (p 1,
2, 3, inf; any dim; eps), written to
crates/strata-autograd/tests/data/kl_normalize_s74.json.gz
(crates/strata-autograd/tests/suite/kl_normalize_s74.rs, which checks
strata's Tensor and Var forms and the gradients).

kl_div: log-probabilities (values of any sign, -inf, NaN) against targets
that are probabilities with zeros (or log-probabilities), of one shape or
broadcastable shapes, f32, f64, f16 or bf16. normalize: inputs of 1 to 3
dims with zero rows, any dim (out of range too), eps 1e-12, 0 or 0.5.
Recorded: PyTorch's result (dtype, shape, values) or the fact that it
raised, and for f32/f64 operands the gradients for the upstream gradient
whose element j is `((3 j) mod 7 - 3) / 2`.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_kl_normalize_s74.py \\
        crates/strata-autograd/tests/data/kl_normalize_s74.json.gz
"""
import json
import math
import random
import sys
import warnings

import torch
import torch.nn.functional as F

from fixture_io import fmt, write_fixture
import gen_math_s74 as m

torch.set_num_threads(1)
warnings.simplefilter("ignore")


def tensor(r, dtype, shape, pool):
    vals = [r.choice(pool) if r.random() < 0.3 else r.uniform(-3, 3) if pool is LOGP else r.random()
            for _ in range(math.prod(shape))]
    t = torch.tensor(vals, dtype=torch.float64).to(m.DTYPES[dtype]).reshape(shape)
    return t, {"dtype": dtype, "shape": shape, "values": [fmt(float(v)) for v in t.flatten().tolist()], "t": False}


LOGP = [0.0, -1.0, -30.0, -math.inf, math.nan, 2.0]
PROB = [0.0, 0.0, 1.0, 0.5, 1e-30]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/kl_normalize_s74.json.gz"
    r = random.Random(7405)
    cases = []
    for _ in range(3000):
        op = r.choice(["kl_div", "normalize"])
        dtype = r.choice(["f32", "f32", "f64", "f16", "bf16"])
        shape = r.choice([[4], [2, 3], [3, 1, 4], [0, 3], [1], []])
        x, xd = tensor(r, dtype, shape, LOGP if op == "kl_div" else PROB + [-2.0, 0.0])
        c = {"op": op, "x": xd}
        if op == "kl_div":
            log_target = r.random() < 0.3
            yshape = shape if r.random() < 0.8 else m.broadcast_shape(r, shape)
            y, c["y"] = tensor(r, r.choice([dtype, dtype, "f32", "f64"]), yshape, LOGP if log_target else PROB)
            red = r.choice(["none", "mean", "sum", "batchmean"])
            c["args"] = {"reduction": red, "log_target": log_target}
            call = lambda a, b: F.kl_div(a, b, reduction=red, log_target=log_target)  # noqa: E731
        else:
            p = r.choice([1.0, 2.0, 2.0, 3.0, math.inf])
            dim = r.choice([0, 1, -1, 2, -3])
            eps = r.choice([1e-12, 0.0, 0.5])
            c["args"] = {"p": fmt(p), "dim": dim, "eps": eps}
            y = None
            call = lambda a, b: F.normalize(a, p, dim, eps)  # noqa: E731
        try:
            c["result"] = m.tensor_record(call(x, y))
        except Exception as e:  # noqa: BLE001
            c["error"] = str(e).split("\n")[0][:200]
        if "result" in c and dtype in ("f32", "f64") and (y is None or y.dtype in (torch.float32, torch.float64)):
            xg = x.clone().requires_grad_(True)
            yg = None if y is None else y.clone().requires_grad_(True)
            out = call(xg, yg)
            out.backward(m.upstream(list(out.shape)).to(out.dtype))
            c["grad_x"] = [fmt(float(v)) for v in xg.grad.double().flatten().tolist()]
            if yg is not None:
                c["grad_y"] = [fmt(float(v)) for v in yg.grad.double().flatten().tolist()]
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_kl_normalize_s74.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
