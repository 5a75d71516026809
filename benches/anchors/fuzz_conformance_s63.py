#!/usr/bin/env python3
"""Session-63 family: hostile integer arguments (group `fuzz_ops`, split
`fuzz`), replayed unchanged by crates/strata-tensor/tests/conformance.rs
(`project_conformance`).

The earlier generators put extreme integers in tensors' data; their dims,
indices, sizes, steps and counts stay small. Here one integer argument of
a step (a dim, an index, a start, end, length or step, a size or stride of
a shape, a split size, a chunk count, a diagonal, an ignore_index or a
padding_idx, layer_norm's normalized_shape, scatter_add's dim) is drawn from the values where arithmetic on sizes wraps or
saturates (±2^63, ±2^62, ±2^32, ±2^31, 2^53 + 1, ...), sometimes two of
them, on small operands of every dtype and layout. PyTorch decides: the
step succeeds (kept only when its result holds at most 4096 elements, so
a huge `expand` or a size-0 tensor with a huge dim is kept, a huge
allocation never) or fails with an error whose class FORMAT.md section 6
names (else the draft is left out). A process that crashes, a wrapped size
or a panic instead of a typed error is what these cases catch.

Left out as well: PyTorch's answers that come from int64 size arithmetic
that wraps (an `arange`, `chunk` or `slice` whose exact size strata
computes; conformance/README.md, "Known differences: PyTorch's int64 size
arithmetic that wraps"), negative sizes PyTorch lets through beside a size
0 (and its bounds error before a negative as_strided size of stride 0),
views of an empty tensor whose sizes pass i64, `chunk` of a size-0 dim
into more than 4096 pieces (PyTorch makes them all), and sizes PyTorch's
argument parser refuses as heap SymInts.

Usage (PyTorch on the CPU, one thread):
    OMP_NUM_THREADS=1 python3 benches/anchors/fuzz_conformance_s63.py \\
        [--seed 6300] [--count 1000] [--out /tmp/fuzz_s63_6300.json]
"""

import argparse
import random

import torch

import fuzz_conformance_s59 as s59
from fuzz_conformance_ops import DTYPES, FLOATS, Skip, rshape

S63_SEED = 6300
MAX_RESULT = 4096

HUGE = [2 ** 63 - 1, -(2 ** 63), 2 ** 63 - 2, -(2 ** 63) + 1, 2 ** 62, -(2 ** 62),
        2 ** 62 + 1, 2 ** 32, -(2 ** 32), 2 ** 32 + 1, 2 ** 31, -(2 ** 31) - 1,
        2 ** 31 - 1, -(2 ** 31), 2 ** 53 + 1, -(2 ** 53) - 1, 2 ** 40]


def hostile(r, small):
    """An extreme integer, or now and then the small valid one."""
    return r.choice(HUGE) if r.random() < 0.85 else small


def guard(c, out):
    """Leaves out a step whose result is too large to write down."""
    outs = out if isinstance(out, list) else [out]
    for o in outs:
        if o is not None and o in c.env and c.env[o].numel() > MAX_RESULT:
            raise Skip("result too large to store")
        if o is not None and o in c.env and any(n < 0 for n in c.env[o].shape):
            # PyTorch lets a negative size through beside a size 0
            # (expand([0]) to [-2, 0], as_strided [0, -1]): a shape no
            # tensor can have, left out
            raise Skip("PyTorch gave a negative size")
    return out


def step(c, op, args, out=None):
    """A step whose outcome PyTorch decides, its result guarded."""
    return guard(c, c.step(op, args, out=out, error="?"))


def operand(c, nd=None, dt=None, lo=1):
    r = c.rng
    dt = dt or r.choice(DTYPES)
    nd = r.randrange(0, 4) if nd is None else nd
    shape = rshape(r, nd, lo=lo, hi=4, zero_p=0.1)
    return c.operand(shape, dt), shape, dt


def fam_dim_args(c):
    """Ops whose dim argument is extreme."""
    r = c.rng
    x, shape, dt = operand(c)
    nd = len(shape)
    d = hostile(r, r.randrange(-nd - 1, nd + 1) if nd else 0)
    op = r.choice(["transpose", "select", "narrow", "unsqueeze", "flatten", "sum", "mean",
                   "max", "argmax", "argmin", "softmax", "log_softmax", "logsumexp", "var",
                   "cumsum", "squeeze", "stack", "cat", "split", "chunk", "index_select",
                   "gather", "permute", "slice"])
    if op == "transpose":
        args = [x, d, 0] if r.random() < 0.5 else [x, 0, d]
    elif op == "select":
        args = [x, d, 0]
    elif op == "narrow":
        args = [x, d, 0, 1]
    elif op == "slice":
        args = [x, d, 0, 1, 1]
    elif op == "unsqueeze":
        args = [x, d]
    elif op == "flatten":
        args = [x, d, -1] if r.random() < 0.5 else [x, 0, d]
    elif op in ("sum", "mean"):
        if op == "mean" and dt not in FLOATS:
            raise Skip("mean of an integer")
        args = [x, [d], r.random() < 0.5]
    elif op in ("max", "argmax", "argmin"):
        args = [x, d, r.random() < 0.5]
        if op == "max":
            return step(c, op, args, out=[c.name("v"), c.name("i")])
    elif op in ("softmax", "log_softmax", "cumsum"):
        args = [x, d]
    elif op in ("logsumexp", "var"):
        args = [x, [d], None, True] if op == "var" else [x, [d], r.random() < 0.5]
    elif op == "squeeze":
        args = [x, d if r.random() < 0.5 else [0, d]]
    elif op == "permute":
        perm = list(range(nd))
        if not perm:
            perm = [d]
        else:
            perm[r.randrange(nd)] = d
        args = [x, perm]
    elif op in ("stack", "cat"):
        y = c.operand(shape, dt)
        args = [[x, y], d]
    elif op == "split":
        args = [x, 1, d]
    elif op == "chunk":
        args = [x, 2, d]
    else:  # index_select / gather
        ishape = [1] if op == "index_select" or nd == 0 else [1] * nd
        idx = c.input(ishape, "i64", [0])
        args = [x, d, idx]
    return step(c, op, args)


def fam_range_args(c):
    """Starts, ends, lengths, steps, indices and counts that are extreme."""
    r = c.rng
    x, shape, dt = operand(c, nd=r.randrange(1, 4))
    nd = len(shape)
    d = r.randrange(-nd, nd)
    n = shape[d]
    op = r.choice(["narrow", "narrow", "select", "slice", "slice", "slice", "split",
                   "split", "chunk", "triu", "tril", "index_select", "gather"])
    if op == "narrow":
        start, length = r.randrange(-n, n + 1), r.randrange(0, n + 1)
        if r.random() < 0.5:
            start = hostile(r, start)
        else:
            length = hostile(r, length)
        if r.random() < 0.2:
            start, length = hostile(r, start), hostile(r, length)
        return step(c, "narrow", [x, d, start, length])
    if op == "select":
        return step(c, "select", [x, d, hostile(r, 0)])
    if op == "slice":
        start = r.choice([None, r.randrange(-n, n + 1)])
        end = r.choice([None, r.randrange(-n, n + 1)])
        stp = r.randrange(1, 3)
        which = r.randrange(4)
        if which == 0:
            start = hostile(r, start)
        elif which == 1:
            end = hostile(r, end)
        elif which == 2:
            stp = hostile(r, stp)
        else:
            start, end = hostile(r, start), hostile(r, end)
        try:
            got = torch.ops.aten.slice.Tensor(c.env[x], d, start, end, stp).shape[d]
            lo = max(0, min(n, (start or 0) + n if (start or 0) < 0 else (start or 0)))
            hi = n if end is None else max(0, min(n, end + n if end < 0 else end))
            if stp > 0 and got != exact_arange_len(lo, hi, stp):
                # the length PyTorch computes in int64 wrapped to 0
                raise Skip("PyTorch's slice length wraps")
        except RuntimeError as e:
            if "Negative strides" in str(e) or "overflowed" in str(e):
                # PyTorch sizes the slice and multiplies its stride by the
                # step in int64 that wraps; strata's view selects at most
                # one element there
                raise Skip("PyTorch's slice stride wraps")
        return step(c, "slice", [x, d, start, end, stp])
    if op == "split":
        if r.random() < 0.5:
            return step(c, "split", [x, hostile(r, 1), d])
        else:
            sizes = [r.randrange(0, n + 1)]
            sizes.append(n - sizes[0])
            k = r.randrange(2)
            sizes[k] = hostile(r, sizes[k])
            if r.random() < 0.3:
                sizes[1 - k] = n - sizes[k]  # sums to n
            if any(not -(2 ** 63) <= v < 2 ** 63 for v in sizes):
                raise Skip("a split size outside int64")
        return step(c, "split", [x, sizes, d])
    if op == "chunk":
        k = hostile(r, 2)
        if n == 0 and k > MAX_RESULT:
            # PyTorch gives `chunks` empty pieces of a size-0 dim: 2^62 of them
            raise Skip("chunk of a size-0 dim into too many pieces")
        if k > 0:
            try:
                c.env[x].chunk(k, d)
            except RuntimeError:
                # PyTorch's (n + chunks - 1) / chunks wraps in int64
                raise Skip("PyTorch's chunk size wraps")
        return step(c, "chunk", [x, k, d])
    if op in ("triu", "tril"):
        if nd < 2:
            raise Skip("triu of 1-D")
        return step(c, op, [x, hostile(r, 0)])
    # index tensors holding extreme values
    idt = r.choice(["i64", "i64", "i32"])
    lim = 2 ** 31 - 1 if idt == "i32" else None
    vals = []
    for _ in range(r.randrange(1, 4)):
        v = hostile(r, r.randrange(0, max(n, 1)))
        if lim is not None and not -lim - 1 <= v <= lim:
            v = r.choice([lim, -lim - 1])
        vals.append(v)
    if op == "index_select":
        idx = c.input([len(vals)], idt, vals)
        return step(c, "index_select", [x, d, idx])
    ishape = [1] * nd
    ishape[d] = len(vals)
    idx = c.input(ishape, idt, vals)
    return step(c, "gather", [x, d, idx])


def fam_shape_args(c):
    """Shapes, strides and offsets with extreme entries."""
    r = c.rng
    op = r.choice(["view", "reshape", "expand", "as_strided", "as_strided", "zeros", "ones",
                   "full", "eye", "arange"])
    if op in ("zeros", "ones", "full"):
        nd = r.randrange(1, 4)
        shape = [r.randrange(0, 3) for _ in range(nd)]
        k = r.randrange(nd)
        shape[k] = r.choice([2 ** 63 - 1, -(2 ** 63), 2 ** 62, -(2 ** 62), -(2 ** 32), -1,
                             2 ** 62 + 1, -(2 ** 31) - 1])
        if r.random() < 0.4:
            shape.append(0)  # a huge dim times 0 elements
        if r.random() < 0.3:
            shape.append(r.choice([2 ** 62, 2 ** 63 - 1, 2 ** 32]))
        dt = r.choice([None] + DTYPES)
        if op == "full":
            v = {"int": 1} if dt is None or dt not in FLOATS else {"float": 1.5}
            args = [shape, v, dt]
        else:
            args = [shape, dt]
        while args[-1] is None:
            args.pop()
        return step(c, op, args)
    if op == "eye":
        n = r.choice([-(2 ** 63), -(2 ** 62), -(2 ** 31) - 1, 0, 2])
        m = r.choice([None, 0, -(2 ** 63), -(2 ** 32), 2 ** 63 - 1, 2 ** 62])
        if n > 0 and m is not None and m > 2:
            m = 0 if r.random() < 0.5 else -(2 ** 62)
        args = [n, m]
        while args and args[-1] is None:
            args.pop()
        return step(c, "eye", args)
    if op == "arange":
        kind = r.randrange(3)
        if kind == 0:
            a = [{"int": r.choice([2 ** 63 - 1, -(2 ** 63), 2 ** 62])},
                 {"int": r.choice([2 ** 63 - 1, -(2 ** 63), 2 ** 62 + 2])},
                 {"int": r.choice([1, -1, 2 ** 62, -(2 ** 63), 2 ** 63 - 1])}]
        elif kind == 1:
            a = [{"int": 0}, {"int": 4}, {"int": r.choice([2 ** 63 - 1, -(2 ** 63), 2 ** 62])}]
        else:
            a = [{"int": r.choice([-(2 ** 63), 2 ** 63 - 1])}, {"int": r.choice([-(2 ** 63), 2 ** 63 - 1])},
                 {"int": r.choice([2 ** 63 - 1, -(2 ** 63)])}]
        dt = [r.choice(["i64", "i32", "f32", "f64"])] if r.random() < 0.3 else []
        exact = exact_arange_len(*(v["int"] for v in a))
        try:
            got = torch.arange(*(v["int"] for v in a)).numel()
        except RuntimeError:
            got = None
        lo, hi, st = (v["int"] for v in a)
        wrong_sign = st > 0 and hi < lo or st < 0 and hi > lo
        if (got is not None and (got != exact or wrong_sign)
                or got is None and exact <= MAX_RESULT and not wrong_sign):
            # PyTorch sizes an int64 arange in int64 arithmetic that wraps
            # (arange(0, 4, 2^63 - 1) is empty): strata counts exactly
            # (conformance/README.md, "Known differences")
            raise Skip("PyTorch's arange size wraps")
        return step(c, "arange", a + dt)
    x, shape, dt = operand(c, nd=r.randrange(0, 3))
    nd = len(shape)
    if op in ("view", "reshape"):
        tgt = list(shape) if shape else [1]
        k = r.randrange(len(tgt))
        tgt[k] = r.choice([2 ** 63 - 1, -(2 ** 63), 2 ** 62, -2, -(2 ** 32), 2 ** 32])
        if r.random() < 0.3:
            tgt.append(r.choice([-1, 0, 2 ** 62]))
        if c.env[x].numel() == 0:
            try:
                c.env[x].reshape(tgt)
                # an empty tensor viewed as [0, 2^32, 2^62]: PyTorch's view
                # keeps no strides past i64 in mind, strata's size error
                # stands (conformance/README.md, "Known differences")
                raise Skip("an empty view with sizes past i64")
            except RuntimeError:
                pass
        return step(c, op, [x, tgt])
    if op == "expand":
        tgt = list(shape)
        if not tgt or r.random() < 0.5:
            tgt = [r.choice([2 ** 62, 2 ** 63 - 1, -2, -(2 ** 63), 2 ** 31, 0])] + tgt
        else:
            k = r.randrange(len(tgt))
            tgt[k] = r.choice([2 ** 62, -2, -(2 ** 63), 2 ** 63 - 1, -1])
        if r.random() < 0.3:
            tgt = [0] + tgt
        return step(c, "expand", [x, tgt])
    # as_strided over x's storage
    size = [r.randrange(0, 3) for _ in range(r.randrange(1, 3))]
    stride = [r.randrange(0, 3) for _ in size]
    off = r.choice([None, 0, 1])
    which = r.randrange(3)
    if which == 0:
        size[r.randrange(len(size))] = r.choice([2 ** 62, 2 ** 63 - 1, -1, -(2 ** 62), 2 ** 32])
    elif which == 1:
        stride[r.randrange(len(stride))] = r.choice([2 ** 62, 2 ** 63 - 1, -1, -(2 ** 62), 2 ** 32])
    else:
        off = r.choice([2 ** 62, 2 ** 63 - 1, -1, -(2 ** 63), 2 ** 32])
    args = [x, size, stride, off]
    if off is None:
        args.pop()
    if any(v < 0 for v in size):
        try:
            c.env[x].as_strided(size, stride, off)
        except RuntimeError as e:
            if "out of bounds" in str(e):
                # PyTorch measures the storage first, where a negative size
                # of stride 0 counts for nothing; strata's negative-size
                # `shape` error comes first (as in zeros)
                raise Skip("PyTorch's bounds before a negative size")
    return step(c, "as_strided", args)


def fam_loss_args(c):
    """Extreme ignore_index and padding_idx."""
    r = c.rng
    op = r.choice(["cross_entropy", "nll_loss", "embedding"])
    if op == "embedding":
        V, D = r.randrange(1, 4), r.randrange(1, 3)
        w = c.operand([V, D], r.choice(DTYPES))
        k = r.randrange(1, 3)
        idx = c.input([k], r.choice(["i64", "i32"]), [r.randrange(0, V) for _ in range(k)])
        return step(c, "embedding", [idx, w, hostile(r, 0)])
    N, C = r.randrange(1, 4), r.randrange(1, 4)
    dt = r.choice(["f32", "f64"])
    x = c.operand([N, C], dt)
    ign = hostile(r, -100)
    tv = [r.randrange(0, C) for _ in range(N)]
    if r.random() < 0.6:
        tv[r.randrange(N)] = ign  # a target equal to the extreme ignore_index
    if r.random() < 0.3:
        tv[r.randrange(N)] = hostile(r, 0)
    t = c.input([N], "i64", tv)
    red = r.choice(["none", "mean", "sum"])
    if op == "cross_entropy":
        return step(c, op, [x, t, None, ign, red, 0.0])
    return step(c, op, [x, t, None, ign, red])


# PyTorch's messages in FORMAT.md's classes. A size whose element or
# byte count overflows ("Storage size calculation overflowed") has no class
# there, and strata reports it as an error of its own kind: such drafts are
# left out, except an as_strided size that is negative (a `shape` error, as
# in zeros). A size below -2^62 or so reaches PyTorch's argument parser as
# a heap SymInt and fails there whatever the argument means: left out.
S63_MESSAGES = [
    ("Dimension size must be non-negative", "shape"),
    ("invalid storage offset", "value"),
    ("invalid shape dimension", "shape"),
    ("must match the existing size", "shape"),
    ("slice step must be positive", "value"),
    ("is invalid for input of size", "shape"),
    ("Negative strides are not supported", "value"),
]


def classify_s63(m):
    """This family's messages: a class; "" (no class, the draft is left
    out) for an overflow, or `shape` for one whose sizes hold a negative
    one; None for a message the shared rules answer."""
    for k in ("Storage size calculation overflowed with sizes=[", "Stride calculation overflowed",
              "integer multiplication overflow", "possible overflow"):
        if k in m:
            if k.startswith("Storage") and "-" in m.split("sizes=[", 1)[1].split("]", 1)[0]:
                return "shape"
            return ""
    for k, cl in S63_MESSAGES:
        if k in m:
            return cl
    return None


def exact_arange_len(start, end, step):
    """The number of elements of arange(start, end, step) (also a slice's
    length from its clamped start and end) in exact arithmetic; step != 0."""
    return max(-((start - end) // step), 0)  # ceil((end - start) / step)


def fam_norm_scatter_args(c):
    """layer_norm's normalized_shape and scatter_add's dim, extreme."""
    r = c.rng
    if r.random() < 0.5:
        x, shape, dt = operand(c, nd=r.randrange(1, 4), dt=r.choice(["f32", "f64"]))
        k = r.randrange(1, len(shape) + 1)
        ns = list(shape[-k:])
        # strata's normalized_shape is `&[usize]`: a negative size cannot
        # be passed (conformance/README.md), so only the large ones
        ns[r.randrange(k)] = r.choice([v for v in HUGE if v > 0] + [ns[0]])
        return step(c, "layer_norm", [x, ns])
    x, shape, dt = operand(c, nd=r.randrange(1, 3), dt=r.choice(["f32", "i64"]))
    nd = len(shape)
    idx = c.input([1] * nd, "i64", [0])
    src = c.input([1] * nd, dt, [1])
    return step(c, "scatter_add", [x, hostile(r, 0), idx, src])


S63_FAMILIES = [("hostile_dims", fam_dim_args, 4), ("hostile_ranges", fam_range_args, 5),
                ("hostile_shapes", fam_shape_args, 4), ("hostile_loss_args", fam_loss_args, 2),
                ("hostile_norm_scatter", fam_norm_scatter_args, 2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=S63_SEED)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--out", default="/tmp/fuzz_s63.json")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    s59.install_s58_machinery(args.seed, classify_s63)
    rng = random.Random(args.seed)

    def prepare(c):
        c.s45 = True

    s59.draw_and_write(rng, args, S63_FAMILIES,
                       "benches/anchors/fuzz_conformance_s63.py --seed %d --count %d"
                       % (args.seed, args.count),
                       builder_errors=(RuntimeError, ValueError, IndexError, TypeError,
                                       OverflowError),
                       prepare=prepare)

if __name__ == "__main__":
    main()
