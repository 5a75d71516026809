#!/usr/bin/env python3
"""Session 77: PyTorch 2.15's CPU answers (one thread) for the search,
counting, set and grid ops strata added in session 77, written to
crates/strata-tensor/tests/data/search_unique_s77.json.gz
(crates/strata-tensor/tests/suite/search_unique_s77.rs replays them).

Ops: searchsorted (1-D and N-D sequences, tensor and Python-scalar values,
left/right/side, out_int32, sorter), bucketize, bincount (with and without
weights, minlength), histc (given ranges, the data's range, edges, NaN and
inf), unique and unique_consecutive (of every element and along a dim, with
inverse and counts), meshgrid ("ij", "xy"), cartesian_prod, diff (n, dim,
prepend, append), cdist (p = 0, 0.5, 1, 1.5, 2, 3, inf; batch dims that
broadcast), tril_indices and triu_indices. Inputs of every strata dtype
(f32, f64, f16, bf16, i32, i64, u8, bool) where PyTorch takes them and some
where it does not, shapes with 0-d and empty tensors, values with ties,
signed zeros, NaN and ±inf, and hostile arguments (negative sizes and
orders, dims out of range, mismatched shapes and dtypes). Recorded: each
output's dtype, shape and values (`results`, one record per output), or
the first line of PyTorch's error.

Choices:
- cdist with p = 2 and more than 25 rows on a side: PyTorch's default
  compute mode takes the matrix-product form there; strata computes the
  exact difference form, so the record is PyTorch's
  `compute_mode="donot_use_mm_for_euclid_dist"` answer (for f16/bf16,
  which only the matrix-product form takes on the CPU, that answer computed
  from the inputs in f32 and rounded to the dtype); `mm` marks those cases.
- Left out (not drawn): unique along a dim of slices holding NaN (PyTorch's
  CPU sorts slices with a comparison that is not an order there), unique of
  more than 16 elements holding NaN (PyTorch's unstable sort orders the NaNs'
  inverse indices arbitrarily), and histc where PyTorch's bin index is
  undefined (range ends that round together in the dtype, or
  `(x - min) * bins` past f16's range).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_search_unique_s77.py \\
        crates/strata-tensor/tests/data/search_unique_s77.json.gz
A second argument draws with another seed (the checked-in fixture is 7701);
STRATA_S77_PROBE=FILE makes the test replay such a draw too.
"""
import json
import math
import random
import sys

import torch

from fixture_io import fmt, write_fixture

torch.set_num_threads(1)

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = ["f32", "f64", "f16", "bf16"]
INTS = ["i32", "i64", "u8"]


def record(t):
    """An output as the test compares it: dtype, shape, row-major values."""
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape),
            "data": [fmt(float(v)) for v in t.detach().double().flatten().tolist()]}


def inp(t):
    """An input as the test rebuilds it (pytorch_fixture::input's format)."""
    if t.dtype == torch.bool:
        vals = [bool(v) for v in t.flatten().tolist()]
    elif t.dtype.is_floating_point:
        vals = [fmt(float(v)) for v in t.flatten().tolist()]
    else:
        vals = [int(v) for v in t.flatten().tolist()]
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": vals, "t": False}


def value(r, dtype, special=0.1):
    """One element: small integers (ties), halves, signed zeros and, for
    floats, now and then NaN or ±inf."""
    if dtype == "bool":
        return r.random() < 0.5
    if dtype == "u8":
        return r.choice([0, 1, 2, 3, 5, 7, 9, 255]) if r.random() < 0.3 else r.randint(0, 9)
    if dtype in INTS:
        return r.choice([-7, -1, 0, 1, 4, 9, 2 ** 31 - 1]) if r.random() < 0.2 else r.randint(-6, 9)
    if r.random() < special:
        return r.choice([math.nan, math.inf, -math.inf])
    if r.random() < 0.1:
        return r.choice([0.0, -0.0, 0.5, -2.5, 1e-3, 100.25])
    return r.randint(-6, 9) + (0.5 if r.random() < 0.2 else 0.0)


def tensor(r, dtype, shape, special=0.1):
    n = math.prod(shape)
    return torch.tensor([value(r, dtype, special) for _ in range(n)], dtype=DTYPES[dtype]).reshape(shape)


def outcome(call):
    """`{"results": [...]}` or `{"error": msg}`."""
    try:
        y = call()
        ys = list(y) if isinstance(y, (tuple, list)) else [y]
        return {"results": [record(t) for t in ys]}
    except Exception as e:  # noqa: BLE001 - PyTorch raises several types
        return {"error": str(e).split("\n")[0][:200]}


def small_shape(r, nd, hi=4):
    return [r.randint(0, hi) if r.random() < 0.1 else r.randint(1, hi) for _ in range(nd)]


def searchsorted_case(r):
    dt = r.choice(FLOATS * 2 + INTS + ["bool"] * (r.random() < 0.05))
    nd = r.choice([1, 1, 1, 2, 3]) if r.random() < 0.97 else 0
    lead = small_shape(r, max(nd - 1, 0), 3)
    n = r.choice([0, 1, 2, 3, 5, 8, 8, 13]) if r.random() < 0.9 else r.randint(20, 40)
    seq = tensor(r, dt, lead + [n] if nd > 0 else [], 0.08)
    kind = r.random()
    sorter = None
    if nd > 0 and dt != "bool":
        if kind < 0.6:
            seq = seq.sort(-1).values  # NaN last, as a sorted sequence holds it
        elif kind < 0.8:
            sorter = seq.argsort(stable=True, dim=-1)
    c = {"op": "searchsorted", "x": inp(seq)}
    if r.random() < 0.12:
        v = r.choice([2, -1, 0, 7, 2.5, -0.5, math.nan, math.inf, 3])
        c["scalar"] = {"kind": "int" if isinstance(v, int) else "float", "value": fmt(float(v)) if isinstance(v, float) else v}
        values = v
    else:
        vdt = dt if r.random() < 0.75 else r.choice(FLOATS + INTS)
        if nd <= 1:
            vshape = r.choice([[], [0], [1], [4], [2, 3], [3, 2, 2], [7]])
        else:
            vshape = lead + [r.randint(0, 4)]
            if r.random() < 0.08:
                vshape = r.choice([[3], [], lead[::-1] + [2], [9] + [2] * (nd - 1)])
        values = tensor(r, vdt, vshape, 0.1)
        c["v"] = inp(values)
    args = {"out_int32": r.random() < 0.3, "right": r.random() < 0.4,
            "side": r.choice([None, None, None, "left", "right", "middle" if r.random() < 0.2 else None])}
    if sorter is not None and r.random() < 0.1:
        sorter = r.choice([sorter.int(), sorter[..., :-1] if sorter.shape[-1] > 0 else sorter.int(),
                           sorter + 1])
    if sorter is not None:
        c["sorter"] = inp(sorter)
    c["args"] = args
    c.update(outcome(lambda: torch.searchsorted(seq, values, out_int32=args["out_int32"], right=args["right"],
                                                side=args["side"], sorter=sorter)))
    return c


def bucketize_case(r):
    dt = r.choice(FLOATS + INTS)
    x = tensor(r, dt, r.choice([[], [0], [5], [2, 3], [3, 1, 2]]))
    bdt = dt if r.random() < 0.8 else r.choice(FLOATS + INTS)
    b = tensor(r, bdt, [r.choice([0, 1, 3, 6, 10])], 0.05).sort().values
    if r.random() < 0.06:
        b = b.reshape(1, -1)
    args = {"out_int32": r.random() < 0.3, "right": r.random() < 0.5}
    c = {"op": "bucketize", "x": inp(x), "boundaries": inp(b), "args": args}
    c.update(outcome(lambda: torch.bucketize(x, b, out_int32=args["out_int32"], right=args["right"])))
    return c


def bincount_case(r):
    dt = r.choice(["i64", "i64", "i32", "u8"] + (["f32", "bool"] if r.random() < 0.1 else []))
    n = r.choice([0, 1, 3, 8, 20, 40])
    shape = [n] if r.random() < 0.93 else r.choice([[], [2, 2], [0, 3]])
    hi = r.choice([3, 10, 30])
    vals = [r.randint(0, hi) for _ in range(math.prod(shape))]
    if vals and dt not in ("u8", "bool") and r.random() < 0.07:
        vals[r.randrange(len(vals))] = -1
    if dt == "bool":
        vals = [v % 2 for v in vals]
    x = torch.tensor(vals, dtype=DTYPES[dt]).reshape(shape) if dt != "f32" else \
        torch.tensor(vals, dtype=torch.float32).reshape(shape)
    c = {"op": "bincount", "x": inp(x)}
    w = None
    if r.random() < 0.5:
        wdt = r.choice(["f32", "f32", "f64", "f16", "bf16", "i64", "i32", "bool"])
        wshape = [math.prod(shape)] if len(shape) == 1 else [len(vals)]
        if r.random() < 0.07:
            wshape = r.choice([[wshape[0] + 1], [1, wshape[0]]])
        w = tensor(r, wdt, wshape, 0.05)
        c["w"] = inp(w)
    minlength = r.choice([0, 0, 1, 5, 12, 50]) if r.random() < 0.95 else -1
    c["args"] = {"minlength": minlength}
    c.update(outcome(lambda: torch.bincount(x, weights=w, minlength=minlength)))
    return c


def histc_case(r):
    dt = r.choice(FLOATS * 3 + ["i64", "bool"])
    shape = r.choice([[], [0], [1], [6], [2, 5], [3, 4], [40], [3, 3, 3]])
    x = tensor(r, dt, shape, 0.05)
    bins = r.choice([1, 2, 3, 4, 7, 10, 100]) if r.random() < 0.95 else r.choice([0, -2])
    kind = r.random()
    if kind < 0.3:
        lo = hi = 0.0
    elif kind < 0.37:
        lo = hi = float(r.randint(-3, 3))
    elif kind < 0.42:
        lo, hi = r.choice([(-math.inf, 3.0), (0.0, math.nan), (2.0, -1.0), (0.0, math.inf)])
    else:
        lo = r.randint(-8, 4) + r.choice([0.0, 0.25, 0.5, 0.1])
        hi = lo + r.choice([0.5, 1.0, 3.0, 7.3, 10.0, 13.0])
    if dt in FLOATS and math.isfinite(lo) and math.isfinite(hi) and lo != hi:
        tl, th = (torch.tensor([lo, hi], dtype=torch.float64).to(DTYPES[dt])).tolist()
        if tl == th:
            return None  # the dtype rounds the ends together: PyTorch's index is undefined
    c = {"op": "histc", "x": inp(x), "args": {"bins": bins, "min": fmt(lo), "max": fmt(hi)}}
    c.update(outcome(lambda: torch.histc(x, bins=bins, min=lo, max=hi)))
    return c


def saturation_cases():
    """Bins past the dtype's exact counts (one thread: f16 stops at 2048,
    bf16 at 256)."""
    out = []
    for dt, n in (("bf16", 300), ("f16", 2100)):
        x = torch.zeros(n, dtype=DTYPES[dt])
        x[::7] = 1.0
        c = {"op": "histc", "x": inp(x), "args": {"bins": 2, "min": 0.0, "max": 0.0}}
        c.update(outcome(lambda: torch.histc(x, bins=2, min=0.0, max=0.0)))
        out.append(c)
    return out


def unique_case(r, op):
    dt = r.choice(FLOATS + INTS + ["bool"] + FLOATS + ["i64"])
    with_dim = r.random() < 0.4
    flags = {"sorted": r.random() < 0.8, "return_inverse": r.random() < 0.6, "return_counts": r.random() < 0.6}
    if with_dim:
        nd = r.choice([1, 2, 2, 3]) if r.random() < 0.95 else 0
        shape = [r.randint(1, 5) for _ in range(nd)]
        if nd and r.random() < 0.1:
            shape[r.randrange(nd)] = 0
            if r.random() < 0.3:
                shape[r.randrange(nd)] = 0
        # Few distinct values, so that slices repeat; no NaN (see the docstring).
        vals = [value(r, dt, 0.0) if r.random() < 0.2 else r.choice([0, 1]) for _ in range(math.prod(shape))]
        if dt != "bool" and r.random() < 0.2 and vals:
            vals = [-0.0 if v == 0 and dt in FLOATS and r.random() < 0.5 else v for v in vals]
        x = torch.tensor(vals, dtype=DTYPES[dt]).reshape(shape)
        dim = r.randint(-nd, nd - 1) if nd and r.random() < 0.93 else r.choice([nd, -nd - 1, 0])
        flags["dim"] = dim
    else:
        shape = r.choice([[], [0], [1], [5], [12], [2, 3], [3, 0], [2, 2, 3], [40], [6, 5]])
        n = math.prod(shape)
        x = tensor(r, dt, shape, 0.15 if n <= 16 else 0.0)
        if r.random() < 0.4:
            x = x.flatten()[torch.randint(0, max(n, 1), (n,), generator=torch.Generator().manual_seed(r.randrange(1 << 30)))].reshape(shape) if n else x
        flags["dim"] = None
    c = {"op": op, "x": inp(x), "args": flags}
    if op == "unique":
        def call():
            return torch.unique(x, sorted=flags["sorted"], return_inverse=flags["return_inverse"],
                                return_counts=flags["return_counts"], dim=flags["dim"])
    else:
        def call():
            return torch.unique_consecutive(x, return_inverse=flags["return_inverse"],
                                            return_counts=flags["return_counts"], dim=flags["dim"])
    c.update(outcome(call))
    return c


def meshgrid_case(r, op):
    dt = r.choice(FLOATS + INTS + ["bool"])
    k = r.choice([1, 2, 2, 3, 4]) if r.random() < 0.95 else 0
    ts = []
    for _ in range(k):
        d = dt if r.random() < 0.93 else r.choice(FLOATS + INTS)
        shape = r.choice([[0], [1], [2], [3], [4]] + ([[]] if op == "meshgrid" or r.random() < 0.05 else []))
        if r.random() < 0.04:
            shape = [2, 2]
        ts.append(tensor(r, d, shape, 0.05))
    c = {"op": op, "xs": [inp(t) for t in ts]}
    if op == "meshgrid":
        indexing = r.choice(["ij", "xy", "ij", "xy"] + (["yx"] if r.random() < 0.2 else []))
        c["args"] = {"indexing": indexing}
        c.update(outcome(lambda: torch.meshgrid(*ts, indexing=indexing)))
    else:
        c.update(outcome(lambda: torch.cartesian_prod(*ts)))
    return c


def diff_case(r):
    dt = r.choice(FLOATS + INTS + ["bool"])
    nd = r.choice([1, 1, 2, 3]) if r.random() < 0.96 else 0
    shape = small_shape(r, nd, 5)
    x = tensor(r, dt, shape, 0.1)
    n = r.choice([0, 1, 1, 2, 3, 6]) if r.random() < 0.95 else -1
    dim = r.randint(-nd, nd - 1) if nd and r.random() < 0.95 else r.choice([nd, 3, -nd - 1])
    c = {"op": "diff", "x": inp(x), "args": {"n": n, "dim": dim}}
    extra = {}
    for name in ("prepend", "append"):
        if nd and r.random() < 0.3:
            s = list(shape)
            d = dim % nd if -nd <= dim < nd else 0
            s[d] = r.randint(0, 2)
            if r.random() < 0.08:
                s = s + [1] if r.random() < 0.5 else [v + 1 for v in s]
            pdt = dt if r.random() < 0.7 else r.choice(FLOATS + INTS + ["bool"])
            extra[name] = tensor(r, pdt, s, 0.1)
            c[name] = inp(extra[name])
    c.update(outcome(lambda: torch.diff(x, n=n, dim=dim, prepend=extra.get("prepend"), append=extra.get("append"))))
    return c


def cdist_case(r):
    dt = r.choice(["f32", "f32", "f64", "f64", "f16", "bf16"] + (["i64"] if r.random() < 0.1 else []))
    dt2 = dt if r.random() < 0.93 else r.choice(["f32", "f64", "i64"])
    p = r.choice([0.0, 0.5, 1.0, 1.5, 2.0, 2.0, 2.0, 3.0, math.inf]) if r.random() < 0.96 else r.choice([-1.0, math.nan])
    big = r.random() < 0.15
    r1 = r.randint(26, 30) if big else r.choice([0, 1, 2, 3, 5])
    r2 = r.choice([1, 2, 4, 7]) if r.random() < 0.95 else 0
    cols = r.choice([1, 2, 3, 5]) if r.random() < 0.93 else 0
    b1 = r.choice([[], [], [2], [2, 1], [0]])
    b2 = r.choice([[], [2], [3, 2], [1]]) if r.random() < 0.3 else list(b1)
    s1, s2 = b1 + [r1, cols], b2 + [r2, cols]
    if r.random() < 0.05:
        s1 = s1[-1:]
    if r.random() < 0.04:
        s2 = s2[:-1] + [cols + 1]
    special = 0.05 if r.random() < 0.5 else 0.0
    x1, x2 = tensor(r, dt, s1, special), tensor(r, dt2, s2, special)
    c = {"op": "cdist", "x": inp(x1), "x2": inp(x2), "args": {"p": fmt(p)}}
    mm = p == 2.0 and (r1 > 25 or r2 > 25)
    if mm:
        c["mm"] = True

        def call():
            torch.cdist(x1, x2, p=p)  # PyTorch's checks (its default mode)
            if dt in ("f16", "bf16"):
                return torch.cdist(x1.float(), x2.float(), p=p,
                                   compute_mode="donot_use_mm_for_euclid_dist").to(DTYPES[dt])
            return torch.cdist(x1, x2, p=p, compute_mode="donot_use_mm_for_euclid_dist")
    else:
        def call():
            return torch.cdist(x1, x2, p=p)
    c.update(outcome(call))
    return c


def tri_case(r, op):
    row = r.randint(0, 7) if r.random() < 0.95 else -r.randint(1, 3)
    col = r.randint(0, 7) if r.random() < 0.95 else -r.randint(1, 3)
    offset = r.randint(-9, 9)
    dtype = r.choice([None, None, "i64", "i32"] + (["f32", "u8", "bool"] if r.random() < 0.15 else []))
    c = {"op": op, "args": {"row": row, "col": col, "offset": offset, "dtype": dtype}}
    fn = getattr(torch, op)
    c.update(outcome(lambda: fn(row, col, offset, dtype=DTYPES[dtype] if dtype else torch.int64)))
    return c


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/search_unique_s77.json.gz"
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 7701  # another seed: a probe draw
    r = random.Random(seed)
    torch.manual_seed(seed)
    plan = [("searchsorted", 600, searchsorted_case), ("bucketize", 250, bucketize_case),
            ("bincount", 350, bincount_case), ("histc", 450, histc_case),
            ("unique", 450, lambda r: unique_case(r, "unique")),
            ("unique_consecutive", 300, lambda r: unique_case(r, "unique_consecutive")),
            ("meshgrid", 200, lambda r: meshgrid_case(r, "meshgrid")),
            ("cartesian_prod", 120, lambda r: meshgrid_case(r, "cartesian_prod")),
            ("diff", 350, diff_case), ("cdist", 400, cdist_case),
            ("tril_indices", 120, lambda r: tri_case(r, "tril_indices")),
            ("triu_indices", 120, lambda r: tri_case(r, "triu_indices"))]
    cases, left_out = [], 0
    for _, count, draw in plan:
        for _ in range(count):
            c = draw(r)
            if c is None:
                left_out += 1
            else:
                cases.append(c)
    cases += saturation_cases()
    doc = {"generator": "benches/anchors/gen_search_unique_s77.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    by_op = {}
    for c in cases:
        by_op.setdefault(c["op"], [0, 0])
        by_op[c["op"]][0] += 1
        by_op[c["op"]][1] += "error" in c
    print("%d cases (%d errors), %d left out -> %s" % (len(cases), sum("error" in c for c in cases), left_out, path))
    for op, (n, e) in by_op.items():
        print("  %-20s %4d cases, %3d errors" % (op, n, e))


if __name__ == "__main__":
    main()
