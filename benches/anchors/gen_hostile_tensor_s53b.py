#!/usr/bin/env python3
"""Hostile layouts for the code of session 53's strata-tensor commits
(maximum/minimum laying their output out in PyTorch's dim order on the
CPU, the operands' dense-layout-keeping dtype conversion, p=2
vector_norm), replayed by
crates/strata-tensor/tests/suite/hostile_sweep_s53b.rs from
crates/strata-tensor/tests/data/hostile_tensor_s53b.json.gz.

Each operand is `as_strided(size, stride, offset)` of a 1-d base tensor
whose values are given as f64 numbers (strings for inf/nan/-0.0) in a
dtype: expanded (stride 0), overlapping (strides that revisit elements),
transposed, with an offset, 0-d, empty with huge other sizes (2^40 and
more), and operands that are views of the same base (aliasing inputs).
Ops: maximum, minimum (two operands of any dtypes, including int and bool
with float) and vector_norm with ord 2 (dims, keepdim). PyTorch's answer:
`error` (the exception's class) or `shape`, `dtype` and `out` (f64 bits
as 16 hex digits of each element, row-major). Where PyTorch fails only to
allocate an empty output of huge logical size (it asks for terabytes for
a [0, 2^40, 2^40] result), `alloc_failure` is set and `shape`/`dtype` are
the broadcast shape and promoted dtype, with no element.

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_hostile_tensor_s53b.py N SEED OUT.json.gz
"""
import json
import math
import struct
import sys

import torch
from fixture_io import write_fixture

torch.set_num_threads(1)
DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}
NAME = {v: k for k, v in DT.items()}
FLOATS = [0.0, -0.0, 1.0, -1.0, 2.5, -3.0, float("inf"), float("-inf"), float("nan"), 0.5, 7.0]


def enc(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0 and math.copysign(1, v) < 0:
        return "-0.0"
    return v


def hexbits(t):
    return "".join("%016x" % struct.unpack("<Q", struct.pack("<d", v))[0]
                   for v in t.double().reshape(-1).tolist())



def main():
    n, seed, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    g = torch.Generator().manual_seed(seed)
    r = lambda k: int(torch.randint(0, k, (1,), generator=g))

    def values(dt, k):
        if dt == "bool":
            return [float(r(2)) for _ in range(k)]
        if dt in ("i32", "i64", "u8"):
            return [float(r(9)) for _ in range(k)]
        return [FLOATS[r(len(FLOATS))] for _ in range(k)]

    def view(base_len, shape_hint=None):
        kind = ["contig", "expand", "overlap", "transpose", "offset", "zero_d", "empty_huge",
                "contig", "transpose"][r(9)]
        nd = r(3) + 1 if shape_hint is None else len(shape_hint)
        size = [r(3) + 1 for _ in range(nd)] if shape_hint is None else list(shape_hint)
        if kind == "zero_d":
            return [], [], r(base_len)
        if kind == "empty_huge":
            size = [0] + [1 << 40] * (nd - 1) if nd > 1 else [0]
            if shape_hint is not None:
                size = [0 if s == 0 else s for s in shape_hint]
            return size, [1] + [0] * (len(size) - 1), 0
        stride = []
        acc = 1
        for s in reversed(size):
            stride.insert(0, acc)
            acc *= s
        if kind == "expand":
            stride = [0 if r(2) else st for st in stride]
        elif kind == "overlap":
            stride = [r(2) for _ in stride]
        elif kind == "transpose" and nd >= 2:
            stride = list(reversed([st for st in reversed(stride)]))
            i, j = r(nd), r(nd)
            perm = list(range(nd))
            perm[i], perm[j] = perm[j], perm[i]
            # Column-major in a random dim order.
            acc = 1
            stride = [0] * nd
            for d in perm:
                stride[d] = acc
                acc *= size[d]
        # A huge size (from an empty first operand) is only ever expanded.
        # (A dim beside it gets stride 1 where its row-major stride is huge.)
        stride = [0 if s > 64 else (st if st < 1 << 40 else 1) for s, st in zip(size, stride)]
        off = r(3) if kind in ("offset", "overlap", "expand") else 0
        return size, stride, off

    def need(size, stride, off):
        if any(s == 0 for s in size):
            return off
        return off + sum((s - 1) * st for s, st in zip(size, stride)) + 1

    cases = []
    for _ in range(n):
        op = ["maximum", "minimum", "maximum", "minimum", "vector_norm"][r(5)]
        if op == "vector_norm":
            dt = ["f32", "f64", "f16", "bf16", "f32", "i64", "bool"][r(7)]
            size, stride, off = view(40)
            base = values(dt, max(need(size, stride, off), 1) + r(2))
            nd = len(size)
            dims = None if r(3) == 0 else sorted({r(nd + 1) - (nd + 1) // 2 for _ in range(r(3))}) if nd else (None if r(2) else [])
            keep = bool(r(2))
            case = {"op": op, "a": {"dtype": dt, "base": [enc(v) for v in base], "size": size,
                                    "stride": stride, "offset": off},
                    "dims": dims, "keepdim": keep}
            a = torch.tensor(base, dtype=torch.float64).to(DT[dt]).as_strided(size, stride, off)
            try:
                y = torch.linalg.vector_norm(a, 2, dim=dims, keepdim=keep)
            except Exception as e:  # noqa: BLE001
                case["error"] = type(e).__name__
            else:
                case.update(shape=list(y.shape), dtype=NAME[y.dtype], out=hexbits(y))
            cases.append(case)
            continue
        da = list(DT)[r(len(DT))]
        db = list(DT)[r(len(DT))] if r(2) else da
        sa = view(40)
        # The second operand: the same shape, broadcastable pieces of it, or 0-d.
        mode = r(4)
        if mode == 0:
            sb = view(40, sa[0])
        elif mode == 1:
            sb = view(40, [1 if r(2) else s for s in sa[0]])
        elif mode == 2:
            sb = ([], [], r(3))
        else:
            sb = view(40)
        same_base = r(4) == 0 and da == db
        base_a = values(da, max(need(*sa), 1) + 2)
        base_b = base_a if same_base else values(db, max(need(*sb), 1) + 2)
        if same_base and need(*sb) > len(base_a):
            base_b = base_a = base_a + values(da, need(*sb) - len(base_a))
        case = {"op": op,
                "a": {"dtype": da, "base": [enc(v) for v in base_a], "size": sa[0], "stride": sa[1],
                      "offset": sa[2]},
                "b": {"dtype": db, "base": [enc(v) for v in base_b], "size": sb[0], "stride": sb[1],
                      "offset": sb[2]},
                "same_base": same_base}
        ta = torch.tensor(base_a, dtype=torch.float64).to(DT[da])
        tb = ta if same_base else torch.tensor(base_b, dtype=torch.float64).to(DT[db])
        try:
            a = ta.as_strided(sa[0], sa[1], sa[2])
            b = tb.as_strided(sb[0], sb[1], sb[2])
            y = getattr(torch, op)(a, b)
        except Exception as e:  # noqa: BLE001
            if "can't allocate memory" in str(e):
                # PyTorch allocates an empty output of huge logical size in
                # its iterator's dim order and asks for terabytes; the
                # answer is still its shape and dtype, with no element.
                shape = torch.broadcast_shapes(a.shape, b.shape)
                case.update(alloc_failure=True, shape=list(shape),
                            dtype=NAME[torch.result_type(a, b)], out="")
            else:
                case["error"] = type(e).__name__
        else:
            case.update(shape=list(y.shape), dtype=NAME[y.dtype], out=hexbits(y))
        cases.append(case)
    write_fixture(path, json.dumps({"torch": torch.__version__, "seed": seed, "cases": cases},
                                   separators=(",", ":")))
    print(len(cases), sum("error" in c for c in cases), "errors")


if __name__ == "__main__":
    main()
