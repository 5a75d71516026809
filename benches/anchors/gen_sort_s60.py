#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread) for
crates/strata-tensor/tests/suite/sort.rs, written to
crates/strata-tensor/tests/data/sort_s60.json.gz: `sort`, `argsort`, `msort`,
`topk`, `kthvalue`, `median`/`nanmedian` (along a dim and of every element)
on every strata dtype, over views (contiguous, transposed, permuted,
expanded with stride 0, stepped slices with an offset) of inputs with many
ties, NaN, +-inf and signed zeros.

Each case: the base storage (float data as the hex bits of f64 values, exact
in the dtype; integers and bools as JSON integers), the view (size, stride,
offset), the op and its arguments, and PyTorch's results: values (as the
data), indices, shapes and strides. `exact_indices` is false where PyTorch
leaves the index among equal elements unspecified (topk, kthvalue, median
with ties; sort with stable=False along a dim of more than 16 elements,
where PyTorch's CPU kernel calls std::sort; msort likewise; median of every
element, whose -0.0 may be another tie's 0.0: values are compared as values there): the test then checks that each index points at an element equal
to the value, and compares strata's indices with `stable_indices`: those
a stable sort gives, which strata documents for these cases.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_sort_s60.py \\
        crates/strata-tensor/tests/data/sort_s60.json.gz
"""
import json
import struct
import sys

import torch

from fixture_io import write_fixture

torch.set_num_threads(1)

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}
FLOAT = ("f32", "f64", "f16", "bf16")


def hexes(t):
    return "".join("%016x" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]
                   for v in t.double().reshape(-1).tolist())


def encode(t, dt):
    if dt in FLOAT:
        return {"hex": hexes(t)}
    return {"ints": [int(v) for v in t.long().reshape(-1).tolist()]}


def base_data(dt, n, g, kind):
    """n elements of dtype dt: `ties` draws from a few values, `special`
    mixes NaN, +-inf and signed zeros into them, `wide` spreads them."""
    if dt == "bool":
        return torch.rand(n, generator=g) < 0.5
    if kind == "wide":
        if dt in FLOAT:
            v = torch.randn(n, generator=g, dtype=torch.float64) * 100
        else:
            lo, hi = {"u8": (0, 256), "i32": (-2**31, 2**31), "i64": (-2**62, 2**62)}[dt]
            v = torch.randint(lo, hi, (n,), generator=g, dtype=torch.int64)
            return v.to(DT[dt])
    else:
        v = torch.randint(-3, 4, (n,), generator=g).double()
        if dt == "u8":
            v = v + 3
        if kind == "special" and dt in FLOAT:
            pick = torch.randint(0, 8, (n,), generator=g)
            v = torch.where(pick == 0, torch.tensor(float("nan"), dtype=torch.float64), v)
            v = torch.where(pick == 1, torch.tensor(float("inf"), dtype=torch.float64), v)
            v = torch.where(pick == 2, torch.tensor(float("-inf"), dtype=torch.float64), v)
            v = torch.where(pick == 3, torch.tensor(-0.0, dtype=torch.float64), v)
            v = torch.where(pick == 4, torch.tensor(0.0, dtype=torch.float64), v)
        if dt in FLOAT:
            v = v * 0.5
    return v.to(DT[dt])


def views(shape):
    """(name, base numel, size, stride, offset) views of `shape`."""
    nd = len(shape)
    out = []
    numel = 1
    for s in shape:
        numel *= s
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.insert(0, acc)
        acc *= s
    out.append(("contiguous", numel, list(shape), strides, 0))
    if nd >= 2:
        # The transpose of a contiguous tensor of the swapped shape.
        sw = list(shape)
        sw[-1], sw[-2] = sw[-2], sw[-1]
        st = []
        acc = 1
        for s in reversed(sw):
            st.insert(0, acc)
            acc *= s
        tst = list(st)
        tst[-1], tst[-2] = tst[-2], tst[-1]
        out.append(("transposed", numel, list(shape), tst, 0))
        # Expanded: stride 0 along dim 0 (the base holds one slice).
        out.append(("expanded", numel // max(shape[0], 1) if shape[0] else 0, list(shape),
                    [0] + strides[1:], 0))
    if nd >= 1:
        # Every other element, from offset 3.
        out.append(("stepped", 3 + 2 * numel, list(shape), [2 * s for s in strides], 3))
    if nd == 3:
        # permute(2, 0, 1) of a contiguous [s1, s2, s0] tensor.
        s0, s1, s2 = shape
        out.append(("permuted", numel, list(shape), [1, s2 * s0, s0], 0))
    return out


def run(op, x, args):
    if op == "sort":
        return torch.sort(x, dim=args["dim"], descending=args["descending"], stable=args["stable"])
    if op == "argsort":
        return (None, torch.argsort(x, dim=args["dim"], descending=args["descending"],
                                    stable=args["stable"]))
    if op == "msort":
        return (torch.msort(x), None)
    if op == "topk":
        return torch.topk(x, args["k"], dim=args["dim"], largest=args["largest"],
                          sorted=args["sorted"])
    if op == "kthvalue":
        return torch.kthvalue(x, args["k"], dim=args["dim"], keepdim=args["keepdim"])
    if op == "median_dim":
        return torch.median(x, dim=args["dim"], keepdim=args["keepdim"])
    if op == "nanmedian_dim":
        return torch.nanmedian(x, dim=args["dim"], keepdim=args["keepdim"])
    if op == "median":
        return (torch.median(x), None)
    if op == "nanmedian":
        return (torch.nanmedian(x), None)
    raise SystemExit(op)


def stable_reference(op, x, args):
    """The indices strata documents where PyTorch leaves them unspecified:
    those of a stable sort (PyTorch's own `stable=True`), the first `k` for
    topk, position `k - 1` for kthvalue, the lower median's position (the
    first NaN where median sees one; nanmedian's median of the non-NaN
    elements, the first NaN of an all-NaN slice)."""
    if x.dim() == 0:
        return torch.zeros((), dtype=torch.int64)
    d = args["dim"]
    if op in ("sort", "argsort"):
        return torch.sort(x, dim=d, descending=args["descending"], stable=True).indices
    if op == "topk":
        s = torch.sort(x, dim=d, descending=args["largest"], stable=True).indices
        return s.narrow(d, 0, args["k"])
    s = torch.sort(x, dim=d, stable=True).indices
    n = x.shape[d]
    if op == "kthvalue":
        pos = torch.full_like(s.narrow(d, 0, 1), args["k"] - 1)
    else:
        nans = x.isnan().sum(dim=d, keepdim=True) if x.is_floating_point() else \
            torch.zeros_like(s.narrow(d, 0, 1))
        m = n - nans
        if op == "median_dim":
            pos = torch.where(nans > 0, m, (m - 1) // 2)
        else:
            pos = torch.where(m == 0, torch.zeros_like(m), (m - 1) // 2)
    r = s.gather(d, pos)
    return r if args["keepdim"] else r.squeeze(d)


def op_args(op, shape, g):
    nd = len(shape)
    dims = list(range(-nd, nd)) if nd else [0, -1]
    dim = dims[int(torch.randint(0, len(dims), (1,), generator=g))]
    n = shape[dim] if nd else 1
    if op in ("sort", "argsort"):
        return {"dim": dim, "descending": bool(torch.rand(1, generator=g) < 0.5),
                "stable": bool(torch.rand(1, generator=g) < 0.5)}
    if op == "topk":
        k = int(torch.randint(0, n + 1, (1,), generator=g))
        return {"k": k, "dim": dim, "largest": bool(torch.rand(1, generator=g) < 0.5),
                "sorted": True}
    if op == "kthvalue":
        if n == 0:
            return None
        return {"k": int(torch.randint(1, n + 1, (1,), generator=g)), "dim": dim,
                "keepdim": bool(torch.rand(1, generator=g) < 0.5)}
    if op in ("median_dim", "nanmedian_dim"):
        if n == 0:
            return None
        return {"dim": dim, "keepdim": bool(torch.rand(1, generator=g) < 0.5)}
    return {}


def main():
    g = torch.Generator().manual_seed(60)
    shapes = [[], [1], [7], [12], [3, 5], [4, 1], [1, 9], [2, 3, 4], [3, 4, 2], [2, 0], [0, 3],
              [40], [5, 33], [6, 2, 17]]
    ops = ["sort", "argsort", "msort", "topk", "kthvalue", "median_dim", "nanmedian_dim",
           "median", "nanmedian"]
    cases = []
    for dt in DT:
        for shape in shapes:
            for name, bn, size, stride, off in views(shape):
                for kind in ("ties", "special", "wide"):
                    if kind == "special" and dt not in FLOAT:
                        continue
                    base = base_data(dt, bn, g, kind)
                    x = base.as_strided(size, stride, off)
                    for op in ops:
                        if dt == "bool" and op not in ("sort", "argsort", "msort"):
                            continue
                        if op == "msort" and len(shape) == 0:
                            pass
                        args = op_args(op, shape, g)
                        if args is None:
                            continue
                        v, i = run(op, x, args)
                        # PyTorch 2.15's CPU median/nanmedian along a dim
                        # read garbage for an input expanded (stride 0)
                        # along another dim (torch.median(torch.arange(5.)
                        # .expand(3, 5), 0) gives 7.5e-22 in its last
                        # place): the answer for the same values in a
                        # contiguous tensor is the expected one there.
                        cv, ci = run(op, x.contiguous(), args)
                        bug = v is not None and not torch.equal(
                            torch.nan_to_num(v.double(), 7.0), torch.nan_to_num(cv.double(), 7.0))
                        if bug:
                            assert name == "expanded" and op in ("median_dim", "nanmedian_dim"), \
                                (dt, name, op, args)
                            v, i = cv, ci
                        exact = True
                        if op in ("topk", "kthvalue", "median_dim", "nanmedian_dim"):
                            # Unspecified among ties: exact only where the
                            # selected values are unique in their slice.
                            exact = False
                        if op in ("median", "nanmedian"):
                            exact = False  # which of equal elements (-0.0, 0.0)
                        if op == "msort" and size and size[0] > 16:
                            exact = False  # std::sort: -0.0 and 0.0 in any order
                        if op in ("sort", "argsort") and not args["stable"]:
                            # PyTorch's CPU kernel: std::sort, stable only
                            # for rows of up to 16 elements (its insertion
                            # sort); unspecified among ties beyond.
                            n = size[args["dim"]] if size else 1
                            s = torch.sort(x, dim=args["dim"], descending=args["descending"],
                                           stable=True)
                            if n <= 16:
                                assert torch.equal(s.indices, i), "stable up to 16"
                            else:
                                exact = False
                        case = {"dtype": dt, "view": name, "kind": kind, "pytorch_bug": bug,
                                "base": encode(base, dt), "size": size, "stride": stride,
                                "offset": off, "op": op, "args": args, "exact_indices": exact}
                        if v is not None:
                            case["values"] = encode(v, dt)
                            case["values_shape"] = list(v.shape)
                            case["values_stride"] = list(v.stride())
                        if i is not None and not exact:
                            r = stable_reference(op, x, args)
                            assert r.shape == i.shape
                            case["stable_indices"] = [int(t) for t in r.reshape(-1).tolist()]
                        if i is not None:
                            case["indices"] = [int(t) for t in i.reshape(-1).tolist()]
                            case["indices_shape"] = list(i.shape)
                            case["indices_stride"] = list(i.stride())
                        cases.append(case)
    # Empty inputs of median/nanmedian of every element: NaN in the dtype.
    for dt in ("f32", "f64", "f16", "bf16", "i32", "i64", "u8"):
        x = torch.zeros(0, dtype=DT[dt])
        for op in ("median", "nanmedian"):
            v = run(op, x, {})[0]
            cases.append({"dtype": dt, "view": "empty", "kind": "empty",
                          "base": encode(x, dt), "size": [0], "stride": [1], "offset": 0,
                          "op": op, "args": {}, "exact_indices": True,
                          "values": encode(v, dt), "values_shape": [], "values_stride": []})
    text = json.dumps({"cases": cases}, separators=(",", ":"))
    write_fixture(sys.argv[1], text)
    print(len(cases), "cases,", sum(c.get("pytorch_bug", False) for c in cases),
          "with PyTorch's expanded-median bug")


if __name__ == "__main__":
    main()
