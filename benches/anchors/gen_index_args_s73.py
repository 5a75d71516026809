#!/usr/bin/env python3
"""Session 73: PyTorch 2.15's CPU answers (one thread) for indexing, scatter,
joining, padding and layout ops called with hostile integer arguments and
index tensors, written to crates/strata-tensor/tests/data/index_args_s73.json.gz
(crates/strata-tensor/tests/suite/index_args_s73.rs).

The ops: scatter, scatter (a value), scatter_add, scatter_reduce (each
reduction, with and without self), index_add, index_copy, index_fill,
index_put (with and without accumulate, `None` entries included),
embedding (with and without padding_idx), nll_loss and cross_entropy
(targets and ignore_index), cat, stack, split into a list of sizes, unbind,
pad (constant, reflect, replicate, circular), repeat_interleave (a count or
a tensor of counts, along a dim or flattened), expand, reshape, view,
permute and as_strided, on f32 tensors of 0 to 3 dims (empty ones
included) holding small integers. Each integer argument and each index is,
now and then, one of HUGE (near ±2^31, ±2^32, ±2^62 and ±2^63), else a
small valid or nearly valid one; index tensors' shapes are drawn near the
shapes the op wants, and sometimes off by a dim. Each case keeps
PyTorch's results (shapes and values) or the fact that it raised.

Left out (the test could not agree with them on purpose):
- results over MAX_RESULT elements, and errors about allocating or
  overflowing (strata refuses such sizes with its own errors);
- PyTorch's internal limit on integer lists ("SymIntArrayRef expected to
  contain only concrete integers");
- repeat_interleave with a negative count given as an int (strata's count is
  unsigned, so it cannot be asked); as_strided with a size or stride that
  makes PyTorch's int64 extent arithmetic wrap (conformance/README.md,
  "Known differences: PyTorch's int64 size arithmetic that wraps");
- scatter, index_copy and index_put (without accumulate) that write one
  place twice: PyTorch documents the result as undefined;
- circular pads that wrap around the elements left after a negative pad's
  crop more than once: PyTorch copies them from elements of its
  `torch.empty` result it has not written yet (strata refuses them).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_index_args_s73.py \\
        crates/strata-tensor/tests/data/index_args_s73.json.gz
(under a few GB of address space, e.g. `ulimit -v 4000000`, so that a huge
result fails to allocate instead of filling the machine's memory).
"""
import math
import random
import sys

import torch
import torch.nn.functional as F

from fixture_io import LeftOut, outcome, write_cases

torch.set_num_threads(1)

MAX_RESULT = 4096
HUGE = [-(2 ** 63), -(2 ** 63) + 1, -(2 ** 62), -(2 ** 32), -(2 ** 31) - 1, 2 ** 31, 2 ** 32,
        2 ** 62, 2 ** 63 - 1]
SHAPES = [[], [0], [3], [4], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [2, 1, 3]]
SCATTERS = ["scatter", "scatter_value", "scatter_add", "scatter_reduce"]
INDEXED = ["index_add", "index_copy", "index_fill"]
LAYOUT = ["expand", "reshape", "view", "permute", "as_strided"]
OPS = (SCATTERS * 2 + INDEXED * 2 + ["index_put"] * 2 + ["embedding", "nll_loss",
       "cross_entropy", "cat", "stack", "split_sizes", "unbind", "pad", "repeat_interleave"]
       + LAYOUT)
REDUCES = ["sum", "prod", "mean", "amax", "amin"]
PAD_MODES = ["constant", "reflect", "replicate", "circular"]


Skip = LeftOut


def values(shape, start=0):
    n = math.prod(shape)
    return torch.tensor([float(((k + start) * 7) % 5 - 2) for k in range(n)]).reshape(shape)


def tensor_arg(shape, data):
    return {"shape": shape, "data": data}


def as_index(a):
    return torch.tensor(a["data"], dtype=torch.int64).reshape(a["shape"])


def as_values(a):
    return values(a["shape"], a["data"])


class Draw:
    def __init__(self, r):
        self.r = r
        self.hostile = r.random() < 0.5

    def iv(self, small, p=0.35):
        return self.r.choice(HUGE) if self.r.random() < p else self.r.choice(small)

    def dim(self, nd):
        """A dim of a tensor of `nd` dims: mostly a valid one."""
        valid = list(range(-nd, nd)) or [0, -1]
        if self.r.random() < 0.8:
            return self.r.choice(valid)
        return self.iv(list(range(-nd - 2, nd + 2)), 0.5)

    def index(self, shape, size, negative=True):
        """An index tensor of `shape` into a dim of `size` (mostly in range;
        negative indices too where `negative`)."""
        n = math.prod(shape)
        valid = list(range(-size if negative else 0, size)) or [0]
        near = list(range(-size - 1, size + 1)) if size else [-1, 0, 1]
        p = 0.1 if self.hostile else 0.0
        data = [self.r.choice(valid) if self.r.random() < 0.94 else self.iv(near, p)
                for _ in range(n)]
        if self.hostile and n and self.r.random() < 0.3:
            data[self.r.randrange(n)] = self.r.choice(HUGE)
        return tensor_arg(shape, data)

    def near_shape(self, shape, dim=None, grow=False):
        """A shape like `shape`: each size kept, shrunk or (sometimes) grown;
        along `dim` anything from 0 to a few; now and then a dim more or less."""
        r = self.r
        s = []
        for d, n in enumerate(shape):
            if d == dim:
                s.append(r.randint(0, 4))
            else:
                s.append(r.choice([n, n, n, max(n - 1, 0), n + 1] if grow else
                                  [n, n, n, max(n - 1, 0), r.randint(0, n)]))
        if r.random() < 0.08:
            s = s[:-1] if s and r.random() < 0.5 else s + [r.randint(0, 2)]
        return s


def draw(r, shape):
    d = Draw(r)
    nd = len(shape)
    dims = list(range(-nd - 1, nd + 1)) or [0, -1, 1]
    op = r.choice(OPS)
    dim = d.dim(nd)
    # The dim's size (for indices), where the dim is valid.
    if nd == 0:
        size = 1 if dim in (0, -1) else 0
    else:
        size = shape[dim] if -nd <= dim < nd else 0
    if op in SCATTERS:
        ishape = d.near_shape(shape, None if nd == 0 else dim % nd if -nd <= dim < nd else None)
        idx = d.index(ishape, size)
        src = tensor_arg(d.near_shape(ishape, grow=True), r.randint(0, 9))
        if op == "scatter_value":
            return op, [dim, idx, r.choice([-1.5, 0.0, 7.0])]
        if op == "scatter_reduce":
            return op, [dim, idx, src, r.choice(REDUCES), r.random() < 0.5]
        return op, [dim, idx, src]
    if op in INDEXED:
        n = r.randint(0, 4)
        ishape = [n] if r.random() < 0.9 else r.choice([[], [n, 1], [1, n]])
        idx = d.index(ishape, size)
        sshape = list(shape)
        if -nd <= dim < nd:
            sshape[dim] = n
        if r.random() < 0.15:
            sshape = d.near_shape(sshape)
        if op == "index_fill":
            return op, [dim, idx, r.choice([-1.5, 0.0, 7.0])]
        if op == "index_add":
            return op, [dim, idx, tensor_arg(sshape, r.randint(0, 9)), r.choice([1.0, -2.0, 0.5])]
        return op, [dim, idx, tensor_arg(sshape, r.randint(0, 9))]
    if op == "index_put":
        k = r.randint(1, max(nd, 1) + (1 if r.random() < 0.1 else 0))
        n = r.randint(0, 3)
        ishape = r.choice([[n], [n], [1, n], [n, 1], []])
        ids = []
        for j in range(k):
            if j < k - 1 and r.random() < 0.25:
                ids.append(None)
            else:
                ids.append(d.index(ishape if r.random() < 0.9 else d.near_shape(ishape),
                                   shape[j] if j < nd else 1))
        if all(i is None for i in ids):
            ids[-1] = d.index(ishape, shape[k - 1] if k - 1 < nd else 1)
        vshape = r.choice([[], [1], [n], ishape])
        return op, [ids, tensor_arg(vshape, r.randint(0, 9)), r.random() < 0.5]
    if op == "embedding":
        n = shape[0] if nd else 0
        ishape = r.choice([[], [2], [3], [2, 2], [0]])
        pad = r.choice([None, None, d.iv(list(range(-n - 1, n + 1)) or [0, -1])])
        return op, [d.index(ishape, n), pad]
    if op in ("nll_loss", "cross_entropy"):
        c = shape[1] if nd >= 2 else (shape[0] if nd == 1 else 0)
        tshape = ([shape[0]] + shape[2:]) if nd >= 2 else []
        if r.random() < 0.1:
            tshape = d.near_shape(tshape)
        ignore = r.choice([-100, -100, d.iv(list(range(-2, c + 2)) or [0])])
        red = r.choice(["mean", "sum", "none"])
        tgt = d.index(tshape, c, negative=False)
        if op == "cross_entropy":
            return op, [tgt, ignore, red, r.choice([0.0, 0.0, 0.1])]
        return op, [tgt, ignore, red]
    if op in ("cat", "stack"):
        shapes = [shape] + [d.near_shape(shape, None if op == "stack" or not (-nd <= dim < nd)
                                         else dim % nd)
                            for _ in range(r.randint(0, 2))]
        if op == "cat" and r.random() < 0.15:
            shapes.insert(r.randrange(len(shapes) + 1), [0])
        return op, [shapes, dim]
    if op == "split_sizes":
        tot = size
        m = r.randint(0, 3)
        sizes = [r.randint(0, tot) for _ in range(m)]
        if m and r.random() < 0.6:
            sizes[-1] = tot - sum(sizes[:-1])
        sizes = [d.iv([s], 0.15 if d.hostile else 0.0) for s in sizes]
        return op, [sizes, dim]
    if op == "unbind":
        return op, [dim]
    if op == "pad":
        m = r.choice([0, 1, 2, 2, 4, 4, 6, 8])
        small = list(range(-4, 5))
        return op, [[d.iv(small, 0.1 if d.hostile else 0.0) for _ in range(m)],
                    r.choice(PAD_MODES), r.choice([0.0, -1.5])]
    if op == "repeat_interleave":
        along = r.choice([None, dim])
        if r.random() < 0.5:
            return op, [d.iv([0, 1, 2, 3], 0.15 if d.hostile else 0.0), along]
        n = (math.prod(shape) if along is None else size)
        n = r.choice([n, n, n, 1, n + 1, max(n - 1, 0)])
        reps = [d.iv([0, 1, 2, 3, -1], 0.05 if d.hostile else 0.0) for _ in range(n)]
        return op, [tensor_arg(r.choice([[n], [n], [n, 1]]) if n != 1 else
                               r.choice([[1], []]), reps), along]
    small = [-2, -1, 0, 1, 2, 3, 4, 6]
    if op in ("expand", "reshape", "view"):
        m = r.randint(0, 4)
        sizes = [d.iv(small, 0.12 if d.hostile else 0.0) for _ in range(m)]
        if r.random() < 0.5 and nd:
            sizes = list(shape)
            for _ in range(r.randint(0, 2)):
                if sizes and r.random() < 0.5:
                    sizes[r.randrange(len(sizes))] = d.iv(small, 0.2)
                else:
                    sizes.insert(0, r.choice([1, 2, -1]))
        return op, [sizes]
    if op == "permute":
        p = list(range(nd))
        r.shuffle(p)
        p = [x - nd if r.random() < 0.3 else x for x in p]
        if r.random() < 0.3 and p:
            p[r.randrange(len(p))] = d.iv(dims, 0.3)
        if r.random() < 0.1:
            p = p[:-1] if p and r.random() < 0.5 else p + [r.choice(dims)]
        return op, [p]
    # as_strided
    m = r.randint(0, 3)
    size = [d.iv([0, 1, 2, 3], 0.08 if d.hostile else 0.0) for _ in range(m)]
    stride = [d.iv([-1, 0, 1, 2, 3], 0.08 if d.hostile else 0.0) for _ in range(m)]
    if r.random() < 0.1:
        stride = stride[:-1] if stride and r.random() < 0.5 else stride + [1]
    offset = r.choice([None, 0, 1, d.iv([0, 2, 5, -1], 0.2)])
    return op, [size, stride, offset]


def run(op, x, a):
    if op == "scatter":
        return x.scatter(a[0], as_index(a[1]), as_values(a[2]))
    if op == "scatter_value":
        return x.scatter(a[0], as_index(a[1]), a[2])
    if op == "scatter_add":
        return x.scatter_add(a[0], as_index(a[1]), as_values(a[2]))
    if op == "scatter_reduce":
        return x.scatter_reduce(a[0], as_index(a[1]), as_values(a[2]), a[3], include_self=a[4])
    if op == "index_add":
        return x.index_add(a[0], as_index(a[1]), as_values(a[2]), alpha=a[3])
    if op == "index_copy":
        return x.index_copy(a[0], as_index(a[1]), as_values(a[2]))
    if op == "index_fill":
        return x.index_fill(a[0], as_index(a[1]), a[2])
    if op == "index_put":
        ids = tuple(None if i is None else as_index(i) for i in a[0])
        return torch.ops.aten.index_put.default(x, ids, as_values(a[1]), a[2])
    if op == "embedding":
        return F.embedding(as_index(a[0]), x, padding_idx=a[1])
    if op == "nll_loss":
        return F.nll_loss(x, as_index(a[0]), ignore_index=a[1], reduction=a[2])
    if op == "cross_entropy":
        return F.cross_entropy(x, as_index(a[0]), ignore_index=a[1], reduction=a[2],
                               label_smoothing=a[3])
    if op in ("cat", "stack"):
        ts = [values(s, k) for k, s in enumerate(a[0])]
        return getattr(torch, op)(ts, a[1])
    if op == "split_sizes":
        return list(torch.split(x, a[0], a[1]))
    if op == "unbind":
        return list(torch.unbind(x, a[0]))
    if op == "pad":
        if a[1] == "constant":
            return F.pad(x, a[0], mode="constant", value=a[2])
        return F.pad(x, a[0], mode=a[1])
    if op == "repeat_interleave":
        reps = a[0] if isinstance(a[0], int) else as_index(a[0])
        return torch.repeat_interleave(x, reps, dim=a[1])
    if op == "expand":
        return x.expand(a[0])
    if op == "reshape":
        return x.reshape(a[0])
    if op == "view":
        return x.view(a[0])
    if op == "permute":
        return x.permute(a[0])
    return torch.as_strided(x, a[0], a[1], a[2])


def writes_twice(op, x, a):
    """Whether the scatter, index_copy or index_put writes one place twice."""
    if op in ("scatter", "scatter_value"):
        try:
            idx = as_index(a[1])
            nd = x.dim()
            if nd == 0:
                # A 0-d self has one place: every index entry writes it.
                return idx.numel() > 1
            if idx.dim() != nd:
                return False
            dim = a[0] % nd
            seen = set()
            for pos in torch.cartesian_prod(*[torch.arange(n) for n in idx.shape]).reshape(
                    -1, nd).tolist() if idx.numel() else []:
                p = list(pos)
                p[dim] = int(idx[tuple(pos)]) % max(x.shape[dim], 1)
                if tuple(p) in seen:
                    return True
                seen.add(tuple(p))
        except Exception:  # noqa: BLE001 - an invalid call; PyTorch reports it
            return False
        return False
    if op == "index_copy":
        v = a[1]["data"]
        n = x.shape[a[0]] if x.dim() and -x.dim() <= a[0] < x.dim() else 1
        return len({i % n for i in v}) < len(v) if n else False
    if op == "index_put" and not a[2]:
        try:
            ids = [None if i is None else as_index(i) for i in a[0]]
            probe = torch.arange(x.numel()).reshape(x.shape)
            got = torch.ops.aten.index.Tensor(probe, ids)
            return got.numel() != len(set(got.flatten().tolist()))
        except Exception:  # noqa: BLE001
            return False
    return False


def reads_unwritten(x, a):
    """Whether a circular pad copies elements PyTorch has not written."""
    pads = a[0]
    for i in range(len(pads) // 2):
        n = x.shape[x.dim() - 1 - i]
        left, right = pads[2 * i], pads[2 * i + 1]
        kept = n + min(left, 0) + min(right, 0)
        if left > kept or right > kept:
            return True
    return False


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/index_args_s73.json.gz"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    r = random.Random(7301)
    cases, left_out = [], 0
    for _ in range(count):
        shape = r.choice(SHAPES)
        op, a = draw(r, shape)
        if op == "embedding" and len(shape) != 2 and r.random() < 0.85:
            shape = r.choice([s for s in SHAPES if len(s) == 2])
            op, a = draw(r, shape)
            while op != "embedding":
                op, a = draw(r, shape)
        x = values(shape)
        def left_out_result(ys):
            return writes_twice(op, x, a) or (op == "pad" and a[1] == "circular"
                                              and reads_unwritten(x, a))
        try:
            if op == "repeat_interleave" and isinstance(a[0], int) and a[0] < 0:
                raise Skip
            c = outcome(lambda: run(op, x, a), MAX_RESULT,
                        skip_errors=("allocate", "SymInt", "overflow"), left_out=left_out_result)
        except Skip:
            left_out += 1
            continue
        cases.append({"op": op, "shape": shape, "args": a, **c})
    write_cases(out_path, "benches/anchors/gen_index_args_s73.py", cases, left_out)


if __name__ == "__main__":
    main()
