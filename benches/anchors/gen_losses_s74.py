#!/usr/bin/env python3
"""Session 74: PyTorch 2.15's CPU answers (one thread) for the losses strata
added in session 74, written to two fixtures:

- crates/strata-tensor/tests/data/losses_s74.json.gz
  (crates/strata-tensor/tests/suite/losses_s74.rs): F.l1_loss,
  F.smooth_l1_loss (beta), F.huber_loss (delta),
  F.binary_cross_entropy (weight) and F.binary_cross_entropy_with_logits
  (weight, pos_weight), every reduction, on inputs and targets of any
  strata dtype (mostly float) and broadcastable or mismatched shapes, with
  parameters that are 0, negative, infinite or NaN, and probabilities at,
  inside and outside [0, 1];
- crates/strata-autograd/tests/data/losses_grad_s74.json.gz
  (crates/strata-autograd/tests/suite/losses_grad_s74.rs): the gradients of
  the input and the target for f32 and f64 operands, for the upstream
  gradient whose element j is `((3 j) mod 7 - 3) / 2` (a 0-d reduction: 1.5).

The tensors are math_s74's (gen_math_s74.py), sometimes transposed; the
probabilities come from their own pool. Recorded: PyTorch's result dtype,
shape and values, or the fact that it raised.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_losses_s74.py \\
        crates/strata-tensor/tests/data/losses_s74.json.gz \\
        crates/strata-autograd/tests/data/losses_grad_s74.json.gz
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

PROBS = [0.0, 1.0, 0.5, 1e-8, 1 - 1e-7, 0.3, 0.9, 0.01, 0.75]
PARAM = [1.0, 0.5, 2.0, 0.0, -1.0, 1e-3, 100.0, math.inf, math.nan]
OPS = ["l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"]


def prob_values(r, dtype, n):
    return [r.choice(PROBS) if r.random() < 0.6 else r.random() if r.random() < 0.97
            else r.choice([-0.5, 1.5, math.nan]) for _ in range(n)]


def draw(r, dtype, shape, probs):
    if not probs or dtype not in ("f32", "f64", "f16", "bf16"):
        return m.draw_tensor(r, dtype, shape)
    saved = m.draw_values
    m.draw_values = lambda rr, dt, n: prob_values(rr, dt, n)
    try:
        return m.draw_tensor(r, dtype, shape)
    finally:
        m.draw_values = saved


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/losses_s74.json.gz"
    grad_path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/losses_grad_s74.json.gz"
    r = random.Random(7403)
    cases, grads = [], []
    floats = ["f32", "f64", "f16", "bf16"]
    for _ in range(5000):
        op = r.choice(OPS)
        xd = r.choice(floats * 4 + list(m.DTYPES))
        yd = xd if r.random() < 0.6 else r.choice(floats * 3 + list(m.DTYPES))
        shape = r.choice(m.SHAPES)
        bce = op == "binary_cross_entropy"
        yshape = shape if (op.startswith("binary") and r.random() < 0.9) else m.broadcast_shape(r, shape)
        x, xrec = draw(r, xd, shape, bce)
        y, yrec = draw(r, yd, yshape, op.startswith("binary"))
        reduction = r.choice(["none", "mean", "sum"])
        c = {"op": op, "x": xrec, "y": yrec, "reduction": reduction, "args": {}}
        kw = {"reduction": reduction}
        extra = {}
        if op == "smooth_l1_loss":
            kw["beta"] = r.choice(PARAM)
        if op == "huber_loss":
            kw["delta"] = r.choice(PARAM)
        if op.startswith("binary"):
            for k in (["weight"] if bce else ["weight", "pos_weight"]):
                if r.random() < 0.35:
                    wshape = r.choice([yshape, yshape[-1:], [], [1]])
                    extra[k], c[k] = m.draw_tensor(r, r.choice(["f32", "f32", "f64", "f16"]), wshape)
        c["args"] = {k: fmt(v) for k, v in kw.items() if k != "reduction"}
        f = getattr(F, op)
        try:
            c["result"] = m.tensor_record(f(x, y, **kw, **extra))
        except Exception as e:  # noqa: BLE001 - PyTorch raises several types
            c["error"] = str(e).split("\n")[0][:200]
        cases.append(c)
        if "result" in c and xd in ("f32", "f64") and yd in ("f32", "f64"):
            xg = x.detach().clone().requires_grad_(True)
            yg = y.detach().clone().requires_grad_(True)
            out = f(xg, yg, **kw, **extra)
            try:
                out.backward(m.upstream(list(out.shape)).to(out.dtype))
            except Exception as e:  # noqa: BLE001
                grads.append(dict(c, grad_error=str(e).split("\n")[0][:200]))
                continue
            grads.append(dict(c, grad_x=[fmt(float(v)) for v in xg.grad.double().flatten().tolist()],
                              grad_y=[fmt(float(v)) for v in yg.grad.double().flatten().tolist()]))
    doc = {"generator": "benches/anchors/gen_losses_s74.py", "torch": torch.__version__, "cases": cases}
    write_fixture(tensor_path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), tensor_path))
    doc = {"generator": "benches/anchors/gen_losses_s74.py", "torch": torch.__version__, "cases": grads}
    write_fixture(grad_path, json.dumps(doc, allow_nan=False))
    print("%d gradient cases (%d errors) -> %s" % (len(grads), sum("grad_error" in g for g in grads), grad_path))


if __name__ == "__main__":
    main()
