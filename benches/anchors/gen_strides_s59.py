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
        size, stride, offset = LAYOUTS[layout]
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
    ap.add_argument("--out", default="conformance/strides_s59.json")
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
