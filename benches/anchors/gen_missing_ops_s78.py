#!/usr/bin/env python3
"""Session 78: PyTorch 2.15's CPU answers (one thread) for the ops strata
added in session 78, written to two fixtures:

- crates/strata-tensor/tests/data/missing_ops_s78.json.gz
  (crates/strata-tensor/tests/suite/missing_ops_s78.rs): every op's result
  (dtype, shape, values; both results of var_mean/std_mean) or the fact
  that PyTorch raised, on operands of every strata dtype (mostly float),
  shapes with and without elements, 0-d, transposed (non-contiguous)
  operands, values with NaN, infinities and huge numbers, and arguments
  outside their domain;
- crates/strata-autograd/tests/data/missing_ops_s78_grad.json.gz
  (crates/strata-autograd/tests/suite/missing_ops_s78.rs): for the calls
  whose differentiable operands are all f32 or f64 and that succeed, the
  gradient of every differentiable operand for the upstream gradient whose
  element j is `((3 j) mod 7 - 3) / 2` (each output of a pair its own).

The ops: F.margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
cosine_embedding_loss, triplet_margin_loss, multilabel_soft_margin_loss,
poisson_nll_loss, gaussian_nll_loss, glu, hardshrink, softshrink,
tanhshrink, softmin, prelu; torch.nansum, nanmean, var_mean, std_mean,
logaddexp, logaddexp2, xlogy, addcdiv, movedim.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_missing_ops_s78.py \\
        crates/strata-tensor/tests/data/missing_ops_s78.json.gz \\
        crates/strata-autograd/tests/data/missing_ops_s78_grad.json.gz
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

FLOATS = ["f32", "f64", "f16", "bf16"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, math.inf, -math.inf, math.nan, 1e30, -1e30, 1e-8, 100.0]
SHAPES = [[], [0], [1], [5], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [3, 1, 4], [4, 2]]
REDUCTIONS = ["none", "mean", "sum"]
PARAM = [1.0, 0.5, 0.0, -1.0, 2.0, 1e-3, math.inf, math.nan]


def values(r, dtype, n, kind):
    if dtype == "bool":
        return [r.random() < 0.5 for _ in range(n)]
    if dtype in m.RANGES:
        if kind == "sign":
            return [r.choice([1, -1, 1, -1, 0, 2]) for _ in range(n)]
        return [r.randint(-5, 5) for _ in range(n)]
    if kind == "sign":
        return [r.choice([1.0, -1.0, 1.0, -1.0, 0.0, 0.5, math.nan]) if r.random() < 0.97 else r.choice(SPECIAL)
                for _ in range(n)]
    if kind == "pos":
        return [abs(r.uniform(0, 3)) if r.random() < 0.85 else r.choice([0.0, 1e-9, -1.0, math.inf, math.nan, 5.0])
                for _ in range(n)]
    rare = 0.03 if kind == "tame" else 0.2
    return [r.choice(SPECIAL) if r.random() < rare else r.uniform(-3, 3) for _ in range(n)]


def draw(r, dtype, shape, kind="any"):
    saved = m.draw_values
    m.draw_values = lambda rr, dt, n: values(rr, dt, n, kind)
    try:
        return m.draw_tensor(r, dtype, shape)
    finally:
        m.draw_values = saved


def float_dtype(r):
    return r.choice(FLOATS * 5 + list(m.DTYPES))


def bshape(r, shape):
    return m.broadcast_shape(r, shape) if r.random() < 0.3 else list(shape)


def case(r, op):
    """The call's operands (tensors and records), its keyword arguments (as
    recorded), a callable, and the indices of the differentiable operands."""
    d = float_dtype(r)
    d2 = d if r.random() < 0.8 else float_dtype(r)
    shape = r.choice(SHAPES)
    red = r.choice(REDUCTIONS)
    ts, args, diff = [], {}, []

    def add(t):
        ts.append(t)

    if op == "margin_ranking_loss":
        add(draw(r, d, shape)); add(draw(r, d2, bshape(r, shape))); add(draw(r, d, bshape(r, shape), "sign"))
        args = {"margin": r.choice(PARAM), "reduction": red}
        f = lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=args["margin"], reduction=red)
        diff = [0, 1, 2]
    elif op == "hinge_embedding_loss":
        add(draw(r, d, shape)); add(draw(r, d2, bshape(r, shape), "sign"))
        args = {"margin": r.choice(PARAM), "reduction": red}
        f = lambda a, t: F.hinge_embedding_loss(a, t, margin=args["margin"], reduction=red)
        diff = [0]
    elif op == "soft_margin_loss":
        add(draw(r, d, shape)); add(draw(r, d2, bshape(r, shape), "sign"))
        args = {"reduction": red}
        f = lambda a, t: F.soft_margin_loss(a, t, reduction=red)
        diff = [0]
    elif op == "cosine_embedding_loss":
        n, k = r.randint(0, 4), r.randint(0, 4)
        s, ts_ = r.choice([([n, k], [n]), ([k], []), ([n, k], []), ([n, k], [n, 1]), ([n, k, 2], [n])])
        add(draw(r, d, s, "tame")); add(draw(r, d2, s if r.random() < 0.9 else bshape(r, s), "tame"))
        add(draw(r, r.choice(["f32", "f64", "i64"]), ts_, "sign"))
        args = {"margin": r.choice([0.0, 0.5, -0.5, 1.0]), "reduction": red}
        f = lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=args["margin"], reduction=red)
        diff = [0, 1]
    elif op == "triplet_margin_loss":
        s = r.choice([[3, 4], [2, 3, 2], [4], [0, 3], [2, 0], [1, 5]])
        for _ in range(3):
            add(draw(r, d if r.random() < 0.9 else d2, s if r.random() < 0.9 else bshape(r, s), "tame"))
        args = {"margin": r.choice([1.0, 0.5, 2.0, 0.0, -1.0, math.nan]), "p": r.choice([2.0, 1.0, 3.0, math.inf, 0.0]),
                "eps": r.choice([1e-6, 0.0, 0.1]), "swap": r.random() < 0.4, "reduction": red}
        f = lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=args["margin"], p=args["p"], eps=args["eps"],
                                                  swap=args["swap"], reduction=red)
        diff = [0, 1, 2]
    elif op == "multilabel_soft_margin_loss":
        s = r.choice([[3, 4], [2, 5], [4], [0, 3], [2, 0], [2, 3, 2], []])
        add(draw(r, d, s)); add(draw(r, d2, s if r.random() < 0.9 else bshape(r, s), "pos"))
        w = None
        if r.random() < 0.3 and s:
            w = draw(r, r.choice(["f32", "f64"]), r.choice([s[-1:], s, [1]]), "pos")
        args = {"reduction": red, "weight": w[1] if w else None}
        f = lambda a, t: F.multilabel_soft_margin_loss(a, t, weight=w[0] if w else None, reduction=red)
        diff = [0, 1]
    elif op == "poisson_nll_loss":
        log_input = r.random() < 0.5
        add(draw(r, d, shape, "any" if log_input else "pos")); add(draw(r, d2, bshape(r, shape), "pos"))
        args = {"log_input": log_input, "full": r.random() < 0.5, "eps": r.choice([1e-8, 0.0, 0.5]), "reduction": red}
        f = lambda a, t: F.poisson_nll_loss(a, t, log_input=args["log_input"], full=args["full"], eps=args["eps"],
                                            reduction=red)
        diff = [0, 1]
    elif op == "gaussian_nll_loss":
        add(draw(r, d, shape)); add(draw(r, d2, bshape(r, shape)))
        scalar = r.random() < 0.25
        var_value = None
        if scalar:
            var_value = r.choice([1.0, 0.5, 0.0, -1.0, 2.0, 1e-9])
        else:
            vs = r.choice([list(shape), list(shape[:-1]), [1] * len(shape), r.choice(SHAPES)])
            if shape and r.random() < 0.3:
                vs = list(shape); vs[r.randrange(len(vs))] = 1
            add(draw(r, d if r.random() < 0.85 else float_dtype(r), vs, "pos"))
        args = {"var": var_value, "full": r.random() < 0.5, "eps": r.choice([1e-6, 0.0, 0.5]), "reduction": red}
        if scalar:
            f = lambda a, t: F.gaussian_nll_loss(a, t, var_value, full=args["full"], eps=args["eps"], reduction=red)
        else:
            f = lambda a, t, v: F.gaussian_nll_loss(a, t, v, full=args["full"], eps=args["eps"], reduction=red)
        diff = [0, 1] if scalar else [0, 1, 2]
    elif op == "glu":
        s = r.choice([[4], [2, 6], [3, 2, 2], [0, 4], [3], [], [2, 0], [5, 2]])
        add(draw(r, d, s))
        args = {"dim": r.randint(-len(s) - 1, max(len(s), 1))}
        f = lambda a: F.glu(a, dim=args["dim"])
        diff = [0]
    elif op in ("hardshrink", "softshrink"):
        add(draw(r, d, shape))
        args = {"lambd": r.choice([0.5, 0.0, 1.0, -0.5, 2.0, math.inf, math.nan, 1e-3])}
        f = lambda a: getattr(F, op)(a, args["lambd"])
        diff = [0]
    elif op == "tanhshrink":
        add(draw(r, d, shape))
        f = F.tanhshrink
        diff = [0]
    elif op == "softmin":
        add(draw(r, d, shape))
        args = {"dim": r.randint(-len(shape) - 1, max(len(shape), 1)),
                "dtype": r.choice([None, None, None, "f32", "f64"])}
        f = lambda a: F.softmin(a, dim=args["dim"], dtype=m.DTYPES[args["dtype"]] if args["dtype"] else None)
        diff = [0]
    elif op == "prelu":
        s = r.choice([[2, 3], [2, 3, 4], [4], [], [0, 3], [3, 0, 2], [1, 1]])
        add(draw(r, d, s))
        c = s[1] if len(s) > 1 else 1
        ws = r.choice([[c], [1], [], [c + 1], [c, 1]])
        add(draw(r, d if r.random() < 0.85 else d2, ws))
        f = F.prelu
        diff = [0, 1]
    elif op in ("nansum", "nanmean"):
        add(draw(r, d, shape))
        nd = len(shape)
        dims = r.choice([None, [0], [-1], [0, -1], [], [nd], [0, 0]])
        args = {"dim": dims, "keepdim": r.random() < 0.4}
        f = lambda a: getattr(torch, op)(a, dim=dims, keepdim=args["keepdim"])
        diff = [0]
    elif op in ("var_mean", "std_mean"):
        add(draw(r, d, shape, "tame" if r.random() < 0.6 else "any"))
        nd = len(shape)
        dims = r.choice([None, [0], [-1], [0, -1], [], [nd]])
        args = {"dim": dims, "correction": r.choice([1.0, 0.0, 2.0, 0.5]), "keepdim": r.random() < 0.4}
        f = lambda a: list(getattr(torch, op)(a, dim=dims, correction=args["correction"], keepdim=args["keepdim"]))
        diff = [0]
    elif op in ("logaddexp", "logaddexp2", "xlogy"):
        add(draw(r, d, shape)); add(draw(r, d2, bshape(r, shape), "pos" if op == "xlogy" and r.random() < 0.5 else "any"))
        f = getattr(torch, op)
        diff = [0, 1]
    elif op == "addcdiv":
        add(draw(r, d, shape)); add(draw(r, d2, bshape(r, shape))); add(draw(r, d if r.random() < 0.8 else float_dtype(r),
                                                                      bshape(r, shape)))
        args = {"value": r.choice([1.0, 0.5, -2.0, 0.0, 1e300, 3.0])}
        f = lambda x, a, b: torch.addcdiv(x, a, b, value=args["value"])
        diff = [0, 1, 2]
    elif op == "movedim":
        s = r.choice([[2, 3, 4], [2, 3], [5], [], [0, 2, 1]])
        add(draw(r, d, s))
        nd = len(s)
        k = r.randint(0, max(nd, 1))
        src = [r.randint(-nd - 1, nd) for _ in range(k)]
        dst = [r.randint(-nd - 1, nd) for _ in range(k if r.random() < 0.9 else k + 1)]
        args = {"source": src, "destination": dst}
        f = lambda a: torch.movedim(a, src, dst)
        diff = [0]
    else:
        raise ValueError(op)
    return ts, args, f, diff


OPS = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss",
       "triplet_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "glu",
       "hardshrink", "softshrink", "tanhshrink", "softmin", "prelu", "nansum", "nanmean", "var_mean", "std_mean",
       "logaddexp", "logaddexp2", "xlogy", "addcdiv", "movedim"]


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/missing_ops_s78.json.gz"
    grad_path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/missing_ops_s78_grad.json.gz"
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7801
    r = random.Random(seed)
    cases, grads = [], []
    for i in range(4600):
        op = OPS[i % len(OPS)]
        ts, args, f, diff = case(r, op)
        c = {"op": op, "inputs": [rec for _, rec in ts],
             "args": {k: fmt(v) if isinstance(v, float) else v for k, v in args.items()}}
        try:
            out = f(*[t for t, _ in ts])
            outs = out if isinstance(out, list) else [out]
            c["results"] = [m.tensor_record(o) for o in outs]
        except Exception as e:  # noqa: BLE001 - PyTorch raises several types
            c["error"] = str(e).split("\n")[0][:200]
        cases.append(c)
        if "results" not in c or any(ts[j][1]["dtype"] not in ("f32", "f64") for j in diff):
            continue
        leaves = [t.detach().clone().requires_grad_(j in diff) for j, (t, _) in enumerate(ts)]
        try:
            out = f(*leaves)
            outs = out if isinstance(out, list) else [out]
            total = sum((o * m.upstream(list(o.shape)).to(o.dtype)).sum() for o in outs)
            total.backward()
        except Exception as e:  # noqa: BLE001
            grads.append(dict(c, grad_error=str(e).split("\n")[0][:200]))
            continue
        g = {}
        for j in diff:
            gr = leaves[j].grad
            g[str(j)] = None if gr is None else [fmt(float(v)) for v in gr.double().flatten().tolist()]
        grads.append(dict(c, grads=g))
    doc = {"generator": "benches/anchors/gen_missing_ops_s78.py", "torch": torch.__version__, "seed": seed,
           "cases": cases}
    write_fixture(tensor_path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), tensor_path))
    doc = {"generator": "benches/anchors/gen_missing_ops_s78.py", "torch": torch.__version__, "seed": seed,
           "cases": grads}
    write_fixture(grad_path, json.dumps(doc, allow_nan=False))
    print("%d gradient cases (%d errors) -> %s" % (len(grads), sum("grad_error" in g for g in grads), grad_path))


if __name__ == "__main__":
    main()
