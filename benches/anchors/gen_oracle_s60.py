#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread) for the f16/bf16 sums of
crates/strata-tensor/tests/suite/oracle_s59.rs's second test, written to
crates/strata-tensor/tests/data/oracle_s60.json.

An f16/bf16 `mean`, and a `sum` whose first two TensorIterator dims are
reduced, PyTorch's CPU takes on the input converted to f32 (`self.to(Float)`).
For an input that is not dense (expanded: overlapping; stepped: with gaps)
that copy is dense *in the order of the input's strides* (`_to_copy`'s
`infer_dense_strides`), not row-major, and the order of the additions follows
the copy's strides. strata made the copy row-major (session 59's
`widened_as_pytorch`): 1 of 4,000 order-dependent half sums
(`fuzz_conformance_s59.py --only sum_order` drawing only f16/bf16, seeds
3700 and 3710, session 60) differed, `fuzz_ops.s3700o_sum_order_1246`, an
f16 [3, 5, 8, 4] transposed and expanded to [2, 5, 3, 8, 4], summed over
dims [-3, 0]: -1.7666015625 where PyTorch gives -1.767578125.

Cases: views that are not dense and not row-major (a permuted layout then
expanded or stepped), values of mixed magnitudes; only those whose answer
is that of `v.float()` reduced and differs from that of a row-major f32
copy reduced are kept, so each case tells the two copies apart. Same fields as oracle_s59.json's "sums".

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_oracle_s60.py \\
        crates/strata-tensor/tests/data/oracle_s60.json
"""
import json
import math
import random
import sys

import torch

from fixture_io import write_fixture

DT = {"f16": torch.float16, "bf16": torch.bfloat16}


def fmt(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def main():
    torch.set_num_threads(1)
    out = sys.argv[1]
    rng = random.Random(60)
    cases, tries = [], 0
    while len(cases) < 24 and tries < 20000:
        tries += 1
        dt = rng.choice(["f16", "bf16"])
        nd = rng.randint(2, 5)
        shape = [rng.choice([1, 2, 3, 4, 5, 7, 8, 9, 17]) for _ in range(nd)]
        if math.prod(shape) > 200:
            continue
        perm = list(range(nd))
        while perm == list(range(nd)):
            rng.shuffle(perm)
        kind = rng.choice(["expand", "step"])
        # memory order: perm[0] outermost
        st, acc = [0] * nd, 1
        expanded = set(rng.sample(range(nd), rng.randint(1, nd - 1))) if kind == "expand" else set()
        stepped = rng.randrange(nd) if kind == "step" else -1
        k = rng.choice([2, 3])
        for d in reversed(perm):
            if d in expanded:
                st[d] = 0
                continue
            st[d] = acc * (k if d == stepped else 1)
            acc *= shape[d] * (k if d == stepped else 1)
        nbase = acc
        base = []
        for _ in range(nbase):
            # exponents far enough apart that f32 sums of them round
            m = rng.choice([1.0, 1e-4, 3e4, 3e-7] if dt == "f16" else [1.0, 1e-4, 1e8, 1e-7])
            base.append(float(torch.tensor(rng.gauss(0, 1) * m, dtype=torch.float64).to(DT[dt])))
        b = torch.tensor(base, dtype=torch.float64).to(DT[dt])
        v = b.as_strided(shape, st, 0)
        kd = rng.randint(1, nd)
        dims = sorted(rng.sample(range(nd), kd))
        dims = [d - nd if rng.random() < 0.3 else d for d in dims]
        keep = rng.random() < 0.4
        op = rng.choice(["sum", "mean"])
        r = getattr(v, op)(dims, keepdim=keep)
        # the answer PyTorch gives by way of the f32 copy (`v.float()`, dense
        # in stride order) and the one a row-major f32 copy gives
        widened = getattr(v.float(), op)(dims, keepdim=keep).to(DT[dt])
        row_major = getattr(v.contiguous().float(), op)(dims, keepdim=keep).to(DT[dt])
        if not torch.equal(widened, r) or torch.equal(row_major, r):
            continue
        cases.append({"doc": f"{kind} {dt} {op} perm {perm}", "dtype": dt,
                      "base": [fmt(x) for x in base], "size": shape, "stride": st, "op": op,
                      "dims": dims, "keepdim": keep, "shape": list(r.shape),
                      "want": [fmt(x) for x in r.double().reshape(-1).tolist()]})
    doc = {"torch_version": torch.__version__, "generator": "benches/anchors/gen_oracle_s60.py",
           "oracle": "PyTorch on the CPU, one thread", "sums": cases}
    write_fixture(out, json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{len(cases)} sum cases ({tries} drafts) -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
