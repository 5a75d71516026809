#!/usr/bin/env python3
"""Session 73: PyTorch 2.15's gradients (CPU, one thread) for the calls of the
hostile-argument fixtures that succeed, written to
crates/strata-autograd/tests/data/grad_args_s73.json.gz
(crates/strata-autograd/tests/suite/grad_args_s73.rs).

The fixtures view_args_s72, reduce_args_s72, index_args_s73,
contract_args_s73 and nn_args_s73 (crates/strata-tensor/tests/data/) hold calls with hostile
dims, counts, indices and shapes, and PyTorch's forward answers; strata's
tensors agree with them. Here the calls that succeed are run again with
their float inputs as leaves that require grad (the same values as there),
and backward is called with upstream gradient `u_k` on output `k`: element
`j` of it is `(((j + 3 k) * 3) mod 7 - 3) / 2`. Only the values output of
an op that also returns indices gets one (topk, kthvalue, sort, max, median,
nanmedian, cummax). Recorded: each leaf's `.grad` (null where PyTorch left
it None), in the order the test builds the leaves: `x`, then the other
float operands in the fixture's order (nn_args_s73: see `run_nn`).

Left out: ops strata-autograd does not differentiate or has no `Var` method
for (argsort, argmax, count_nonzero, all along a dim, as_strided, inner,
lerp, masked_scatter); calls with more than MAX_CASES of an op
(the first ones are kept); and calls whose backward PyTorch itself fails
(216 of them, listed when the script runs): index_add and index_copy with
out-of-range indices the forward never checked (an empty self or source),
whose backward's index_select refuses them; roll, repeat and tile with
counts near 2^63 on empty tensors, whose backward's shapes overflow.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_grad_args_s73.py \\
        crates/strata-autograd/tests/data/grad_args_s73.json.gz
"""
import gzip
import json
import math
import os
import sys

import torch

import gen_contract_args_s73 as C
import gen_index_args_s73 as I
import gen_nn_args_s73 as N
import gen_reduce_args_s72 as R
import gen_view_args_s72 as V
from fixture_io import fmt, write_fixture

torch.set_num_threads(1)

MAX_CASES = 150
DATA = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "strata-tensor", "tests",
                    "data")
SKIP = {"argsort", "argmax", "count_nonzero", "all_dim", "as_strided", "inner", "lerp",
        "masked_scatter"}
INDEXED = {"topk", "kthvalue", "sort", "max_dim", "median_dim", "nanmedian_dim", "cummax"}


def upstream(shape, k):
    n = math.prod(shape)
    return torch.tensor([(((j + 3 * k) * 3) % 7 - 3) / 2 for j in range(n)]).reshape(shape)


class Leaves:
    """Float operands made by the generators' `values`, recorded as leaves."""

    def __init__(self):
        self.made = []

    def wrap(self, f):
        def g(*args, **kw):
            t = f(*args, **kw).clone().requires_grad_(True)
            self.made.append(t)
            return t
        return g


def run_case(name, c):
    op, a = c["op"], c["args"]
    leaves = Leaves()
    if name == "view_args_s72":
        n = math.prod(c["shape"])
        x = torch.arange(n, dtype=torch.float32).reshape(c["shape"]).requires_grad_(True)
        ys = V.run(op, x, a)
        first = [x]
    elif name == "reduce_args_s72":
        x = R.values(c["shape"]).requires_grad_(True)
        ys = R.run(op, x, a)
        first = [x]
    elif name == "index_args_s73":
        x = I.values(c["shape"]).requires_grad_(True)
        saved = I.values
        I.values = leaves.wrap(saved)
        try:
            ys = I.run(op, x, a)
        finally:
            I.values = saved
        first = [] if op in ("cat", "stack") else [x]
    elif name == "nn_args_s73":
        return run_nn(c)
    else:
        saved = C.values
        C.values = leaves.wrap(saved)
        try:
            ys = C.run(op, a)
        finally:
            C.values = saved
        first = []
    ys = ys if isinstance(ys, list) else [ys]
    if op in INDEXED:
        ys = ys[:1]
    outs = [(y, upstream(list(y.shape), k)) for k, y in enumerate(ys) if y.requires_grad]
    if outs:
        torch.autograd.backward([y for y, _ in outs], [u for _, u in outs])
    return [None if t.grad is None else {"shape": list(t.grad.shape),
                                         "data": [fmt(float(v)) for v in t.grad.double().flatten()]}
            for t in first + leaves.made]


def num(v):
    """A float argument as the fixtures store it ("nan", "inf", "-inf" or a number)."""
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v] if isinstance(v, str) \
        else float(v)


def leaf(t):
    return t.clone().requires_grad_(True)


def run_nn(c):
    """nn_args_s73's call: x, then the other float operands strata-autograd
    differentiates (layer_norm's weight and bias, mse_loss's target, where's
    operands, clamp's tensor bounds) as leaves; targets, class weights and
    masks are constants."""
    op, a = c["op"], c["args"]
    x = leaf(N.values(c["shape"]))
    leaves = [x]
    if op == "layer_norm":
        w = None if a[1] is None else leaf(N.values(a[1], 1))
        b = None if a[2] is None else leaf(N.values(a[2], 2))
        leaves += [t for t in (w, b) if t is not None]
        y = N.F.layer_norm(x, a[0], w, b, num(a[3]))
    elif op == "cross_entropy_probs":
        t = N.values(a[0], 3).abs()
        w = None if a[1] is None else N.values(a[1], 1).abs()
        y = N.F.cross_entropy(x, t, weight=w, label_smoothing=num(a[2]), reduction=a[3])
    elif op == "nll_loss_weight":
        t = torch.tensor(a[1], dtype=torch.int64).reshape(a[0])
        y = N.F.nll_loss(x, t, weight=N.values(a[2], 1).abs(), ignore_index=a[3],
                         reduction=a[4])
    elif op == "mse_loss":
        t = leaf(N.values(a[0], 1))
        leaves.append(t)
        w = None if a[1] is None else N.values(a[1], 2).abs()
        y = N.F.mse_loss(x, t, reduction=a[2]) if w is None else \
            N.F.mse_loss(x, t, reduction=a[2], weight=w)
    elif op == "masked_fill":
        y = x.masked_fill(N.mask(a[0]), num(a[1]))
    elif op == "masked_select":
        y = x.masked_select(N.mask(a[0]))
    elif op == "where":
        yv = leaf(N.values(a[1], 1))
        other = leaf(N.values(a[2], 2)) if isinstance(a[2], list) else \
            torch.tensor(num(a[2]), requires_grad=True)
        leaves = [yv, other]
        y = torch.where(N.mask(a[0]), yv, other)
    elif op == "clamp":
        lo = None if a[0] is None else num(a[0])
        hi = None if a[1] is None else num(a[1])
        y = torch.clamp(x, lo, hi)
    elif op == "clamp_tensor":
        lo = None if a[0] is None else leaf(N.values(a[0], 1))
        hi = None if a[1] is None else leaf(N.values(a[1], 2))
        leaves += [t for t in (lo, hi) if t is not None]
        y = torch.clamp(x, lo, hi)
    else:  # dropout where it is not random
        y = N.F.dropout(x, num(a[0]), a[1])
    if y.requires_grad:
        torch.autograd.backward([y], [upstream(list(y.shape), 0)])
    return [None if t.grad is None else {"shape": list(t.grad.shape),
                                         "data": [fmt(float(v)) for v in t.grad.double().flatten()]}
            for t in leaves]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/grad_args_s73.json.gz"
    cases, failed = [], []
    for name in ("view_args_s72", "reduce_args_s72", "index_args_s73", "contract_args_s73",
                 "nn_args_s73"):
        with gzip.open(os.path.join(DATA, name + ".json.gz")) as f:
            doc = json.load(f)
        per_op = {}
        for c in doc["cases"]:
            op = c["op"]
            if "error" in c or op in SKIP or per_op.get(op, 0) >= MAX_CASES:
                continue
            per_op[op] = per_op.get(op, 0) + 1
            try:
                grads = run_case(name, c)
            except RuntimeError as e:
                # PyTorch's own backward fails where its forward did not.
                failed.append((name, op, c.get("shape"), c["args"], str(e).split("\n")[0][:120]))
                continue
            cases.append({"fixture": name, "op": op, "shape": c.get("shape"), "args": c["args"],
                          "grads": grads})
    doc = {"generator": "benches/anchors/gen_grad_args_s73.py", "torch": torch.__version__,
           "cases": cases}
    write_fixture(out_path, json.dumps(doc, allow_nan=False))
    print("%d cases -> %s; PyTorch's backward failed on %d:" % (len(cases), out_path, len(failed)))
    for f in failed:
        print("  ", *f)


if __name__ == "__main__":
    main()
