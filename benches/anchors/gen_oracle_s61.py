#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread) for `index_add` with an alpha other
than 1, written to crates/strata-tensor/tests/data/oracle_s61.json
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

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_oracle_s61.py \\
        crates/strata-tensor/tests/data/oracle_s61.json
"""
import json
import math
import random
import sys

import torch

from fixture_io import write_fixture

DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}


def fmt(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


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
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "index_add": cases}
    write_fixture(out, json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{len(cases)} index_add cases ({agree} where two roundings agree; {tries} drafts) -> {out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
