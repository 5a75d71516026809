#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread) for
crates/strata-tensor/tests/suite/oracle_s59.rs, written to
crates/strata-tensor/tests/data/oracle_s59.json: what the session-59
conformance sweep (benches/anchors/fuzz_conformance_s59.py, seeds 3500-3569)
found.

"sums": f32/f64/f16/bf16 `sum` and `mean` over one or several dims of views that are
not row-major (expanded, stepped, transposed, permuted; `as_strided` views
of a base storage), with values of mixed magnitudes, so that the order of
the additions shows in the last place. PyTorch adds them in the order its
TensorIterator gives the dims (reduced dims first, ordered by the strides,
neighbours merged where they walk memory as one dim) and its cascade_sum's
loops; strata folded several reduced dims that do not merge in row-major
order (`fuzz_ops.s3562_pipeline_0936`: an expanded [2, 3, 1] f32 summed
over every dim, -34.47703552 where PyTorch gives -34.47703934), and summed
an expanded dim's columns in groups of four where PyTorch sums each as a
row (`fuzz_ops.s3601o_sum_order_0676`, nine copies of one f32). An f16/bf16
sum or mean PyTorch takes on the input converted to f32 (a mean; a sum whose
first two iterator dims are reduced), else on the f16/bf16 input rounding
each partial sum it stores; strata added in row-major order in f32
(`fuzz_ops.s3600o_sum_order_0530`: an expanded bf16 holding 3.39e38 twice
and -inf, NaN where PyTorch gives -inf). The sweep's three cases come first; of the random ones, only those where adding the
elements in row-major order gives another answer are kept (so that each
case tells the orders apart).
Each case: the base storage, the view (size, stride, offset), the op, dims
and keepdim; PyTorch's answer (shape and values).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_oracle_s59.py \\
        crates/strata-tensor/tests/data/oracle_s59.json
"""
import json
import math
import random
import sys

import torch

from fixture_io import write_fixture

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}


def fmt(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def row_major_sum(v, dims, keep, mean):
    """The sum of the view's elements added one by one in row-major order,
    in the view's dtype."""
    nd = v.dim()
    dims = sorted({d % nd for d in dims}) if dims else list(range(nd))
    kept = [d for d in range(nd) if d not in dims]
    x = v.permute(kept + dims).reshape([math.prod(v.shape[d] for d in kept), -1])
    # f16/bf16 accumulate in f32 and round once
    acc = torch.float32 if v.dtype in (torch.float16, torch.bfloat16) else v.dtype
    out = []
    for row in x:
        s = torch.zeros([], dtype=acc)
        for e in row:
            s = s + e.to(acc)
        if mean:
            s = s / row.numel()
        out.append(s.to(v.dtype))
    return torch.stack(out).reshape(-1)


def case(base, size, stride, dt, op, dims, keep):
    b = torch.tensor(base, dtype=torch.float64).to(DT[dt])
    v = b.as_strided(size, stride, 0)
    r = getattr(v, op)(dims, keepdim=keep) if dims is not None else getattr(v, op)()
    return v, r


def main():
    torch.set_num_threads(1)
    out = sys.argv[1]
    rng = random.Random(59)
    cases = []
    # The sweep's case: an expanded [2, 3, 1] f32 summed over every dim.
    base = [-19.240585327148438, 0.0020659780129790306, 2.0]
    v, r = case(base, [2, 3, 1], [0, 1, 1], "f32", "sum", [0, 1, 2], True)
    cases.append({"doc": "fuzz_ops.s3562_pipeline_0936", "dtype": "f32", "base": base,
                  "size": [2, 3, 1], "stride": [0, 1, 1], "op": "sum", "dims": [0, 1, 2],
                  "keepdim": True, "shape": list(r.shape),
                  "want": [fmt(x) for x in r.double().reshape(-1).tolist()]})
    # An expanded f32 [9, 7] summed over its expanded dim: each column is
    # summed as a row (`row_sum`), fewer than a vector of columns.
    base = [-1.5971012115478516, 65519.0, 0.34317123889923096, -0.20217204093933105,
            0.14299094676971436, -1.8463927507400513, 7.645244598388672]
    v, r = case(base, [9, 7], [0, 1], "f32", "sum", [0], True)
    cases.append({"doc": "fuzz_ops.s3601o_sum_order_0676", "dtype": "f32", "base": base,
                  "size": [9, 7], "stride": [0, 1], "op": "sum", "dims": [0],
                  "keepdim": True, "shape": list(r.shape),
                  "want": [fmt(x) for x in r.double().reshape(-1).tolist()]})
    # An expanded, transposed bf16 [17, 2] holding 3.39e38 twice and -inf:
    # PyTorch sums it converted to f32 in a contiguous copy (-inf); added
    # in row-major order the two 3.39e38 overflow to +inf first (NaN).
    base = [199.0, 300.0, 3.3895313892515355e+38, -math.inf, -0.00115203857421875, -2128.0,
            -36.25, -0.349609375, -math.inf, -0.00144195556640625, -7.21875,
            9.183549615799121e-41, 0.0, 0.0, 5.34375, 0.0, 0.0012969970703125]
    v, r = case(base, [17, 2], [1, 0], "bf16", "sum", [0, 1], False)
    cases.append({"doc": "fuzz_ops.s3600o_sum_order_0530", "dtype": "bf16",
                  "base": [fmt(x) for x in base], "size": [17, 2], "stride": [1, 0], "op": "sum",
                  "dims": [0, 1], "keepdim": False, "shape": list(r.shape),
                  "want": [fmt(x) for x in r.double().reshape(-1).tolist()]})
    tries = 0
    while len(cases) < 56 and tries < 40000:
        tries += 1
        dt = rng.choice(["f32", "f64"]) if len(cases) < 40 else rng.choice(["f16", "bf16"])
        nd = rng.randint(2, 4)
        shape = [rng.choice([1, 2, 3, 4, 5, 6, 9, 17]) for _ in range(nd)]
        n = math.prod(shape)
        if n > 150:
            continue
        kind = rng.choice(["expand", "step", "transpose", "permute"])
        if kind == "expand":
            ds = rng.sample(range(nd), rng.randint(1, nd - 1))
            sz = [1 if d in ds else s for d, s in enumerate(shape)]
            st, acc = [0] * nd, 1
            for d in reversed(range(nd)):
                st[d] = 0 if d in ds else acc
                acc *= sz[d]
            nbase = acc
        elif kind == "step":
            d = rng.randrange(nd)
            k = rng.choice([2, 3])
            st, acc = [0] * nd, 1
            for e in reversed(range(nd)):
                st[e] = acc * (k if e == d else 1)
                acc *= shape[e] * (k if e == d else 1)
            nbase = acc
        else:
            perm = list(range(nd))
            while perm == list(range(nd)):
                if kind == "transpose":
                    perm = list(range(nd))
                    a, c = rng.sample(range(nd), 2)
                    perm[a], perm[c] = perm[c], perm[a]
                else:
                    rng.shuffle(perm)
            # memory order: perm[0] outermost
            st, acc = [0] * nd, 1
            for d in reversed(perm):
                st[d] = acc
                acc *= shape[d]
            nbase = acc
        base = []
        for _ in range(nbase):
            m = rng.choice([1.0, 1.0, 1e3, 1e-3, 1e6] if dt in ("f32", "f64") else
                           [1.0, 1.0, 100.0, 1e-2, 3e4])
            x = float(torch.tensor(rng.gauss(0, 1) * m, dtype=torch.float64).to(DT[dt]))
            base.append(x)
        k = rng.randint(1 if nd > 1 else 1, nd)
        dims = sorted(rng.sample(range(nd), k))
        dims = [d - nd if rng.random() < 0.3 else d for d in dims]
        keep = rng.random() < 0.4
        op = rng.choice(["sum", "sum", "mean"])
        v, r = case(base, shape, st, dt, op, dims, keep)
        naive = row_major_sum(v, dims, keep, op == "mean")
        if torch.equal(naive, r.reshape(-1)):
            continue
        cases.append({"doc": f"{kind} {dt} {op}", "dtype": dt, "base": [fmt(x) for x in base],
                      "size": shape,
                      "stride": st, "op": op, "dims": dims, "keepdim": keep,
                      "shape": list(r.shape),
                      "want": [fmt(x) for x in r.double().reshape(-1).tolist()]})
    doc = {"torch_version": torch.__version__, "generator": "benches/anchors/gen_oracle_s59.py",
           "oracle": "PyTorch on the CPU, one thread", "sums": cases}
    write_fixture(out, json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{len(cases)} sum cases ({tries} drafts) -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
