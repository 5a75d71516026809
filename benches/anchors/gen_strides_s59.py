#!/usr/bin/env python3
"""Session 59: the strides PyTorch gives each op's result for permuted,
transposed, expanded, sliced, size-1 and empty operands, as conformance
programs (FORMAT.md; group `fuzz_ops`, split `fuzz`) whose results are all
`"layout": "checked"`, so `project_conformance` compares their strides (on
every dim of size > 1), offsets and `is_contiguous` without
`STRATA_CONFORMANCE_STRIDES=1`.

Each program makes its operands with `as_strided` over a fresh 1-D input
(small integers, so every value is exact in every dtype), then runs one op.
The layouts: row-major, transposed, a 3-D permutation, a stepped slice (not
dense), a transposed slice, a row and a column expanded, size-1 dims with
odd strides, 4-D channels-last, and empty tensors with row-major, transposed and permuted
strides.

Usage (PyTorch on the CPU, one thread):
    OMP_NUM_THREADS=1 python3 benches/anchors/gen_strides_s59.py \\
        [--out conformance/strides_s59.json]
"""

import argparse
import json
import math
import platform

import torch

torch.set_num_threads(1)

NAME = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
        torch.bfloat16: "bf16", torch.int32: "i32", torch.int64: "i64",
        torch.uint8: "u8", torch.bool: "bool"}
TDT = {v: k for k, v in NAME.items()}
FLOATS = ("f32", "f64", "f16", "bf16")

# name -> (size, stride, offset): operands of 12 elements (or none).
LAYOUTS = {
    "rowmajor": ([3, 4], [4, 1], 0),
    "t": ([3, 4], [1, 3], 0),
    "perm3": ([4, 2, 3], [1, 12, 4], 0),
    "perm3b": ([2, 4, 3], [12, 1, 4], 0),
    "slice": ([3, 4], [8, 2], 1),
    "tslice": ([3, 4], [1, 6], 0),
    "expand_row": ([3, 4], [0, 1], 0),
    "expand_col": ([3, 4], [1, 0], 0),
    "size1": ([3, 1, 4], [1, 7, 3], 0),
    "cl4": ([2, 3, 2, 2], [12, 1, 6, 3], 0),
    "cl4_size1": ([2, 3, 1, 2], [6, 1, 99, 3], 0),
    "empty": ([0, 4], [4, 1], 0),
    "empty_t": ([0, 4], [1, 0], 0),
    "empty_perm": ([4, 0, 3], [1, 12, 4], 0),
    "empty_odd": ([2, 0, 3], [1, 1, 2], 0),
}

# Part 2's extra layouts (5-D channels-last-3d, and row-major 4-D/5-D
# partners); kept out of LAYOUTS so part 1's programs stay as they were.
LAYOUTS2 = {
    "rowmajor4": ([2, 3, 2, 2], [12, 4, 2, 1], 0),
    "rowmajor5": ([2, 3, 2, 2, 2], [24, 8, 4, 2, 1], 0),
    "cl5": ([2, 3, 2, 2, 2], [24, 1, 12, 6, 3], 0),
    "cl5_size1": ([2, 3, 1, 2, 2], [12, 1, 99, 6, 3], 0),
    "cl5_n1": ([1, 3, 2, 2, 2], [24, 1, 12, 6, 3], 0),
    "cl5_slice": ([2, 3, 2, 2, 2], [48, 2, 24, 12, 6], 0),
}
ALL_LAYOUTS = {**LAYOUTS, **LAYOUTS2}


def fmt(x, dt):
    if dt in FLOATS:
        x = float(x)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if dt == "bool":
        return bool(x)
    return int(x)


def extent(size, stride, offset):
    if 0 in size:
        return offset
    return offset + 1 + sum((s - 1) * st for s, st in zip(size, stride))


class Prog:
    def __init__(self, cid, doc):
        self.id, self.doc = cid, doc
        self.inputs, self.steps, self.env, self.order = [], [], {}, []
        self.tol = {}

    def operand(self, layout, dt, shift=0):
        size, stride, offset = ALL_LAYOUTS[layout]
        n = max(extent(size, stride, offset), 1)
        base = f"b{len(self.order)}"
        vals = [((i * 7 + shift) % 11) - 5 for i in range(n)]
        if dt == "bool":
            vals = [v > 0 for v in vals]
        elif dt == "u8":
            vals = [v + 5 for v in vals]
        t = torch.tensor(vals).to(TDT[dt])
        self.inputs.append({"name": base, "shape": [n], "dtype": dt,
                            "data": [fmt(v, dt) for v in t.tolist()]})
        self.env[base] = t
        self.order.append(base)
        v = f"v{len(self.order)}"
        self.step("as_strided", [base, size, stride, offset], v,
                  t.as_strided(size, stride, offset))
        return v

    def step(self, op, args, out, value):
        self.steps.append({"op": op, "args": args, "out": out})
        self.env[out] = value
        self.order.append(out)

    def finish(self):
        expect, first = {}, {}
        for n in self.order:
            t = self.env[n]
            sid = t.untyped_storage()._cdata
            first.setdefault(sid, n)
            dt = NAME[t.dtype]
            rec = {"shape": list(t.shape), "dtype": dt,
                   "data": [fmt(x, dt) for x in t.reshape(-1).tolist()],
                   "strides": list(t.stride()), "offset": t.storage_offset(),
                   "contiguous": t.is_contiguous(), "storage": first[sid],
                   "layout": "checked"}
            if n in self.tol:
                rec["tol"] = self.tol[n]
            expect[n] = rec
        dts = sorted({e["dtype"] for e in expect.values()})
        return {"id": self.id, "doc": self.doc, "tags": ["noncontig"],
                "ops": sorted({s["op"] for s in self.steps}), "dtypes": dts,
                "inputs": self.inputs, "steps": self.steps, "expect": expect}


def unary_cases():
    """(op, args after the operand, torch function, dtype, tolerance?)"""
    return [
        ("neg", [], lambda x: x.neg(), "f32", False),
        ("abs", [], lambda x: x.abs(), "i32", False),
        ("relu", [], lambda x: x.relu(), "f32", False),
        ("sign", [], lambda x: x.sign(), "f32", False),
        ("exp", [], lambda x: x.exp(), "f32", True),
        ("sqrt", [], lambda x: x.sqrt(), "f32", True),
        ("add", [{"int": 1}], lambda x: x + 1, "f32", False),
        ("mul", [{"float": 2.5}], lambda x: x * 2.5, "i64", False),
        ("lt", [{"int": 0}], lambda x: x.lt(0), "f32", False),
        ("clamp", [{"int": -1}, {"int": 2}], lambda x: x.clamp(-1, 2), "f32", False),
        ("pow", [{"int": 2}], lambda x: x.pow(2), "f32", False),
        ("to_dtype", ["f64"], lambda x: x.to(torch.float64), "f32", False),
        ("to_dtype", ["f16"], lambda x: x.to(torch.float16), "i32", False),
        ("to_dtype", ["i64"], lambda x: x.to(torch.int64), "u8", False),
        ("to_dtype", ["bool"], lambda x: x.to(torch.bool), "f32", False),
        ("clone", [], lambda x: x.clone(), "f32", False),
        ("contiguous", [], lambda x: x.contiguous(), "f32", False),
        ("zeros_like", [], lambda x: torch.zeros_like(x), "f32", False),
        ("ones_like", ["i32"], lambda x: torch.ones_like(x, dtype=torch.int32), "f32", False),
        ("full_like", [{"int": 3}, None], lambda x: torch.full_like(x, 3), "f32", False),
        ("sum", [[1], False], lambda x: x.sum(1), "f32", False),
        ("sum", [[0], True], lambda x: x.sum(0, keepdim=True), "i32", False),
        ("sum", [[-1], True], lambda x: x.sum(-1, keepdim=True), "u8", False),
        ("sum", [[], False], lambda x: x.sum(()), "f32", False),
        ("mean", [[0], True], lambda x: x.mean(0, keepdim=True), "f32", True),
        ("max", [1, True], lambda x: x.max(1, keepdim=True), "f32", False),
        ("argmax", [0, True], lambda x: x.argmax(0, keepdim=True), "f32", False),
        ("cumsum", [1, None], lambda x: x.cumsum(1), "f32", False),
        ("cumsum", [0, "i64"], lambda x: x.cumsum(0, dtype=torch.int64), "i32", False),
        ("softmax", [1, None], lambda x: x.softmax(1), "f32", True),
        ("log_softmax", [0, None], lambda x: x.log_softmax(0), "f32", True),
        ("triu", [0], lambda x: x.triu(0), "f32", False),
        ("var", [[1], 1, True], lambda x: x.var(1, correction=1, keepdim=True), "f32", True),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--part", type=int, default=1, choices=(1, 2),
                    help="1: the first 576 programs (conformance/strides_s59.json); "
                         "2: 5-D channels-last and the ops of round 2 (conformance/strides_s59b.json)")
    args = ap.parse_args()
    if args.part == 2:
        return part2(args.out or "conformance/strides_s59b.json")
    args.out = args.out or "conformance/strides_s59.json"
    cases = []

    def add(p):
        cases.append(p.finish())

    for op, extra, fn, dt, tol in unary_cases():
        for lay in LAYOUTS:
            size = LAYOUTS[lay][0]
            nd = len(size)
            if op in ("triu",) and nd != 2:
                continue
            if op in ("max", "argmax") and 0 in size:
                continue
            p = Prog(f"fuzz_ops.strides_s59_{op}_{len(cases):04d}",
                     f"{op} of a {lay} operand: PyTorch's result strides")
            x = p.operand(lay, dt)
            xt = p.env[x]
            try:
                r = fn(xt)
            except RuntimeError:
                continue
            if isinstance(r, tuple):
                continue
            out = "r"
            p.step(op, [x] + extra, out, r)
            if tol and NAME[r.dtype] in FLOATS:
                p.tol[out] = {"rtol": 1e-5, "atol": 1e-6}
            add(p)

    # max along a dim: both results (values and indices)
    for lay in ("rowmajor", "t", "perm3", "slice", "size1"):
        p = Prog(f"fuzz_ops.strides_s59_maxdim_{len(cases):04d}", f"max(dim) of a {lay} operand")
        x = p.operand(lay, "f32")
        v, i = p.env[x].max(1)
        p.steps.append({"op": "max", "args": [x, 1, False], "out": ["mv", "mi"]})
        p.env["mv"], p.env["mi"] = v, i
        p.order += ["mv", "mi"]
        add(p)

    # binary ops: pairs of layouts of the same shape, and broadcasts
    pairs = [("t", "rowmajor"), ("rowmajor", "t"), ("t", "t"), ("t", "tslice"),
             ("slice", "t"), ("expand_row", "t"), ("expand_col", "rowmajor"),
             ("expand_row", "expand_col"), ("empty", "empty_t"), ("empty_t", "empty_t"),
             ("tslice", "tslice"), ("perm3", "perm3"), ("perm3", "perm3b"), ("cl4", "cl4"),
             ("cl4_size1", "cl4_size1")]
    for a, b in pairs:
        if LAYOUTS[a][0] != LAYOUTS[b][0]:
            continue
        for op, fn, dta, dtb in [("add", torch.add, "f32", "f32"), ("mul", torch.mul, "i32", "f32"),
                                 ("maximum", torch.maximum, "f64", "f64"),
                                 ("lt", torch.lt, "f32", "i64")]:
            p = Prog(f"fuzz_ops.strides_s59_{op}_{len(cases):04d}", f"{op} of {a} and {b} operands")
            x = p.operand(a, dta)
            y = p.operand(b, dtb, shift=3)
            p.step(op, [x, y], "r", fn(p.env[x], p.env[y]))
            add(p)
        # where(cond, x, y)
        p = Prog(f"fuzz_ops.strides_s59_where_{len(cases):04d}", f"where of {a}, {b}, {b} operands")
        c = p.operand(a, "bool")
        x = p.operand(b, "f32", shift=1)
        y = p.operand(b, "f32", shift=2)
        p.step("where", [c, x, y], "r", torch.where(p.env[c], p.env[x], p.env[y]))
        add(p)

    # broadcasting a transposed operand against a row
    for lay in ("t", "tslice", "rowmajor", "empty_t"):
        p = Prog(f"fuzz_ops.strides_s59_bcast_{len(cases):04d}", f"add of a {lay} operand and a row")
        x = p.operand(lay, "f32")
        y = p.operand("expand_row", "f32", shift=5)
        row = "row"
        p.step("select", [y, 0, 0], row, p.env[y].select(0, 0))
        p.step("add", [x, row], "r", p.env[x] + p.env[row])
        add(p)

    # cat, stack, index ops, matmul
    for lay in ("rowmajor", "t", "slice", "perm3", "empty_t", "empty_perm", "cl4"):
        for op in ("cat", "stack"):
            p = Prog(f"fuzz_ops.strides_s59_{op}_{len(cases):04d}", f"{op} of two {lay} operands")
            x = p.operand(lay, "f32")
            y = p.operand(lay, "f32", shift=4)
            fn = torch.cat if op == "cat" else torch.stack
            p.step(op, [[x, y], 1], "r", fn([p.env[x], p.env[y]], 1))
            add(p)
        if 0 in LAYOUTS[lay][0]:
            continue
        p = Prog(f"fuzz_ops.strides_s59_index_select_{len(cases):04d}", f"index_select of a {lay} operand")
        x = p.operand(lay, "f32")
        idx = "idx"
        p.inputs.append({"name": idx, "shape": [2], "dtype": "i64", "data": [1, 0]})
        p.env[idx] = torch.tensor([1, 0])
        p.order.append(idx)
        p.step("index_select", [x, 1, idx], "r", p.env[x].index_select(1, p.env[idx]))
        add(p)
        p = Prog(f"fuzz_ops.strides_s59_masked_fill_{len(cases):04d}", f"masked_fill of a {lay} operand")
        x = p.operand(lay, "f32")
        m = p.operand(lay, "bool", shift=2)
        p.step("masked_fill", [x, m, {"int": 7}], "r", p.env[x].masked_fill(p.env[m], 7))
        add(p)
    for a, b in [("t", "rowmajor"), ("rowmajor", "t"), ("t", "t"), ("slice", "t")]:
        p = Prog(f"fuzz_ops.strides_s59_mm_{len(cases):04d}", f"mm of {a} and transposed {b}")
        x = p.operand(a, "f32")
        y = p.operand(b, "f32", shift=1)
        yt = "yt"
        p.step("t", [y], yt, p.env[y].t())
        p.step("mm", [x, yt], "r", p.env[x].mm(p.env[yt]))
        add(p)

    doc = {"format": "strata-conformance", "format_version": 1,
           "torch_version": torch.__version__, "python_version": platform.python_version(),
           "oracle": "PyTorch on the CPU, one thread",
           "generator": "benches/anchors/gen_strides_s59.py",
           "group": "fuzz_ops", "split": "fuzz", "count": len(cases), "cases": cases}
    with open(args.out, "w") as f:
        json.dump(doc, f)
    print(f"wrote {len(cases)} cases to {args.out}")


def write(cases, out):
    doc = {"format": "strata-conformance", "format_version": 1,
           "torch_version": torch.__version__, "python_version": platform.python_version(),
           "oracle": "PyTorch on the CPU, one thread",
           "generator": "benches/anchors/gen_strides_s59.py",
           "group": "fuzz_ops", "split": "fuzz", "count": len(cases), "cases": cases}
    with open(out, "w") as f:
        json.dump(doc, f)
    print(f"wrote {len(cases)} cases to {out}")


def part2(out):
    """Round 2: 5-D channels-last-3d operands through the element-wise ops,
    conversions, `*_like`, `cat`/`stack`; reductions along every dim with and
    without keepdim over permuted and channels-last operands; ops along a dim
    along every dim; layer_norm, index ops, broadcasting `where`, matrix
    products of transposed operands, triu/tril of batches, embedding,
    cross_entropy(reduction='none'), type promotion and in-place ops."""
    cases = []

    def prog(kind, doc):
        return Prog(f"fuzz_ops.strides_s59b_{kind}_{len(cases):04d}", doc)

    def add(p):
        cases.append(p.finish())

    def literal(p, name, vals, dt, shape):
        p.inputs.append({"name": name, "shape": shape, "dtype": dt,
                         "data": [fmt(v, dt) for v in vals]})
        p.env[name] = torch.tensor(vals, dtype=TDT[dt]).reshape(shape)
        p.order.append(name)
        return name

    def single(kind, doc, lay, dt, op, extra, fn, tol=False):
        p = prog(kind, doc)
        x = p.operand(lay, dt)
        try:
            r = fn(p.env[x])
        except RuntimeError:
            return
        if isinstance(r, tuple):
            p.steps.append({"op": op, "args": [x] + extra, "out": ["r", "ri"]})
            p.env["r"], p.env["ri"] = r
            p.order += ["r", "ri"]
        else:
            p.step(op, [x] + extra, "r", r)
            if tol and NAME[r.dtype] in FLOATS:
                p.tol["r"] = {"rtol": 1e-5, "atol": 1e-6}
        add(p)

    # 1. 5-D channels-last-3d through part 1's one-operand programs
    five = ("cl5", "cl5_size1", "cl5_n1", "cl5_slice", "rowmajor5")
    for op, extra, fn, dt, tol in unary_cases():
        if op in ("triu", "max", "argmax"):
            continue
        for lay in five:
            single(op, f"{op} of a {lay} operand: PyTorch's result strides", lay, dt, op,
                   extra, fn, tol)
    # element-wise pairs with 4-D and 5-D channels-last operands, type promotion
    pairs = [("cl5", "cl5"), ("cl5", "rowmajor5"), ("rowmajor5", "cl5"), ("cl5_slice", "cl5"),
             ("cl5_size1", "cl5_size1"), ("cl4", "rowmajor4"), ("rowmajor4", "cl4"),
             ("t", "rowmajor"), ("perm3", "perm3"), ("slice", "slice")]
    for a, b in pairs:
        for op, fn, dta, dtb in [("add", torch.add, "f32", "f32"), ("mul", torch.mul, "i32", "f64"),
                                 ("sub", torch.sub, "u8", "i64"), ("div", torch.div, "i32", "i32"),
                                 ("maximum", torch.maximum, "bf16", "f32"),
                                 ("eq", torch.eq, "f16", "i32")]:
            p = prog(op, f"{op} of {a} ({dta}) and {b} ({dtb}) operands")
            x = p.operand(a, dta)
            y = p.operand(b, dtb, shift=3)
            r = fn(p.env[x], p.env[y])
            p.step(op, [x, y], "r", r)
            if op == "div":
                p.tol["r"] = {"rtol": 1e-6, "atol": 1e-7}
            add(p)
        p = prog("where", f"where of {a}, {b}, {b} operands")
        c = p.operand(a, "bool")
        x = p.operand(b, "f32", shift=1)
        y = p.operand(b, "f32", shift=2)
        p.step("where", [c, x, y], "r", torch.where(p.env[c], p.env[x], p.env[y]))
        add(p)
    # cat/stack of 5-D operands, and mixed formats
    for a, b in [("cl5", "cl5"), ("cl5", "rowmajor5"), ("rowmajor5", "cl5"), ("cl5_n1", "cl5_n1"),
                 ("cl5_slice", "cl5_slice"), ("cl5_size1", "cl5_size1"), ("cl4", "rowmajor4"),
                 ("rowmajor4", "cl4")]:
        for op in ("cat", "stack"):
            for d in (0, 1, -1):
                p = prog(op, f"{op} of {a} and {b} operands along {d}")
                x = p.operand(a, "f32")
                y = p.operand(b, "f32", shift=4)
                fn = torch.cat if op == "cat" else torch.stack
                try:
                    r = fn([p.env[x], p.env[y]], d)
                except RuntimeError:
                    continue
                p.step(op, [[x, y], d], "r", r)
                add(p)

    # 2. reductions along every dim, with and without keepdim
    red_lays = ("t", "perm3", "perm3b", "slice", "size1", "cl4", "cl5", "expand_col")
    for lay in red_lays:
        nd = len(ALL_LAYOUTS[lay][0])
        for d in range(nd):
            for keep in (False, True):
                single("sum", f"sum({d}, {keep}) of {lay}", lay, "f32", "sum", [[d], keep],
                       lambda x: x.sum(d, keepdim=keep))
                single("mean", f"mean({d}, {keep}) of {lay}", lay, "f64", "mean", [[d], keep],
                       lambda x: x.mean(d, keepdim=keep), True)
                single("max", f"max({d}, {keep}) of {lay}", lay, "f32", "max", [d, keep],
                       lambda x: x.max(d, keepdim=keep))
                single("argmax", f"argmax({d}, {keep}) of {lay}", lay, "i32", "argmax", [d, keep],
                       lambda x: x.argmax(d, keepdim=keep))
                single("var", f"var({d}, {keep}) of {lay}", lay, "f32", "var", [[d], 1, keep],
                       lambda x: x.var(d, correction=1, keepdim=keep), True)
                single("logsumexp", f"logsumexp({d}, {keep}) of {lay}", lay, "f32", "logsumexp",
                       [[d], keep], lambda x: x.logsumexp(d, keepdim=keep), True)
                single("vector_norm", f"vector_norm(2, {d}, {keep}) of {lay}", lay, "f32",
                       "vector_norm", [{"int": 2}, [d], keep],
                       lambda x: torch.linalg.vector_norm(x, 2, d, keepdim=keep), True)
        if nd >= 3:
            for keep in (False, True):
                single("sum", f"sum((0, 2), {keep}) of {lay}", lay, "f32", "sum", [[0, 2], keep],
                       lambda x: x.sum((0, 2), keepdim=keep))
        # ops along a dim
        for d in range(nd):
            single("cumsum", f"cumsum({d}) of {lay}", lay, "f32", "cumsum", [d, None],
                   lambda x: x.cumsum(d))
            single("softmax", f"softmax({d}) of {lay}", lay, "f32", "softmax", [d, None],
                   lambda x: x.softmax(d), True)
            single("log_softmax", f"log_softmax({d}) of {lay}", lay, "f32", "log_softmax",
                   [d, None], lambda x: x.log_softmax(d), True)

    # 3. layer_norm over the last dim(s)
    for lay in ("t", "perm3", "cl4", "cl5", "slice"):
        size = ALL_LAYOUTS[lay][0]
        for k in (1, 2):
            p = prog("layer_norm", f"layer_norm over the last {k} dims of {lay}")
            x = p.operand(lay, "f32")
            ns = size[-k:]
            n = math.prod(ns)
            w = literal(p, "w", [1.0 + 0.5 * (i % 3) for i in range(n)], "f32", ns)
            b = literal(p, "bias", [0.25 * (i % 4) for i in range(n)], "f32", ns)
            r = torch.nn.functional.layer_norm(p.env[x], ns, p.env[w], p.env[b], 1e-5)
            p.step("layer_norm", [x, ns, w, b, 1e-5], "r", r)
            p.tol["r"] = {"rtol": 1e-5, "atol": 1e-5}
            add(p)

    # 4. index ops: gather/scatter_add/index_select/masked ops over strided operands
    for lay in ("t", "perm3", "cl4", "cl5", "slice"):
        size = ALL_LAYOUTS[lay][0]
        nd = len(size)
        for d in range(nd):
            p = prog("gather", f"gather({d}) of {lay} with a row-major index")
            x = p.operand(lay, "f32")
            n = math.prod(size)
            idx = literal(p, "idx", [(i * 5) % size[d] for i in range(n)], "i64", size)
            p.step("gather", [x, d, idx], "r", p.env[x].gather(d, p.env[idx]))
            add(p)
            p = prog("gather", f"gather({d}) of {lay} with an index of the same strides")
            x = p.operand(lay, "f32")
            ib = literal(p, "ib", [(i * 5) % size[d] for i in range(256)], "i64", [256])
            iv = "iv"
            st, off = ALL_LAYOUTS[lay][1], ALL_LAYOUTS[lay][2]
            p.step("as_strided", [ib, size, st, off], iv, p.env[ib].as_strided(size, st, off))
            p.step("gather", [x, d, iv], "r", p.env[x].gather(d, p.env[iv]))
            add(p)
            p = prog("scatter_add", f"scatter_add({d}) into {lay}")
            x = p.operand(lay, "f32")
            src = p.operand(lay, "f32", shift=2)
            idx = literal(p, "idx", [(i * 3) % size[d] for i in range(n)], "i64", size)
            p.step("scatter_add", [x, d, idx, src], "r",
                   p.env[x].scatter_add(d, p.env[idx], p.env[src]))
            add(p)
            p = prog("index_select", f"index_select({d}) of {lay}")
            x = p.operand(lay, "f32")
            idx = literal(p, "idx", [1, 0, 1], "i64", [3])
            p.step("index_select", [x, d, idx], "r", p.env[x].index_select(d, p.env[idx]))
            add(p)
        p = prog("masked_fill", f"masked_fill of {lay} with a broadcast mask")
        x = p.operand(lay, "f32")
        m = literal(p, "m", [i % 2 == 0 for i in range(size[-1])], "bool", [size[-1]])
        p.step("masked_fill", [x, m, {"float": 1.5}], "r", p.env[x].masked_fill(p.env[m], 1.5))
        add(p)
        p = prog("masked_scatter", f"masked_scatter into {lay}")
        x = p.operand(lay, "f32")
        m = p.operand(lay, "bool", shift=1)
        src = literal(p, "src", [float(i) for i in range(math.prod(size))], "f32", size)
        p.step("masked_scatter", [x, m, src], "r", p.env[x].masked_scatter(p.env[m], p.env[src]))
        add(p)

    # 5. where with broadcasting
    for a, b, c in [("t", "expand_row", "expand_col"), ("expand_col", "t", "rowmajor"),
                    ("rowmajor", "t", "tslice"), ("cl4", "rowmajor4", "cl4"),
                    ("cl5", "cl5", "rowmajor5")]:
        p = prog("where", f"where of {a}, {b}, {c}")
        co = p.operand(a, "bool")
        x = p.operand(b, "f32", shift=1)
        y = p.operand(c, "i32", shift=2)
        p.step("where", [co, x, y], "r", torch.where(p.env[co], p.env[x], p.env[y]))
        add(p)
    for lay in ("t", "cl4", "cl5"):
        size = ALL_LAYOUTS[lay][0]
        p = prog("where", f"where of a {lay} condition and a broadcast row")
        co = p.operand(lay, "bool")
        row = literal(p, "row", [float(i) for i in range(size[-1])], "f32", [size[-1]])
        y = p.operand(lay, "f32", shift=2)
        p.step("where", [co, row, y], "r", torch.where(p.env[co], p.env[row], p.env[y]))
        add(p)

    # 6. matrix products of transposed operands
    for a, b in [("t", "rowmajor"), ("t", "t"), ("tslice", "slice"), ("slice", "t")]:
        for op in ("matmul", "mm"):
            p = prog(op, f"{op} of {a} and transposed {b}")
            x = p.operand(a, "f32")
            y = p.operand(b, "f32", shift=1)
            p.step("t", [y], "yt", p.env[y].t())
            p.step(op, [x, "yt"], "r", getattr(p.env[x], op)(p.env["yt"]))
            add(p)
        p = prog("addmm", f"addmm of a transposed bias, transposed {a} and {b}")
        bb = literal(p, "bb", [float(i % 5) for i in range(16)], "f32", [4, 4])
        p.step("t", [bb], "bias", p.env[bb].t())
        x = p.operand(a, "f32")
        y = p.operand(b, "f32", shift=1)
        p.step("t", [x], "xt", p.env[x].t())
        p.step("addmm", ["bias", "xt", y], "r",
               torch.addmm(p.env["bias"], p.env["xt"], p.env[y]))
        add(p)
    for a, b in [("perm3", "perm3"), ("perm3b", "perm3b"), ("perm3", "perm3b")]:
        for op in ("bmm", "matmul"):
            p = prog(op, f"{op} of {a} and transposed {b}")
            x = p.operand(a, "f32")
            y = p.operand(b, "f32", shift=1)
            p.step("transpose", [y, 1, 2], "yt", p.env[y].transpose(1, 2))
            try:
                r = getattr(p.env[x], op)(p.env["yt"])
            except RuntimeError:
                continue
            p.step(op, [x, "yt"], "r", r)
            add(p)
    p = prog("matmul", "matmul of a perm3 batch and a transposed matrix")
    x = p.operand("perm3", "f32")
    y = p.operand("t", "f32", shift=1)
    p.step("narrow", [y, 1, 0, 3], "yn", p.env[y].narrow(1, 0, 3))
    p.step("matmul", [x, "yn"], "r", p.env[x].matmul(p.env["yn"]))
    add(p)

    # 7. triu/tril of matrices and batches
    for lay in ("t", "tslice", "slice", "perm3", "perm3b", "cl4", "cl5"):
        for op in ("triu", "tril"):
            single(op, f"{op} of {lay}", lay, "f32", op, [1],
                   lambda x: getattr(x, op)(1))

    # 8. embedding with strided weights and indices; cross_entropy without reduction
    for wl in ("t", "slice", "rowmajor"):
        p = prog("embedding", f"embedding of a {wl} weight, a transposed index")
        w = p.operand(wl, "f32")
        ib = literal(p, "ib", [2, 0, 1, 1, 0, 2], "i64", [2, 3])
        p.step("t", [ib], "it", p.env[ib].t())
        p.step("embedding", ["it", w], "r", torch.nn.functional.embedding(p.env["it"], p.env[w]))
        add(p)
    for lay, tgt_shape in [("t", [3]), ("slice", [3]), ("perm3b", [2, 3]), ("cl4", [2, 2, 2])]:
        size = ALL_LAYOUTS[lay][0]
        p = prog("cross_entropy", f"cross_entropy(reduction='none') of {lay} logits")
        x = p.operand(lay, "f32")
        n = math.prod(tgt_shape)
        tg = literal(p, "tg", [(i * 2) % size[1] for i in range(n)], "i64", tgt_shape)
        r = torch.nn.functional.cross_entropy(p.env[x], p.env[tg], reduction="none")
        p.step("cross_entropy", [x, tg, None, -100, "none", 0.0], "r", r)
        p.tol["r"] = {"rtol": 1e-5, "atol": 1e-6}
        add(p)

    # 9. in-place ops (their result is the operand itself: the replay binds
    # no output, and the operand's strides and values are checked)
    for lay in ("t", "slice", "perm3", "cl4", "cl5", "size1"):
        for op, extra, fn in [("add_", [{"int": 2}], lambda x: x.add_(2)),
                              ("relu_", [], lambda x: x.relu_()),
                              ("clamp_", [{"int": -1}, {"int": 2}], lambda x: x.clamp_(-1, 2)),
                              ("mul_", ["other"], None)]:
            p = prog(op, f"{op} of a {lay} operand")
            x = p.operand(lay, "f32")
            if op == "mul_":
                o = p.operand(lay, "f32", shift=3)
                r = p.env[x].mul_(p.env[o])
                extra = [o]
            else:
                r = fn(p.env[x])
            assert r.stride() == p.env[x].stride() and r.data_ptr() == p.env[x].data_ptr()
            p.steps.append({"op": op, "args": [x] + extra, "out": None})
            add(p)
    write(cases, out)


if __name__ == "__main__":
    main()
