#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread) for
crates/strata-tensor/tests/suite/scatter_ops.rs, written to
crates/strata-tensor/tests/data/scatter_ops_s60.json.gz: session 60's scans
(cumprod, cummax, cummin, logcumsumexp), any/all/count_nonzero, nonzero and
the index/scatter family (index_add, index_copy, index_fill, scatter,
scatter_value, scatter_reduce, index_put) on random shapes, dtypes and
layouts (contiguous, transposed, strided, offset and expanded views of a 1-D
base storage), with NaN, infinities, -0.0, ties, zeros and duplicate
indices. Non-reducing scatters (scatter, index_copy, index_put without
accumulate) get no duplicate targets: PyTorch leaves the winner unspecified.

Each case: "op", its operands (views: dtype, base, size, stride, offset),
arguments, and PyTorch's outputs (dtype, shape, values; "nan"/"inf"/"-inf"
as strings) or, for an error, its class.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_scatter_ops_s60.py \\
        crates/strata-tensor/tests/data/scatter_ops_s60.json.gz [seed]
"""
import json
import math
import random
import sys

import torch

from fixture_io import write_fixture

torch.set_num_threads(1)

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}
NAME = {v: k for k, v in DT.items()}
FLOATS = ["f32", "f64", "f16", "bf16"]
ALL = FLOATS + ["i32", "i64", "u8", "bool"]


def enc(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == 0.0 and math.copysign(1.0, v) < 0:
            return "-0"
    return v


def out(t):
    vals = t.detach().contiguous().reshape(-1).tolist()
    return {"dtype": NAME[t.dtype], "shape": list(t.shape), "values": [enc(v) for v in vals]}


def values(r, dt, n, special):
    vs = []
    for _ in range(n):
        if dt == "bool":
            vs.append(r.random() < 0.5)
        elif dt in FLOATS:
            c = r.random()
            if special and c < 0.06:
                vs.append(float("nan"))
            elif special and c < 0.10:
                vs.append(r.choice([float("inf"), float("-inf")]))
            elif c < 0.16:
                vs.append(r.choice([0.0, -0.0]))
            elif c < 0.30:
                vs.append(float(r.randint(-3, 3)))
            else:
                vs.append(round(r.uniform(-2.5, 2.5), 3))
        elif dt == "u8":
            vs.append(r.randint(0, 6) if r.random() < 0.8 else r.randint(0, 255))
        else:
            vs.append(r.randint(-4, 4) if r.random() < 0.8 else r.randint(-100000, 100000))
    return vs


def make(r, dt, shape, special=True, layout=None, vals=None):
    """A view of `shape` over a 1-D base, in a random layout."""
    layout = layout or r.choice(["contig", "contig", "transposed", "strided", "offset", "expanded"])
    nd = len(shape)
    if layout == "expanded" and nd > 0:
        d = r.randrange(nd)
        small = list(shape)
        small[d] = 1
        n = max(1, math.prod(small))
        st = [0] * nd
        acc = 1
        for k in reversed(range(nd)):
            st[k] = 0 if k == d else acc
            acc *= small[k] if k != d else 1
        base = vals if vals is not None else values(r, dt, n, special)
        if len(base) < n:
            base = base + values(r, dt, n - len(base), special)
        return {"dtype": dt, "base": [enc(v) for v in base[:n]], "size": shape, "stride": st,
                "offset": 0}
    if layout == "transposed" and nd >= 2:
        order = list(range(nd))
        r.shuffle(order)
        st = [0] * nd
        acc = 1
        for k in reversed(order):
            st[k] = acc
            acc *= max(shape[k], 1)
        n = max(1, math.prod(shape))
        off = 0
    elif layout == "strided" and nd >= 1:
        st = [0] * nd
        acc = 1
        for k in reversed(range(nd)):
            st[k] = acc * (2 if k == nd - 1 else 1)
            acc = st[k] * max(shape[k], 1)
        n = acc + 1
        off = 0
    else:
        st = [0] * nd
        acc = 1
        for k in reversed(range(nd)):
            st[k] = acc
            acc *= max(shape[k], 1)
        off = r.randint(1, 3) if layout == "offset" else 0
        n = acc + off
    base = vals if vals is not None else values(r, dt, n, special)
    if len(base) < n:
        base = base + values(r, dt, n - len(base), special)
    return {"dtype": dt, "base": [enc(v) for v in base[:n]], "size": shape, "stride": st,
            "offset": off}


def dec(v):
    if v == "nan":
        return float("nan")
    if v == "inf":
        return float("inf")
    if v == "-inf":
        return float("-inf")
    if v == "-0":
        return -0.0
    return v


def view(spec):
    b = torch.tensor([dec(v) for v in spec["base"]], dtype=torch.float64)
    b = b.to(DT[spec["dtype"]]) if spec["dtype"] != "bool" else torch.tensor(
        [bool(dec(v)) for v in spec["base"]])
    return b.as_strided(spec["size"], spec["stride"], spec["offset"])


def rshape(r, nd, lo=0, hi=5):
    return [r.randint(lo, hi) for _ in range(nd)]


def classify(e):
    m = str(e)
    if isinstance(e, IndexError) or "out of bounds" in m:
        return "index"
    if "dtype" in m or "not implemented" in m or "scalar type" in m or "Expected a long" in m:
        return "dtype"
    return "other"


def run(case, f):
    try:
        res = f()
    except Exception as e:  # noqa: BLE001
        case["error"] = classify(e)
        return case
    if isinstance(res, tuple):
        case["out"] = [out(t) for t in res]
    else:
        case["out"] = [out(res)]
    return case


def index_vec(r, size, n, unique):
    if size == 0:
        return []
    if unique:
        n = min(n, size)
        return r.sample(range(size), n)
    return [r.randrange(size) for _ in range(n)]


def gen(seed):
    r = random.Random(seed)
    cases = []
    # Scans.
    for _ in range(260):
        op = r.choice(["cumprod", "cummax", "cummin", "logcumsumexp"])
        dt = r.choice(FLOATS if op == "logcumsumexp" else ALL)
        nd = r.randint(0, 3)
        shape = rshape(r, nd, 0 if r.random() < 0.1 else 1, 6)
        x = make(r, dt, shape, special=r.random() < 0.6)
        dim = r.randint(-max(nd, 1), max(nd, 1) - 1)
        case = {"op": op, "x": x, "dim": dim}
        if op == "cumprod" and r.random() < 0.3:
            case["dtype"] = r.choice(["f64", "i64", "i32", "f32"])
        tx = view(x)
        if op == "cumprod":
            kw = {"dtype": DT[case["dtype"]]} if "dtype" in case else {}
            cases.append(run(case, lambda: torch.cumprod(tx, dim, **kw)))
        elif op == "cummax":
            cases.append(run(case, lambda: tuple(torch.cummax(tx, dim))))
        elif op == "cummin":
            cases.append(run(case, lambda: tuple(torch.cummin(tx, dim))))
        else:
            cases.append(run(case, lambda: torch.logcumsumexp(tx, dim)))
    # Long rows past a warp and with several zeros (cumprod) and ties.
    for dt in ["f64", "f32", "i64"]:
        for op in ["cumprod", "cummax", "cummin"]:
            vals = [float(r.choice([0, 1, 1, 1, -1, 2, 0.5])) for _ in range(150)]
            if dt == "i64":
                vals = [int(v) if v != 0.5 else 3 for v in vals]
            x = make(r, dt, [2, 75], layout="contig", vals=vals)
            tx = view(x)
            case = {"op": op, "x": x, "dim": 1}
            if op == "cumprod":
                cases.append(run(case, lambda: torch.cumprod(tx, 1)))
            else:
                fn = torch.cummax if op == "cummax" else torch.cummin
                cases.append(run(case, lambda: tuple(fn(tx, 1))))
    # any / all / count_nonzero / nonzero.
    for _ in range(120):
        op = r.choice(["any", "all", "any_dim", "all_dim", "count_nonzero", "nonzero"])
        dt = r.choice(ALL)
        nd = r.randint(0, 3)
        shape = rshape(r, nd, 0 if r.random() < 0.15 else 1, 4)
        vals = None
        if r.random() < 0.5 and dt != "bool":
            n = 200
            vals = [0 if r.random() < 0.7 else v for v in values(r, dt, n, True)]
        x = make(r, dt, shape, vals=vals)
        tx = view(x)
        case = {"op": op, "x": x}
        if op in ("any", "all"):
            fn = getattr(torch, op)
            cases.append(run(case, lambda: fn(tx)))
        elif op in ("any_dim", "all_dim"):
            dim = r.randint(-max(nd, 1), max(nd, 1) - 1)
            keep = r.random() < 0.5
            case.update({"dim": dim, "keepdim": keep})
            fn = torch.any if op == "any_dim" else torch.all
            cases.append(run(case, lambda: fn(tx, dim, keepdim=keep)))
        elif op == "count_nonzero":
            dims = None
            if nd > 0 and r.random() < 0.7:
                dims = r.sample(range(nd), r.randint(1, nd))
            case["dims"] = dims
            cases.append(run(case, lambda: torch.count_nonzero(tx, dim=dims)))
        else:
            cases.append(run(case, lambda: torch.nonzero(tx)))
    # index_add / index_copy / index_fill.
    for _ in range(200):
        op = r.choice(["index_add", "index_add", "index_copy", "index_fill"])
        dt = r.choice(ALL)
        nd = r.randint(0, 3)
        shape = rshape(r, nd, 1, 5)
        dim = r.randint(-max(nd, 1), max(nd, 1) - 1)
        d = dim % max(nd, 1)
        size = shape[d] if nd else 1
        x = make(r, dt, shape, special=r.random() < 0.3,
                 layout=r.choice(["contig", "transposed", "strided", "offset"]))
        tx = view(x)
        if op == "index_fill":
            idx = index_vec(r, size, r.randint(0, 4), False)
            idt = "i64"
            value = r.choice([1.5, -2.0, 0.0, 7, True]) if dt != "bool" else r.choice([True, False])
            if dt in ("i32", "i64", "u8"):
                value = r.choice([1, 3, 0])
            if dt == "u8" and r.random() < 0.2:
                value = -1
            ix = {"dtype": idt, "base": idx, "size": [len(idx)], "stride": [1], "offset": 0}
            if nd == 0 and r.random() < 0.5 and len(idx) == 1:
                ix["size"] = []
                ix["stride"] = []
            ti = view(ix)
            case = {"op": op, "x": x, "dim": dim, "index": ix, "value": value}
            cases.append(run(case, lambda: tx.index_fill(dim, ti, value)))
            continue
        n = r.randint(0, 5)
        idx = index_vec(r, size, n, op == "index_copy")
        n = len(idx)
        sshape = list(shape)
        if nd:
            sshape[d] = n
        elif n != 1:
            idx = index_vec(r, 1, 1, True)
            n = 1
        idt = "i64" if op == "index_copy" else r.choice(["i64", "i32"])
        ix = {"dtype": idt, "base": idx, "size": [n], "stride": [1], "offset": 0}
        src = make(r, dt, sshape, special=r.random() < 0.3)
        ts = view(src)
        ti = view(ix)
        case = {"op": op, "x": x, "dim": dim, "index": ix, "src": src}
        if op == "index_add":
            # alpha != 1 only where PyTorch's CPU adds with one rounding per
            # step (1-D, or integers): its multi-dim float path fuses
            # `a + alpha * b` in vectorised chunks and not in their tails.
            simple = nd <= 1 or dt in ("i32", "i64", "u8")
            alpha = 1 if r.random() < 0.7 or not simple else r.choice([2, -1, 3, 0.7])
            if dt in ("i32", "i64", "u8"):
                alpha = int(alpha)
            if dt == "bool":
                alpha = True
            case["alpha"] = alpha
            cases.append(run(case, lambda: tx.index_add(dim, ti, ts, alpha=alpha)))
        else:
            cases.append(run(case, lambda: tx.index_copy(dim, ti, ts)))
    # f16 index_add with many duplicates: per-step rounding.
    for dt in ["f16", "bf16", "f32"]:
        x = make(r, dt, [1, 3], layout="contig", vals=[2048.0, 1.0, 256.0])
        idx = [0] * 6
        ix = {"dtype": "i64", "base": idx, "size": [6], "stride": [1], "offset": 0}
        src = make(r, dt, [6, 3], layout="contig", vals=[1.0, 0.1, 0.3] * 6)
        tx, ti, ts = view(x), view(ix), view(src)
        case = {"op": "index_add", "x": x, "dim": 0, "index": ix, "src": src, "alpha": 1}
        cases.append(run(case, lambda: tx.index_add(0, ti, ts)))
    # scatter / scatter_value / scatter_reduce.
    for _ in range(260):
        op = r.choice(["scatter", "scatter_value", "scatter_reduce", "scatter_reduce"])
        dt = r.choice(ALL)
        nd = r.randint(1, 3)
        shape = rshape(r, nd, 1, 5)
        dim = r.randint(-nd, nd - 1)
        d = dim % nd
        ishape = [r.randint(0 if r.random() < 0.1 else 1, s) for s in shape]
        x = make(r, dt, shape, special=r.random() < 0.3,
                 layout=r.choice(["contig", "transposed", "strided", "offset"]))
        unique = op != "scatter_reduce"
        if unique:
            ishape[d] = min(ishape[d], shape[d])
        # index values: for each line along d, a sample (unique) or random.
        it = torch.zeros(ishape, dtype=torch.int64)
        if it.numel() > 0:
            lines = it.movedim(d, -1).reshape(-1, ishape[d])
            for row in range(lines.shape[0]):
                vals = index_vec(r, shape[d], ishape[d], unique)
                lines[row] = torch.tensor(vals, dtype=torch.int64)
            it = lines.reshape([s for k, s in enumerate(ishape) if k != d] + [ishape[d]]).movedim(-1, d)
        idt = r.choice(["i64", "i32"])
        ix = make(r, idt, ishape, layout="contig", vals=it.contiguous().reshape(-1).tolist())
        ti = view(ix)
        tx = view(x)
        case = {"op": op, "x": x, "dim": dim, "index": ix}
        if op == "scatter_value":
            value = r.choice([1.5, -2.0, 0, 5]) if dt in FLOATS else r.choice([0, 1, 3])
            if dt == "bool":
                value = r.choice([True, False])
            case["value"] = value
            cases.append(run(case, lambda: tx.scatter(dim, ti, value)))
            continue
        sshape = [s + r.randint(0, 1) for s in ishape]
        src = make(r, dt, sshape, special=r.random() < 0.3)
        ts = view(src)
        case["src"] = src
        if op == "scatter":
            cases.append(run(case, lambda: tx.scatter(dim, ti, ts)))
        else:
            red = r.choice(["sum", "prod", "mean", "amax", "amin"])
            inc = r.random() < 0.5
            case.update({"reduce": red, "include_self": inc})
            cases.append(run(case, lambda: tx.scatter_reduce(dim, ti, ts, red, include_self=inc)))
    # index_put.
    for _ in range(160):
        dt = r.choice(ALL)
        nd = r.randint(1, 3)
        shape = rshape(r, nd, 1, 4)
        x = make(r, dt, shape, special=r.random() < 0.3,
                 layout=r.choice(["contig", "transposed", "strided", "offset"]))
        tx = view(x)
        acc = r.random() < 0.5
        # which dims are indexed: a prefix of the dims list (None for the others).
        k = r.randint(1, nd)
        chosen = sorted(r.sample(range(k), r.randint(1, k)))
        use_bool = r.random() < 0.25 and len(chosen) == 1
        bshape = rshape(r, r.randint(0, 2), 1, 3)
        nb = math.prod(bshape)
        specs = []
        for j in range(k):
            if j not in chosen:
                specs.append(None)
                continue
            if use_bool:
                m = [r.random() < 0.5 for _ in range(shape[j])]
                specs.append({"dtype": "bool", "base": m, "size": [shape[j]], "stride": [1], "offset": 0})
            else:
                vals = [r.randint(-shape[j], shape[j] - 1) for _ in range(nb)]
                specs.append({"dtype": r.choice(["i64", "i32"]), "base": vals if vals else [0],
                              "size": bshape, "stride": [0] * len(bshape), "offset": 0})
                # contiguous strides
                st = []
                a = 1
                for s in reversed(bshape):
                    st.insert(0, a)
                    a *= s
                specs[-1]["stride"] = st
        idx = [None if s is None else view(s) for s in specs]
        if not acc:
            # No duplicate targets (PyTorch leaves the winner unspecified).
            try:
                hits = torch.ops.aten.index_put(torch.zeros(shape, dtype=torch.int64), idx,
                                                torch.tensor(1), True)
                if hits.numel() and hits.max().item() > 1:
                    continue
            except Exception:  # noqa: BLE001
                pass
        try:
            rshape_ = torch.zeros(shape)[tuple(slice(None) if i is None else i for i in idx)].shape
        except Exception:  # noqa: BLE001
            continue
        vshape = list(rshape_)
        if vshape and r.random() < 0.3:
            vshape[r.randrange(len(vshape))] = 1
        if r.random() < 0.2:
            vshape = vshape[1:]
        vals = make(r, dt, vshape, special=r.random() < 0.3)
        tv = view(vals)
        case = {"op": "index_put", "x": x, "indices": specs, "values": vals, "accumulate": acc}
        cases.append(run(case, lambda: torch.ops.aten.index_put(tx, idx, tv, acc)))
        case2 = {"op": "index_tensors", "x": x, "indices": specs}
        cases.append(run(case2, lambda: torch.ops.aten.index(tx, idx)))
    return cases


def main():
    path = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 6000
    cases = gen(seed)
    write_fixture(path, json.dumps({"seed": seed, "torch": torch.__version__, "cases": cases},
                                   separators=(",", ":")))
    print(f"{len(cases)} cases, {sum('error' in c for c in cases)} errors")


if __name__ == "__main__":
    main()
