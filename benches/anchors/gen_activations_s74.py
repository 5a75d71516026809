#!/usr/bin/env python3
"""Session 74: PyTorch 2.15's CPU answers (one thread) for the activation
functions strata added in session 74, written to two fixtures:

- crates/strata-tensor/tests/data/activations_s74.json.gz
  (crates/strata-tensor/tests/suite/activations_s74.rs): F.leaky_relu,
  torch.ops.aten.elu (alpha, scale, input_scale), F.selu, F.celu,
  F.softplus (beta, threshold), F.hardtanh (min_val, max_val), F.relu6,
  F.hardsigmoid, F.hardswish, F.mish, F.logsigmoid, F.softsign and
  F.threshold (threshold, value), on every strata dtype, with parameters
  drawn from pools holding 0, negatives, large values and, for the float
  ones, ±inf and NaN;
- crates/strata-autograd/tests/data/activations_grad_s74.json.gz
  (crates/strata-autograd/tests/suite/activations_grad_s74.rs): their
  gradients for f32 and f64 inputs, for the upstream gradient whose element
  j is `((3 j) mod 7 - 3) / 2`.

The inputs are math_s74's (gen_math_s74.py): tensors of 0 to 3 dims, empty
ones included, sometimes transposed, of edge and uniform values. Recorded:
PyTorch's result dtype, shape and values, or the fact that it raised.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_activations_s74.py \\
        crates/strata-tensor/tests/data/activations_s74.json.gz \\
        crates/strata-autograd/tests/data/activations_grad_s74.json.gz
"""
import json
import math
import random
import sys

import torch
import torch.nn.functional as F

from fixture_io import fmt, write_fixture
from gen_math_s74 import DTYPES, SHAPES, draw_tensor, tensor_record, upstream

torch.set_num_threads(1)

PARAM = [0.0, 0.01, 0.2, 1.0, 2.0, -0.5, -1.0, 3.5, 1e-3, 100.0, 1e30, math.inf, -math.inf, math.nan]
BOUND = [-1.0, 1.0, 0.0, -2.5, 2.5, 6.0, -6.0, 0.5, 1e10, -1e10, 300.0]


def draw_call(r, op):
    """The call's parameters (as stored) and a function applying them."""
    p = lambda: r.choice(PARAM)  # noqa: E731
    if op == "leaky_relu":
        a = {"negative_slope": p()}
        return a, lambda x: F.leaky_relu(x, a["negative_slope"])
    if op == "elu":
        a = {"alpha": p(), "scale": r.choice([1.0, p()]), "input_scale": r.choice([1.0, p()])}
        return a, lambda x: torch.ops.aten.elu(x, a["alpha"], a["scale"], a["input_scale"])
    if op == "celu":
        a = {"alpha": p()}
        return a, lambda x: F.celu(x, a["alpha"])
    if op == "softplus":
        a = {"beta": r.choice([1.0, p()]), "threshold": r.choice([20.0, p()])}
        return a, lambda x: F.softplus(x, a["beta"], a["threshold"])
    if op == "hardtanh":
        a = {"min_val": r.choice(BOUND), "max_val": r.choice(BOUND)}
        return a, lambda x: F.hardtanh(x, a["min_val"], a["max_val"])
    if op == "threshold":
        a = {"threshold": r.choice(BOUND + [0.5, -0.5]), "value": r.choice(BOUND + [7.0, -3.0])}
        return a, lambda x: F.threshold(x, a["threshold"], a["value"])
    return {}, getattr(F, op)


OPS = ["leaky_relu", "elu", "selu", "celu", "softplus", "hardtanh", "relu6", "hardsigmoid",
       "hardswish", "mish", "logsigmoid", "softsign", "threshold"]


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/activations_s74.json.gz"
    grad_path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/activations_grad_s74.json.gz"
    r = random.Random(7402)
    cases, grads = [], []
    for _ in range(6000):
        op = r.choice(OPS)
        dtype = r.choice(list(DTYPES) + ["f32", "f64", "f16", "bf16"] * 2)
        x, xd = draw_tensor(r, dtype, r.choice(SHAPES))
        args, f = draw_call(r, op)
        c = {"op": op, "x": xd, "args": {k: fmt(v) for k, v in args.items()}}
        try:
            c["result"] = tensor_record(f(x))
        except Exception as e:  # noqa: BLE001 - PyTorch raises several types
            c["error"] = str(e).split("\n")[0][:200]
        cases.append(c)
        if "result" in c and dtype in ("f32", "f64"):
            xg = x.detach().clone().requires_grad_(True)
            y = f(xg)
            try:
                y.backward(upstream(list(y.shape)).to(y.dtype))
            except Exception as e:  # noqa: BLE001
                grads.append(dict(c, grad_error=str(e).split("\n")[0][:200]))
                continue
            grads.append(dict(c, grad_x=[fmt(float(v)) for v in xg.grad.double().flatten().tolist()]))
    doc = {"generator": "benches/anchors/gen_activations_s74.py", "torch": torch.__version__, "cases": cases}
    write_fixture(tensor_path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), tensor_path))
    doc = {"generator": "benches/anchors/gen_activations_s74.py", "torch": torch.__version__, "cases": grads}
    write_fixture(grad_path, json.dumps(doc, allow_nan=False))
    print("%d gradient cases (%d errors) -> %s" % (len(grads), sum("grad_error" in g for g in grads), grad_path))


if __name__ == "__main__":
    main()
