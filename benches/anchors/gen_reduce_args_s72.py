#!/usr/bin/env python3
"""Session 72: PyTorch 2.15's CPU answers (one thread) for reductions, scans,
sorts and selections called with hostile dims and counts, written to
crates/strata-tensor/tests/data/reduce_args_s72.json.gz
(crates/strata-tensor/tests/suite/reduce_args_s72.rs).

The ops: topk, kthvalue, cumsum, cumprod, sort, argsort, argmax, logsumexp,
var, count_nonzero, vector_norm, sum, mean, max/median/nanmedian along a
dim, softmax, log_softmax, all along a dim, cummax, logcumsumexp,
index_select and gather, on f32 tensors of 0 to 3 dims (empty ones
included) holding small integers with ties. Each dim, count or index is,
seven times in twenty, one of HUGE (near ±2^31, ±2^32, ±2^62 and ±2^63),
else a small valid or nearly valid one; dim lists may be empty. Each case
keeps PyTorch's results (shapes and values) or the fact that it raised.

Left out: results over MAX_RESULT elements, errors about allocating, and
PyTorch's own limit on integer lists ("SymIntArrayRef"); a negative k for
topk and kthvalue (strata's k is unsigned, so it cannot be asked).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_reduce_args_s72.py \\
        crates/strata-tensor/tests/data/reduce_args_s72.json.gz
"""
import math
import random
import sys

import torch

from fixture_io import LeftOut, outcome, write_cases

torch.set_num_threads(1)

MAX_RESULT = 4096
HUGE = [-(2 ** 63), -(2 ** 63) + 1, -(2 ** 62), -(2 ** 32), -(2 ** 31) - 1, 2 ** 31, 2 ** 32,
        2 ** 62, 2 ** 63 - 1]
SHAPES = [[], [0], [3], [4], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [2, 1, 3]]
ONE_DIM = ["cumsum", "cumprod", "sort", "argsort", "argmax", "max_dim", "median_dim",
           "nanmedian_dim", "softmax", "log_softmax", "all_dim", "cummax", "logcumsumexp"]
DIM_LIST = ["logsumexp", "var", "count_nonzero", "vector_norm", "sum", "mean"]
OPS = ONE_DIM + DIM_LIST + ["topk", "kthvalue", "index_select", "gather"]


Skip = LeftOut


def values(shape):
    n = math.prod(shape)
    return torch.tensor([float((k * 7) % 5 - 2) for k in range(n)]).reshape(shape)


def draw(r, nd):
    def iv(small):
        return r.choice(HUGE) if r.random() < 0.35 else r.choice(small)

    dims = list(range(-nd - 1, nd + 1)) or [0, -1, 1]
    op = r.choice(OPS)
    if op in ("topk", "kthvalue"):
        return op, [iv([0, 1, 2, 3, 4, 5]), iv(dims)]
    if op in ("index_select", "gather"):
        return op, [iv(dims), [iv([-2, -1, 0, 1, 2, 3]) for _ in range(r.randint(0, 3))]]
    if op in DIM_LIST:
        return op, [[iv(dims) for _ in range(r.randint(0, 2))]]
    return op, [iv(dims)]


def index_shape(nd, n):
    """gather's index: n entries along the first dim, 1 elsewhere."""
    if nd == 0:
        return [] if n == 1 else [n]
    return [n] + [1] * (nd - 1)


def run(op, x, a):
    nd = x.dim()
    if op in ("topk", "kthvalue"):
        return list(getattr(torch, op)(x, a[0], a[1]))
    if op == "sort":
        return list(torch.sort(x, dim=a[0], stable=True))
    if op == "argsort":
        return torch.argsort(x, dim=a[0], stable=True)
    if op in ("max_dim", "median_dim", "nanmedian_dim"):
        return list(getattr(torch, op[:-4])(x, a[0]))
    if op == "all_dim":
        return torch.all(x, a[0])
    if op == "cummax":
        return list(torch.cummax(x, a[0]))
    if op in ("cumsum", "cumprod", "argmax", "softmax", "log_softmax", "logcumsumexp"):
        return getattr(torch, op)(x, a[0])
    if op == "var":
        return torch.var(x, a[0] or None)
    if op == "vector_norm":
        return torch.linalg.vector_norm(x, 2, a[0] or None)
    if op in ("logsumexp", "count_nonzero", "sum", "mean"):
        return getattr(torch, op)(x, a[0])
    idx = torch.tensor(a[1], dtype=torch.int64)
    if op == "index_select":
        return torch.index_select(x, a[0], idx)
    if nd == 0 and len(a[1]) > 1:
        raise Skip  # no index shape for it
    return torch.gather(x, a[0], idx.reshape(index_shape(nd, len(a[1]))))


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/reduce_args_s72.json.gz"
    r = random.Random(7202)
    cases, left_out = [], 0
    for _ in range(20000):
        shape = r.choice(SHAPES)
        x = values(shape)
        op, a = draw(r, len(shape))
        try:
            if op in ("topk", "kthvalue") and a[0] < 0:
                raise Skip
            c = outcome(lambda: run(op, x, a), MAX_RESULT, skip_errors=("allocate", "SymInt"))
        except Skip:
            left_out += 1
            continue
        cases.append({"op": op, "shape": shape, "args": a, **c})
    write_cases(out_path, "benches/anchors/gen_reduce_args_s72.py", cases, left_out)


if __name__ == "__main__":
    main()
