#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread) for `index_add` with an alpha other
than 1 and for f16/bf16 `scatter_reduce` sums, products and means, written to crates/strata-tensor/tests/data/oracle_s61.json
(crates/strata-tensor/tests/suite/oracle_s61.rs).

PyTorch's CPU `index_add_` of a tensor of more than one dim adds slice by
slice with `add_stub(iter, alpha)`, `self + alpha * source` per element:
f32 rounds that once (a fused multiply-add, in its vectorised chunks and its
scalar tails alike); f16/bf16 once (in f32, then to the dtype) in the
vectorised chunks of 32 elements of a contiguous inner loop, and twice in the
scalar tails (`alpha * source` rounded to the dtype, then the sum); f64 twice.
A 1-D tensor takes the scalar loop `self[i] += source[j] * alpha` (two
roundings in every dtype). strata multiplied the source by alpha first (two
roundings) everywhere.

Cases: f32/f16/bf16 (and a few f64), 1-D to 3-D, any dim, self and source
row-major or transposed (`index_add` works on a row-major copy of self,
`index_add_` in place on self's own layout), duplicates in an int64 or int32
index, an alpha of a few significant bits or a random one; kept only where the answer of two
roundings per step (strata's before session 61) differs from PyTorch's, so
each case tells them apart, plus a few f64 and 1-D cases where they agree.

`scatter_reduce` of f16/bf16 with `sum`, `prod` or `mean`: PyTorch's CPU
reduces in f32 and rounds each element once (a mean divides that rounded sum
by the count in the dtype); strata rounded every step in the dtype. Cases are
kept where the two differ (found by fresh seeds of gen_scatter_ops_s60.py).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_oracle_s61.py \\
        crates/strata-tensor/tests/data/oracle_s61.json.gz
"""
import json
import math
import random
import sys

import torch

from fixture_io import fmt, write_fixture

DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}


def two_roundings(x, dim, idx, src, alpha, dt):
    """Each step `x[i] + round(alpha * src[j])`, rounded to the dtype."""
    y = x.clone()
    a = torch.tensor(alpha, dtype=dt)
    for j, i in enumerate(idx.tolist()):
        y.select(dim, i).copy_(y.select(dim, i) + a * src.select(dim, j))
    return y


def laid_out(t, transposed):
    """`t` itself, or a copy with the same values whose first and last dims'
    strides are swapped (a transposed layout)."""
    if not transposed or t.dim() < 2:
        return t
    return t.transpose(0, -1).contiguous().transpose(0, -1)


def in_dtype(x, dim, idx, src, reduce, include_self):
    """scatter_reduce computed step by step in the dtype (each addition or
    multiplication rounded), row-major over the index: strata's CPU before
    session 61."""
    y = x.clone()
    hit = torch.zeros(x.shape, dtype=torch.bool)
    count = torch.ones(x.shape) if include_self else torch.zeros(x.shape)
    for pos in torch.cartesian_prod(*[torch.arange(n) for n in idx.shape]).reshape(-1, idx.dim()).tolist():
        t = list(pos)
        t[dim] = int(idx[tuple(pos)])
        t = tuple(t)
        v = src[tuple(pos)]
        if not include_self and not hit[t]:
            y[t] = v
        elif reduce == "prod":
            y[t] = y[t] * v
        else:
            y[t] = y[t] + v
        hit[t] = True
        count[t] += 1
    if reduce == "mean":
        y = torch.where(hit, y / count.clamp(min=1).to(y.dtype), y)
    return y


def scatter_reduce_cases(rng):
    """f16/bf16 scatter_reduce with sum, prod and mean, many duplicates, with
    and without include_self, in and out of place: PyTorch 2.15's CPU adds
    (multiplies) in f32 and rounds once; kept where rounding every step in
    the dtype gives another answer."""
    cases, tries = [], 0
    while len(cases) < 36 and tries < 5000:
        tries += 1
        dt = rng.choice(["f16", "bf16"])
        reduce = rng.choice(["sum", "sum", "mean", "prod"])
        include_self = rng.random() < 0.6
        nd = rng.randint(1, 3)
        shape = [rng.randint(1, 5) for _ in range(nd)]
        dim = rng.randrange(nd)
        ishape = [rng.randint(1, s) for s in shape]
        ishape[dim] = rng.randint(2, 24)
        sshape = [s + rng.randint(0, 1) for s in ishape]
        g = torch.Generator().manual_seed(rng.randrange(1 << 30))
        scale = 0.3 if reduce == "prod" else 3.0
        base = 1.0 if reduce == "prod" else 0.0
        x = (base + torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(DT[dt])
        src = (base + torch.randn(sshape, generator=g, dtype=torch.float64) * scale).to(DT[dt])
        idx = torch.randint(0, shape[dim], ishape, generator=g)
        idx_dtype = rng.choice(["i64", "i32"])
        inplace = rng.random() < 0.3
        if inplace:
            want = x.clone().scatter_reduce_(dim, idx, src, reduce, include_self=include_self)
        else:
            want = x.scatter_reduce(dim, idx, src, reduce, include_self=include_self)
        if torch.equal(in_dtype(x, dim, idx, src, reduce, include_self), want):
            continue
        cases.append({"doc": f"{dt} {reduce} include_self={include_self}{' in place' if inplace else ''}",
                      "dtype": dt, "self": [fmt(v) for v in x.double().reshape(-1).tolist()], "shape": shape,
                      "dim": dim, "index": idx.reshape(-1).tolist(), "index_shape": ishape,
                      "index_dtype": idx_dtype, "source": [fmt(v) for v in src.double().reshape(-1).tolist()],
                      "source_shape": sshape, "reduce": reduce, "include_self": include_self,
                      "inplace": inplace, "want": [fmt(v) for v in want.double().reshape(-1).tolist()]})
    print(f"{len(cases)} scatter_reduce cases ({tries} drafts)", file=sys.stderr)
    return cases


def layout_cases(rng):
    """Found by fresh seeds of gen_shape_ops_s60.py (7171) and
    gen_contract_s60.py (7373): the layout of `roll` (one `cat` of two
    narrowed pieces per (shift, dim) pair: channels-last when both pieces
    are) and of reflection/replication `pad` (the input's
    `suggest_memory_format`) for channels-last(-3d) inputs; `repeat_interleave`
    with uint8 counts (PyTorch's index is uint8: positions wrap at 256); and
    `kron` of a transposed operand (PyTorch's `_unsafe_view` of the product
    fails). Each case: the input's values (row-major), shape and memory
    format, the op's arguments, and PyTorch's result (shape, strides, values)
    or error."""
    cases = []

    def add(doc, x, fmt_name, op, args, fn):
        try:
            r = fn(x)
            out = {"shape": list(r.shape), "stride": list(r.stride()),
                   "values": [fmt(v) for v in r.double().reshape(-1).tolist()]}
        except RuntimeError as e:
            out = {"error": str(e).split("\n")[0][:120]}
        cases.append({"doc": doc, "op": op, "dtype": "f32", "shape": list(x.shape), "format": fmt_name,
                      "values": [fmt(v) for v in x.double().reshape(-1).tolist()], "args": args, "want": out})

    def laid(shape, fmt_name):
        x = torch.randn(shape, generator=g).round(decimals=2)
        if fmt_name == "channels_last":
            return x.to(memory_format=torch.channels_last)
        if fmt_name == "channels_last_3d":
            return x.to(memory_format=torch.channels_last_3d)
        if fmt_name == "t":
            return x.t()
        return x

    g = torch.Generator().manual_seed(61)
    for shape, f in (([2, 4, 3, 4], "channels_last"), ([2, 3, 2, 2, 3], "channels_last_3d"), ([1, 3, 1, 4], "channels_last")):
        nd = len(shape)
        for _ in range(6):
            k = rng.randint(1, 3)
            dims = [rng.randrange(-nd, nd) for _ in range(k)]
            shifts = [rng.choice([0, 1, -1, 2, 3, -5, shape[d] if d >= 0 else shape[nd + d]]) for d in dims]
            x = laid(shape, f)
            add(f"roll {f}", x, f, "roll", {"shifts": shifts, "dims": dims},
                lambda x, s=shifts, d=dims: x.roll(s, d))
    for shape, f, pad in (([2, 3, 4, 5], "channels_last", [1, 2, 1, 1]), ([5, 3, 1, 5], "channels_last", [3, -1, 4, 3, 1, 1]),
                          ([2, 3, 2, 3, 4], "channels_last_3d", [1, 1, 1, 1, 1, 1]), ([2, 3, 4, 5], "channels_last", [1, 1]),
                          ([3, 4, 5], "contiguous", [1, 2])):
        for mode in ("reflect", "replicate", "circular"):
            x = laid(shape, f)
            if mode == "reflect" and any(p >= n for p, n in zip(pad[::2], reversed(shape))):
                continue
            add(f"pad {mode} {f}", x, f, "pad", {"pad": pad, "mode": mode},
                lambda x, p=pad, m=mode: torch.nn.functional.pad(x, p, mode=m))
    for n in (300, 600):
        x = torch.arange(n, dtype=torch.float32)
        reps = [rng.randint(0, 2) for _ in range(n)]
        add(f"repeat_interleave u8 {n}", x, "contiguous", "repeat_interleave", {"repeats": reps, "repeats_dtype": "u8"},
            lambda x, r=reps: x.repeat_interleave(torch.tensor(r, dtype=torch.uint8)))
        add(f"repeat_interleave i64 {n}", x, "contiguous", "repeat_interleave", {"repeats": reps, "repeats_dtype": "i64"},
            lambda x, r=reps: x.repeat_interleave(torch.tensor(r, dtype=torch.int64)))
    for shape, f, other in (([2, 3], "t", [2, 2]), ([2, 2], "t", [3]), ([3, 2], "contiguous", [2, 2]), ([2, 2], "t", [1, 1])):
        x = laid(shape, f)
        o = torch.arange(1, 1 + math.prod(other), dtype=torch.float32).reshape(other)
        add(f"kron {f} {shape} {other}", x, f, "kron", {"other": o.reshape(-1).tolist(), "other_shape": other},
            lambda x, o=o: torch.kron(x, o))
    print(f"{len(cases)} layout cases", file=sys.stderr)
    return cases


def index_add_alpha_one_cases(rng):
    """f16/bf16 `index_add` with alpha 1 and an int64 index on a tensor of
    more than one dim: PyTorch's CPU takes its scatter-add path (sums in
    f32, rounded once per element) only along the first or the last dim, and
    adds slice by slice (rounding each step) along a middle one (found by a
    fresh seed of gen_scatter_ops_s60.py, 8484). Kept where the two rules
    give different answers."""
    cases, tries = [], 0
    while len(cases) < 24 and tries < 5000:
        tries += 1
        dt = rng.choice(["f16", "bf16"])
        nd = rng.randint(2, 4)
        shape = [rng.randint(1, 4) for _ in range(nd)]
        dim = rng.randrange(nd)
        k = rng.randint(3, 14)
        sshape = list(shape)
        sshape[dim] = k
        g = torch.Generator().manual_seed(rng.randrange(1 << 30))
        x = (torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(DT[dt])
        src = (torch.randn(sshape, generator=g, dtype=torch.float64) * 3).to(DT[dt])
        idx = torch.randint(0, shape[dim], (k,), generator=g)
        want = x.index_add(dim, idx, src)
        per_step = two_roundings(x, dim, idx, src, 1.0, DT[dt])
        y = x.float()
        for j, i in enumerate(idx.tolist()):
            y.select(dim, i).add_(src.select(dim, j).float())
        if torch.equal(per_step, y.to(DT[dt])):
            continue
        cases.append({"doc": f"{dt} {nd}-d dim {dim}", "dtype": dt,
                      "self": [fmt(v) for v in x.double().reshape(-1).tolist()], "shape": shape,
                      "self_strides": list(x.stride()), "dim": dim, "index": idx.tolist(), "index_dtype": "i64",
                      "source": [fmt(v) for v in src.double().reshape(-1).tolist()], "source_shape": sshape,
                      "source_strides": list(src.stride()), "alpha": 1.0, "inplace": False,
                      "want": [fmt(v) for v in want.double().reshape(-1).tolist()]})
    print(f"{len(cases)} index_add alpha-1 cases ({tries} drafts)", file=sys.stderr)
    return cases


def main():
    torch.set_num_threads(1)
    out = sys.argv[1]
    rng = random.Random(61)
    cases, agree, tries = [], 0, 0
    while len(cases) < 64 and tries < 20000:
        tries += 1
        dt = rng.choice(["f32", "f16", "bf16", "f16", "bf16", "f64"])
        nd = rng.randint(1, 3)
        shape = [rng.choice([1, 2, 3, 5, 8, 33, 40, 70, 100]) for _ in range(nd)]
        if math.prod(shape) > 600:
            continue
        dim = rng.randrange(nd)
        k = rng.randint(1, 12)
        sshape = list(shape)
        sshape[dim] = k
        if math.prod(sshape) > 600:
            continue
        g = torch.Generator().manual_seed(rng.randrange(1 << 30))
        x = laid_out((torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(DT[dt]), rng.random() < 0.3)
        src = laid_out((torch.randn(sshape, generator=g, dtype=torch.float64) * 3).to(DT[dt]), rng.random() < 0.3)
        idx = torch.tensor([rng.randrange(shape[dim]) for _ in range(k)], dtype=torch.int64)
        idx_dtype = rng.choice(["i64", "i32"])
        if idx_dtype == "i32":
            idx = idx.to(torch.int32)
        alpha = rng.choice([round(rng.uniform(-3, 3), 3), rng.gauss(0, 2), 0.1, -1.7])
        inplace = rng.random() < 0.4
        if inplace:
            # index_add_ into self itself (its layout kept), not a row-major copy
            want = x.clone().index_add_(dim, idx, src, alpha=alpha)
        else:
            want = x.index_add(dim, idx, src, alpha=alpha)
        differs = not torch.equal(two_roundings(x.contiguous() if not inplace else x.clone(), dim, idx.long(), src,
                                                alpha, DT[dt]), want)
        if not differs:
            if agree >= 6 or not (dt == "f64" or nd == 1):
                continue
            agree += 1
        cases.append({"doc": f"{dt} {nd}-d dim {dim}{' in place' if inplace else ''}", "dtype": dt,
                      "inplace": inplace,
                      "self": [fmt(v) for v in x.double().reshape(-1).tolist()], "shape": shape,
                      "self_strides": list(x.stride()), "dim": dim,
                      "index": idx.tolist(), "index_dtype": idx_dtype,
                      "source": [fmt(v) for v in src.double().reshape(-1).tolist()], "source_shape": sshape,
                      "source_strides": list(src.stride()), "alpha": alpha,
                      "want": [fmt(v) for v in want.double().reshape(-1).tolist()]})
    doc = {"torch_version": torch.__version__, "generator": "benches/anchors/gen_oracle_s61.py",
           "oracle": "PyTorch on the CPU, one thread",
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "index_add": cases,
           "scatter_reduce": scatter_reduce_cases(rng), "layouts": layout_cases(rng),
           "index_add_alpha_one": index_add_alpha_one_cases(rng)}
    write_fixture(out, json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{len(cases)} index_add cases ({agree} where two roundings agree; {tries} drafts) -> {out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
