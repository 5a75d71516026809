#!/usr/bin/env python3
"""PyTorch 2.15's gradients (CPU, f64, one thread) for
crates/strata-autograd/tests/suite/scatter_ops_grad.rs, written to
crates/strata-autograd/tests/data/scatter_ops_grad_s60.json: the loss
`sum(op(x, src) * w)` for session 60's ops (cumprod with zeros, cummax and
cummin with ties, logcumsumexp with -inf, index_add/copy/fill, scatter,
scatter_value, scatter_reduce of every reduction with and without self,
index_put and advanced indexing), with the gradients of x and src.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_scatter_ops_grad_s60.py \\
        crates/strata-autograd/tests/data/scatter_ops_grad_s60.json
"""
import json
import math
import random
import sys

import torch

torch.set_num_threads(1)


def enc(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def flat(t):
    return [enc(v) for v in t.detach().reshape(-1).tolist()]


def T(v, shape):
    return torch.tensor(v, dtype=torch.float64).reshape(shape)


def case(r, op, x, args, src=None, idx=None, fn=None):
    xv = x.clone().requires_grad_(True)
    sv = src.clone().requires_grad_(True) if src is not None else None
    out = fn(xv, sv)
    w = torch.tensor([round(r.uniform(-2, 2), 2) for _ in range(out.numel())],
                     dtype=torch.float64).reshape(out.shape)
    (out * w).sum().backward()
    c = {"op": op, "x": flat(x), "xshape": list(x.shape), "args": args, "w": flat(w),
         "out": flat(out), "gx": flat(xv.grad)}
    if src is not None:
        c["src"] = flat(src)
        c["sshape"] = list(src.shape)
        c["gsrc"] = flat(sv.grad)
    if idx is not None:
        c["index"] = idx.reshape(-1).tolist()
        c["ishape"] = list(idx.shape)
    return c


def main():
    r = random.Random(60)
    cases = []
    # cumprod with zeros (none, one, two per line), along each dim.
    xs = [T([2, 0, 3, 0, 5, 1.5, -2, 0.5, 4, 1, 0, 2, 0.5, 3, -1], [3, 5]),
          T([0.5, 2, -1, 3, 1.5, 0.25], [2, 3]),
          T([0, 0, 1, 2, 0, 3], [6])]
    for x in xs:
        for d in range(-1, x.ndim):
            cases.append(case(r, "cumprod", x, {"dim": d}, fn=lambda a, _s, d=d: a.cumprod(d)))
    for op in ["cummax", "cummin"]:
        x = T([1, 3, 3, 2, 5, 5, -1, 0, 0, 4, -2, 4], [3, 4])
        for d in [0, 1]:
            cases.append(case(r, op, x, {"dim": d},
                              fn=lambda a, _s, d=d, op=op: getattr(a, op)(d)[0]))
    for x in [T([0.5, -1, 2, 0, 1.25, -3], [2, 3]), T([-math.inf, 0.5, -math.inf, 2], [4])]:
        for d in range(x.ndim):
            cases.append(case(r, "logcumsumexp", x, {"dim": d},
                              fn=lambda a, _s, d=d: a.logcumsumexp(d)))
    x = T([r.uniform(-2, 2) for _ in range(12)], [3, 4])
    src = T([r.uniform(-2, 2) for _ in range(8)], [2, 4])
    idx = torch.tensor([2, 2])
    for alpha in [1.0, 2.5]:
        cases.append(case(r, "index_add", x, {"dim": 0, "alpha": alpha}, src, idx,
                          fn=lambda a, s, alpha=alpha: a.index_add(0, idx, s, alpha=alpha)))
    src3 = T([r.uniform(-2, 2) for _ in range(6)], [3, 2])
    idx3 = torch.tensor([3, 0])
    cases.append(case(r, "index_copy", x, {"dim": 1}, src3, idx3,
                      fn=lambda a, s: a.index_copy(1, idx3, s)))
    cases.append(case(r, "index_fill", x, {"dim": 1, "value": 1.5}, None, idx3,
                      fn=lambda a, _s: a.index_fill(1, idx3, 1.5)))
    sidx = torch.tensor([[1, 3], [0, 2], [2, 1]])
    ssrc = T([r.uniform(-2, 2) for _ in range(6)], [3, 2])
    cases.append(case(r, "scatter", x, {"dim": 1}, ssrc, sidx,
                      fn=lambda a, s: a.scatter(1, sidx, s)))
    cases.append(case(r, "scatter_value", x, {"dim": 1, "value": -0.5}, None, sidx,
                      fn=lambda a, _s: a.scatter(1, sidx, -0.5)))
    # scatter_reduce: duplicates, ties and zeros.
    xr = T([1, 2, 0, 4, 3, 3, 1, 0], [2, 4])
    srcr = T([2, 0, 3, 3, 5, 0, 0, 1, 3, 4, 1, 2], [2, 6])
    ridx = torch.tensor([[0, 0, 1, 3, 3, 2], [1, 1, 1, 0, 2, 2]])
    for red in ["sum", "prod", "mean", "amax", "amin"]:
        for inc in [True, False]:
            cases.append(case(r, "scatter_reduce", xr, {"dim": 1, "reduce": red, "include_self": inc},
                              srcr, ridx,
                              fn=lambda a, s, red=red, inc=inc: a.scatter_reduce(1, ridx, s, red,
                                                                                  include_self=inc)))
    # index_put: broadcast values, duplicates with accumulate.
    xp = T([r.uniform(-2, 2) for _ in range(24)], [2, 3, 4])
    i0 = torch.tensor([0, 1, 1])
    i2 = torch.tensor([3, 0, 3])
    vals = T([r.uniform(-2, 2) for _ in range(3)], [3, 1])
    for acc in [True, False]:
        c = case(r, "index_put", xp, {"accumulate": acc}, vals, None,
                 fn=lambda a, v, acc=acc: torch.ops.aten.index_put(a, [i0, None, i2], v, acc))
        c["indices"] = [i0.tolist(), None, i2.tolist()]
        cases.append(c)
    c = case(r, "index_tensors", xp, {}, None, None,
             fn=lambda a, _s: torch.ops.aten.index(a, [None, torch.tensor([2, 0, 2])]))
    c["indices"] = [None, [2, 0, 2]]
    cases.append(c)
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
    print(len(cases), "cases")


if __name__ == "__main__":
    main()
