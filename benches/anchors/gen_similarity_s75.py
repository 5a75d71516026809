#!/usr/bin/env python3
"""Session 75: PyTorch 2.15's CPU answers (one thread) for
F.cosine_similarity and F.pairwise_distance, written to
crates/strata-autograd/tests/data/similarity_s75.json.gz
(crates/strata-autograd/tests/suite/similarity_s75.rs checks strata's
Tensor and Var forms and the gradients).

Operands of 0 to 3 dims with broadcastable (sometimes mismatched) shapes,
f32, f64, f16, bf16 or i64 (mixed now and then), values in [-2, 2] with
zero vectors now and then; cosine_similarity's dim (sometimes out of range)
and eps 1e-8, 0.5 (which clamps small norms) or 0; pairwise_distance's p 1,
2, 3, 0.5 or inf, eps 1e-6 or 0, keepdim either way. Recorded: the result
or the fact that PyTorch raised, and for f32/f64 operands the gradients of
both for the upstream gradient whose element j is `((3 j) mod 7 - 3) / 2`.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_similarity_s75.py \\
        crates/strata-autograd/tests/data/similarity_s75.json.gz
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


def tensor(r, dtype, shape, zero_rows):
    vals = [0.0 if zero_rows else (r.randint(-2, 2) if dtype == "i64" else r.uniform(-2, 2))
            for _ in range(math.prod(shape))]
    t = torch.tensor(vals, dtype=torch.float64).to(m.DTYPES[dtype]).reshape(shape)
    stored = [fmt(float(v)) if dtype != "i64" else int(v) for v in t.flatten().tolist()]
    return t, {"dtype": dtype, "shape": shape, "values": stored, "t": False}


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/similarity_s75.json.gz"
    r = random.Random(7504)
    cases = []
    for _ in range(1500):
        op = r.choice(["cosine_similarity", "pairwise_distance"])
        shape = [r.choice([1, 2, 3, 4]) for _ in range(r.randint(0, 3))]
        other = [s if r.random() < 0.8 else 1 for s in shape]
        if r.random() < 0.2 and other:
            other = other[1:]
        if r.random() < 0.05:
            other = other + [5]
        dx = r.choice(["f32", "f32", "f64", "f16", "bf16", "i64"])
        dy = dx if r.random() < 0.85 else r.choice(["f32", "f64", "i64"])
        x, xd = tensor(r, dx, shape, r.random() < 0.05)
        y, yd = tensor(r, dy, other, r.random() < 0.05)
        if op == "cosine_similarity":
            nd = max(len(shape), len(other), 1)
            args = {"dim": r.randint(-nd, nd - 1) if r.random() < 0.95 else nd,
                    "eps": r.choice([1e-8, 1e-8, 0.5, 0.0])}

            def call(a, b):
                return F.cosine_similarity(a, b, args["dim"], args["eps"])
        else:
            args = {"p": r.choice([1.0, 2.0, 2.0, 3.0, 0.5, math.inf]), "eps": r.choice([1e-6, 1e-6, 0.0]),
                    "keepdim": r.random() < 0.3}

            def call(a, b):
                return F.pairwise_distance(a, b, args["p"], args["eps"], args["keepdim"])
        c = {"op": op, "x": xd, "y": yd, "args": {k: fmt(v) if isinstance(v, float) else v for k, v in args.items()}}
        try:
            c["result"] = m.tensor_record(call(x, y))
        except Exception as e:  # noqa: BLE001
            c["error"] = str(e).split("\n")[0][:200]
        if "result" in c and dx in ("f32", "f64") and dy in ("f32", "f64"):
            xg, yg = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
            out = call(xg, yg)
            try:
                out.backward(m.upstream(list(out.shape)).to(out.dtype))
                c["grad_x"] = [fmt(float(v)) for v in xg.grad.double().flatten().tolist()]
                c["grad_y"] = [fmt(float(v)) for v in yg.grad.double().flatten().tolist()]
            except RuntimeError:
                pass
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_similarity_s75.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
