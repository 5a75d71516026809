#!/usr/bin/env python3
"""Session 79 (helper 134): PyTorch 2.15's CPU answers (one thread) for the
shape, join, statistics and nn ops strata added in session 79, written to
two fixtures:

- crates/strata-tensor/tests/data/shape_stats_s79.json.gz
  (crates/strata-tensor/tests/suite/shape_stats_s79.rs): every op's
  results (dtype, shape, values; every piece of a split, every output of a
  pair) or the fact that PyTorch raised, on operands of every strata dtype,
  shapes with and without elements, 0-d, transposed (non-contiguous)
  operands, values with NaN and infinities, and arguments outside their
  domain;
- crates/strata-autograd/tests/data/shape_stats_s79_grad.json.gz
  (crates/strata-autograd/tests/suite/shape_stats_s79.rs): for the calls
  whose differentiable operands are all f32 or f64 and that succeed (but
  pdist of fewer than two rows, whose backward crashes PyTorch 2.15), the
  gradient of every differentiable operand for the upstream gradient whose
  element j is `((3 j) mod 7 - 3) / 2` (each output its own).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_shape_stats_s79.py \\
        crates/strata-tensor/tests/data/shape_stats_s79.json.gz \\
        crates/strata-autograd/tests/data/shape_stats_s79_grad.json.gz
"""
import json
import math
import random
import sys
import warnings

import torch
import torch.nn.functional as F

from fixture_io import fmt, write_fixture
import gen_math_s74 as m

torch.set_num_threads(1)
warnings.simplefilter("ignore")
import os
DEBUG = bool(os.environ.get("S79_DEBUG"))

FLOATS = ["f32", "f64", "f16", "bf16"]
ALL = FLOATS + ["i32", "i64", "u8", "bool"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, math.inf, -math.inf, math.nan, 1e30, -1e30, 100.0]
SHAPES = [[], [0], [1], [5], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [3, 1, 4], [4, 2]]


def values(r, dtype, n, kind):
    if dtype == "bool":
        return [r.random() < 0.5 for _ in range(n)]
    if dtype in m.RANGES:
        lo = 0 if dtype == "u8" else -5
        return [r.randint(lo, 5) for _ in range(n)]
    if kind == "tame":
        return [round(r.uniform(-3, 3), 3) for _ in range(n)]
    if kind == "distinct":
        # Values without ties (quantiles and extrema: PyTorch's choice among
        # equal values is not a derivative).
        return [round(r.uniform(-3, 3), 6) for _ in range(n)]
    if kind == "pos":
        return [abs(r.uniform(0.1, 3)) for _ in range(n)]
    return [r.choice(SPECIAL) if r.random() < 0.15 else r.uniform(-3, 3) for _ in range(n)]


def draw(r, dtype, shape, kind="any"):
    saved = m.draw_values
    m.draw_values = lambda rr, dt, n: values(rr, dt, n, kind)
    try:
        return m.draw_tensor(r, dtype, shape)
    finally:
        m.draw_values = saved


def index_tensor(vals, shape, dtype="i64"):
    t = torch.tensor(vals, dtype=m.DTYPES[dtype]).reshape(shape)
    return t, {"dtype": dtype, "shape": list(shape), "values": list(vals), "t": False}


def some_dtype(r):
    return r.choice(FLOATS * 3 + ALL)


def case(r, op):
    """The call's operands (tensors and records), its keyword arguments (as
    recorded), a callable giving a list of results, and the indices of the
    differentiable operands."""
    d = some_dtype(r)
    ts, args, diff = [], {}, [0]

    def add(t):
        ts.append(t)

    if op == "rot90":
        s = r.choice([[2, 3], [3, 2, 2], [4], [], [0, 3], [2, 1, 3, 2], [1, 1]])
        add(draw(r, d, s))
        nd = len(s)
        dims = r.choice([[0, 1], [1, 0], [-1, -2], [0, 2], [1, 2], [0, 0], [0], [0, 1, 2], [0, nd], [0, -nd]])
        args = {"k": r.randint(-5, 5), "dims": dims}
        f = lambda a: [torch.rot90(a, args["k"], dims)]
    elif op == "block_diag":
        n = r.randint(0, 4)
        for _ in range(n):
            s = r.choice([[], [2], [0], [2, 3], [1, 1], [0, 2], [3, 0], [2, 2, 1]] if r.random() < 0.1 else
                         [[], [2], [0], [2, 3], [1, 1], [0, 2], [3, 0]])
            add(draw(r, d if r.random() < 0.8 else some_dtype(r), s))
        f = lambda *a: [torch.block_diag(*a)]
        diff = list(range(n))
    elif op == "unflatten":
        s = r.choice([[2, 6], [6], [3, 4, 2], [0, 4], [2, 0], []])
        add(draw(r, d, s))
        nd = len(s)
        args = {"dim": r.randint(-nd - 1, nd), "sizes": r.choice([[2, -1], [-1, 2], [3, 2], [2, 2], [1, -1, 1], [],
                                                                 [-1, -1], [0, -1], [6], [4, -1], [2, 3, 1]])}
        f = lambda a: [torch.unflatten(a, args["dim"], args["sizes"])]
    elif op in ("hstack", "vstack", "dstack", "column_stack", "row_stack"):
        n = r.randint(0, 3)
        base = r.choice([[], [3], [2, 3], [2, 3, 2], [0], [2, 0]])
        for _ in range(n):
            s = list(base)
            if r.random() < 0.3 and s:
                s[r.randrange(len(s))] = r.randint(0, 3)
            if r.random() < 0.1:
                s = r.choice(SHAPES)
            add(draw(r, d if r.random() < 0.8 else some_dtype(r), s))
        f = lambda *a: [getattr(torch, op)(list(a))]
        diff = list(range(n))
    elif op in ("atleast_1d", "atleast_2d", "atleast_3d", "ravel"):
        add(draw(r, d, r.choice(SHAPES)))
        f = lambda a: [getattr(torch, op)(a)]
    elif op == "tensor_split":
        s = r.choice([[7], [2, 5], [6, 2], [0, 3], [], [3, 0], [1, 4]])
        add(draw(r, d, s))
        nd = len(s)
        if r.random() < 0.5:
            how = r.choice([1, 2, 3, 4, 8, 0, -1])
        else:
            how = [r.randint(-8, 9) for _ in range(r.randint(0, 4))]
        args = {"how": how, "dim": r.randint(-nd - 1, nd)}
        f = lambda a: list(torch.tensor_split(a, how, dim=args["dim"]))
    elif op in ("hsplit", "vsplit", "dsplit"):
        s = r.choice([[6], [2, 6], [4, 2], [2, 3, 4], [0, 2, 2], [], [2, 2, 0]])
        add(draw(r, d, s))
        how = r.choice([1, 2, 3, 0]) if r.random() < 0.5 else [r.randint(-4, 6) for _ in range(r.randint(0, 3))]
        args = {"how": how}
        f = lambda a: list(getattr(torch, op)(a, how))
    elif op == "take_along_dim":
        s = r.choice([[2, 3], [3], [2, 3, 2], [0, 3], [], [1, 4], [3, 1]])
        add(draw(r, d, s))
        nd = len(s)
        dim = None if r.random() < 0.2 else r.randint(-nd - 1, max(nd, 1))
        if dim is None:
            n = max(math.prod(s), 1)
            ishape = r.choice([[3], [2, 2], [0], []])
            bound = n
        else:
            ishape = list(s)
            dd = dim + nd if dim < 0 else dim
            if 0 <= dd < nd:
                ishape[dd] = r.randint(0, 3)
            for k in range(nd):
                if r.random() < 0.25:
                    ishape[k] = 1
            if r.random() < 0.1:
                ishape = ishape[1:]
            bound = s[dd] if 0 <= dd < nd and s[dd] > 0 else 1
        # In range only: PyTorch 2.15's CPU reads past the input for an index
        # outside the dim (strata refuses it: a test of its own).
        iv = [r.randrange(bound) for _ in range(math.prod(ishape))]
        add(index_tensor(iv, ishape, "i64" if r.random() < 0.9 else "i32"))
        args = {"dim": dim}
        f = lambda a, i: [torch.take_along_dim(a, i, dim)]
    elif op == "channel_shuffle":
        s = r.choice([[1, 4, 3], [2, 6, 2, 2], [0, 4, 2], [2, 4], [1, 6, 0], [2, 3, 1, 1, 2]])
        add(draw(r, d, s))
        args = {"groups": r.choice([1, 2, 3, 0, -1, 4])}
        f = lambda a: [F.channel_shuffle(a, args["groups"])]
    elif op == "vander":
        s = r.choice([[3], [4], [0], [1], [], [2, 2]])
        add(draw(r, d, s, "tame"))
        args = {"n": r.choice([None, 0, 1, 2, 4, -1]), "increasing": r.random() < 0.5}
        f = lambda a: [torch.vander(a, args["n"], args["increasing"])]
    elif op in ("swapaxes", "swapdims"):
        s = r.choice(SHAPES)
        add(draw(r, d, s))
        nd = len(s)
        args = {"d0": r.randint(-nd - 1, nd), "d1": r.randint(-nd - 1, nd)}
        f = lambda a: [getattr(torch, op)(a, args["d0"], args["d1"])]
    elif op == "moveaxis":
        s = r.choice([[2, 3, 4], [2, 3], [5], []])
        add(draw(r, d, s))
        nd = len(s)
        k = r.randint(0, max(nd, 1))
        src = [r.randint(-nd, max(nd - 1, 0)) for _ in range(k)]
        dst = [r.randint(-nd, max(nd - 1, 0)) for _ in range(k)]
        args = {"source": src, "destination": dst}
        f = lambda a: [torch.moveaxis(a, src, dst)]
    elif op == "narrow_copy":
        s = r.choice([[5], [2, 4], [3, 2, 2], [0, 3], []])
        add(draw(r, d, s))
        nd = len(s)
        args = {"dim": r.randint(-nd - 1, nd), "start": r.randint(-5, 5), "length": r.randint(-1, 4)}
        f = lambda a: [torch.narrow_copy(a, args["dim"], args["start"], args["length"])]
    elif op in ("select_scatter", "slice_scatter", "diagonal_scatter"):
        s = r.choice([[3, 4], [2, 3, 2], [4], [0, 3], [3, 3]])
        add(draw(r, d, s))
        nd = len(s)
        probe = torch.zeros(s)
        if op == "select_scatter":
            args = {"dim": r.randint(-nd, nd - 1), "index": r.randint(-3, 3)}
            view = lambda t: t.select(args["dim"], args["index"])
            f = lambda a, b: [torch.select_scatter(a, b, args["dim"], args["index"])]
        elif op == "slice_scatter":
            args = {"dim": r.randint(-nd, nd - 1), "start": r.choice([None, 0, 1, -2, 5]),
                    "end": r.choice([None, 2, -1, 10]), "step": r.choice([1, 1, 2, 3])}
            view = lambda t: t[(slice(None),) * (args["dim"] % nd) + (slice(args["start"], args["end"], args["step"]),)]
            f = lambda a, b: [torch.slice_scatter(a, b, args["dim"], args["start"], args["end"], args["step"])]
        else:
            args = {"offset": r.randint(-2, 2), "dim1": r.randint(-nd, nd - 1), "dim2": r.randint(-nd, nd - 1)}
            view = lambda t: t.diagonal(args["offset"], args["dim1"], args["dim2"])
            f = lambda a, b: [torch.diagonal_scatter(a, b, args["offset"], args["dim1"], args["dim2"])]
        try:
            ss = list(view(probe).shape)
        except Exception:  # noqa: BLE001
            ss = [2]
        if r.random() < 0.1:
            ss = ss[1:] if ss else [1]
        add(draw(r, d if r.random() < 0.85 else some_dtype(r), ss))
        diff = [0, 1]
    elif op in ("quantile", "nanquantile"):
        d = r.choice(["f32", "f64"] * 6 + ["f16", "i64", "bf16"])
        s = r.choice([[5], [2, 3], [3, 4], [2, 3, 2], [1], [], [0], [3, 0], [4, 1]])
        add(draw(r, d, s, "distinct" if r.random() < 0.75 else "any"))
        nd = len(s)
        if r.random() < 0.5:
            q = r.choice([0.0, 0.25, 0.5, 1.0, 0.3, 0.9, 0.1, 1.5, -0.1, 0.7])
            args["q"] = q
        else:
            qv = [r.choice([0.0, 0.25, 0.5, 1.0, 0.3, 0.9, 0.1, 0.75]) for _ in range(r.randint(0, 4))]
            if r.random() < 0.1:
                qv.append(r.choice([1.5, -0.5]))
            qs = [len(qv)] if r.random() < 0.9 else ([1, len(qv)] if r.random() < 0.5 else [])
            if qs == []:
                qv = [0.5]
            qd = d if r.random() < 0.9 else r.choice(["f32", "f64"])
            t = torch.tensor(qv, dtype=m.DTYPES[qd]).reshape(qs)
            vals = [int(v) if qd in m.RANGES else fmt(float(v)) for v in t.double().flatten().tolist()]
            add((t, {"dtype": qd, "shape": qs, "values": vals, "t": False}))
            q = None
        args.update({"dim": None if r.random() < 0.3 else r.randint(-nd - 1, max(nd, 1)),
                     "keepdim": r.random() < 0.4,
                     "interpolation": r.choice(["linear", "lower", "higher", "midpoint", "nearest"])})
        fn = getattr(torch, op)
        if q is None:
            f = lambda a, qt: [fn(a, qt, dim=args["dim"], keepdim=args["keepdim"],
                                  interpolation=args["interpolation"])]
        else:
            f = lambda a: [fn(a, q, dim=args["dim"], keepdim=args["keepdim"], interpolation=args["interpolation"])]
    elif op in ("cov", "corrcoef"):
        s = r.choice([[3], [2, 4], [3, 1], [1, 5], [2, 0], [], [2, 2, 2], [4, 3], [1]])
        add(draw(r, d, s, "tame"))
        nobs = (s[-1] if s else 1) if len(s) <= 2 else 2
        args = {"fw": None, "aw": None, "correction": r.choice([1, 1, 0, 2, 5])}
        if op == "cov" and r.random() < 0.35:
            fd = r.choice(["i64", "i64", "i32", "f32"])
            fv = [r.randint(0, 3) if r.random() < 0.95 else -1 for _ in range(nobs)]
            fsh = [nobs] if r.random() < 0.9 else [nobs + 1]
            if fsh != [nobs]:
                fv.append(1)
            args["fw"] = len(ts)
            add(index_tensor(fv, fsh, fd) if fd != "f32" else draw(r, "f32", fsh, "pos"))
        if op == "cov" and r.random() < 0.35:
            ad = r.choice(["f32", "f64", "f32", "i64"])
            args["aw"] = len(ts)
            add(draw(r, ad, [nobs], "pos") if ad != "i64" else index_tensor([1] * nobs, [nobs], "i64"))
        fwi, awi = args["fw"], args["aw"]
        if op == "cov":
            f = lambda *a: [torch.cov(a[0], correction=args["correction"], fweights=a[fwi] if fwi else None,
                                      aweights=a[awi] if awi else None)]
        else:
            f = lambda a: [torch.corrcoef(a)]
    elif op == "aminmax":
        s = r.choice(SHAPES)
        add(draw(r, d, s))
        nd = len(s)
        args = {"dim": None if r.random() < 0.3 else r.randint(-nd - 1, max(nd, 1)), "keepdim": r.random() < 0.4}
        f = lambda a: list(torch.aminmax(a, dim=args["dim"], keepdim=args["keepdim"]))
    elif op in ("trapezoid", "cumulative_trapezoid"):
        s = r.choice([[4], [2, 3], [3, 1], [2, 0], [], [1], [2, 3, 2]])
        add(draw(r, d, s, "tame"))
        nd = len(s)
        args = {"dim": r.randint(-nd - 1, max(nd, 1)) if r.random() < 0.8 else -1, "x": None, "dx": None}
        fn = getattr(torch, op)
        if r.random() < 0.5:
            args["dx"] = r.choice([1.0, 0.5, 2.0, -1.0, 0.0])
            f = lambda a: [fn(a, dx=args["dx"], dim=args["dim"])]
        else:
            dd = args["dim"] + nd if args["dim"] < 0 else args["dim"]
            n = s[dd] if 0 <= dd < nd else 1
            xs = r.choice([[n], list(s), [n + 1], s[-1:] if s else [1]])
            add(draw(r, r.choice(["f32", "f64", "f32", "i64"]), xs, "tame"))
            args["x"] = 1
            f = lambda a, x: [fn(a, x, dim=args["dim"])]
    elif op == "renorm":
        d = r.choice(FLOATS * 3 + ["i64"])
        s = r.choice([[3, 4], [2, 3, 2], [4], [0, 3], [2, 1], [3, 0, 2]])
        add(draw(r, d, s, "tame"))
        nd = len(s)
        args = {"p": r.choice([1.0, 2.0, 3.0, math.inf, 0.5, 0.0, -1.0]), "dim": r.randint(-nd - 1, max(nd, 1)),
                "maxnorm": r.choice([1.0, 0.5, 5.0, 0.0, 2.0, -1.0])}
        f = lambda a: [torch.renorm(a, args["p"], args["dim"], args["maxnorm"])]
    elif op == "pdist":
        d = r.choice(["f32", "f64"] * 4 + ["f16", "i64"])
        s = r.choice([[4, 3], [3, 2], [1, 3], [0, 2], [5, 1], [2, 0], [3], [2, 2, 2]])
        add(draw(r, d, s, "distinct"))
        args = {"p": r.choice([2.0, 1.0, 3.0, math.inf, 0.5, 0.0, -1.0])}
        f = lambda a: [F.pdist(a, args["p"])]
    elif op == "histogram":
        d = r.choice(["f32", "f64"] * 5 + ["f16", "i64"])
        s = r.choice([[6], [2, 5], [0], [], [3, 1], [10]])
        add(draw(r, d, s, "tame" if r.random() < 0.8 else "any"))
        args = {"bins": None, "range": None, "weight": None, "density": r.random() < 0.3}
        if r.random() < 0.6:
            args["bins"] = r.choice([1, 3, 4, 7, 0])
        else:
            k = r.randint(1, 5)
            ev = sorted(set(round(r.uniform(-3, 3), 2) for _ in range(k)))
            ed = d if r.random() < 0.9 else r.choice(["f32", "f64"])
            add(index_tensor(sorted(set(int(v) for v in ev)), [len(set(int(v) for v in ev))], ed) if ed in m.RANGES else
                (torch.tensor(ev, dtype=m.DTYPES[ed]),
                 {"dtype": ed, "shape": [len(ev)], "values": ev, "t": False}))
            args["bins"] = "edges"
        if r.random() < 0.3 and args["bins"] != "edges":
            lo = round(r.uniform(-3, 1), 2)
            args["range"] = [lo, r.choice([lo + 2.0, lo, lo - 1.0])]
        if r.random() < 0.3:
            args["weight"] = len(ts)
            wd = d if r.random() < 0.9 else r.choice(["f32", "f64"])
            add(draw(r, wd, s if r.random() < 0.9 else [1], "pos"))
        diff = []

        def f(*a):
            bins = a[1] if args["bins"] == "edges" else args["bins"]
            w = a[args["weight"]] if args["weight"] else None
            rg = tuple(args["range"]) if args["range"] else None
            if rg is None:
                return list(torch.histogram(a[0], bins, weight=w, density=args["density"]))
            return list(torch.histogram(a[0], bins, range=rg, weight=w, density=args["density"]))
    elif op == "multi_margin_loss":
        d = r.choice(["f32", "f64"] * 5 + ["f16", "i64"])
        # No empty batch: PyTorch 2.15's CPU returns uninitialised memory for
        # its mean and sum (and checks no dtype there).
        s = r.choice([[3, 4], [4], [], [2, 0], [5, 2], [1, 1]])
        add(draw(r, d, s))
        n = 1 if len(s) <= 1 else s[0]
        c = 1 if not s else s[-1]
        tv = [r.randrange(max(c, 1)) if r.random() < 0.95 else c for _ in range(n)]
        tshape = [n] if (len(s) == 2 or r.random() < 0.5) else []
        if tshape == [] and n != 1:
            tshape = [n]
        add(index_tensor(tv, tshape, "i64" if r.random() < 0.92 else "i32"))
        args = {"p": r.choice([1, 2, 1, 2, 3]), "margin": r.choice([1.0, 0.5, 0.0, 2.0, -1.0]), "weight": None,
                "reduction": r.choice(["none", "mean", "sum"])}
        if r.random() < 0.35:
            args["weight"] = len(ts)
            add(draw(r, d if r.random() < 0.9 else "f64", [c] if r.random() < 0.9 else [c + 1], "pos"))
        wi = args["weight"]
        f = lambda *a: [F.multi_margin_loss(a[0], a[1], p=args["p"], margin=args["margin"],
                                            weight=a[wi] if wi else None, reduction=args["reduction"])]
    elif op == "instance_norm":
        # No bf16: with bf16 weight and bias, PyTorch's batch norm rounds an
        # intermediate to bf16 that strata's keeps in f32 (a second draw,
        # seed 7902, found outputs near zero one bf16 ulp of the terms apart).
        d = r.choice(["f32", "f64"])
        s = r.choice([[2, 3, 4], [2, 3, 2, 2], [1, 2, 5], [2, 3, 1], [2, 3], [3, 2, 3]])
        rdt = torch.float64 if d == "f64" else torch.float32
        add(draw(r, d, s, "tame"))
        c = s[1]
        # Running statistics of the input's dtype (f32 for bf16; but none
        # with bf16, whose update PyTorch rounds through bf16).
        args = {"running": r.random() < 0.5 and d != "bf16", "affine": r.random() < 0.5,
                "use_input_stats": r.random() < 0.75,
                "momentum": r.choice([0.1, 0.5]), "eps": r.choice([1e-5, 1e-3])}
        if args["affine"]:
            add(draw(r, d, [c], "pos")); add(draw(r, d, [c], "tame"))
            diff = [0, 1, 2]
        rm0 = [round(r.uniform(-1, 1), 3) for _ in range(c)]
        rv0 = [round(r.uniform(0.5, 2), 3) for _ in range(c)]
        args["rm"], args["rv"] = rm0, rv0

        def f(*a):
            rm = torch.tensor(rm0, dtype=rdt) if args["running"] else None
            rv = torch.tensor(rv0, dtype=rdt) if args["running"] else None
            y = F.instance_norm(a[0], rm, rv, a[1] if args["affine"] else None, a[2] if args["affine"] else None,
                                use_input_stats=args["use_input_stats"], momentum=args["momentum"], eps=args["eps"])
            return [y] + ([rm, rv] if args["running"] else [])
    elif op == "local_response_norm":
        d = r.choice(["f32", "f64"] * 4 + ["f16", "i64"])
        s = r.choice([[2, 5, 4], [2, 4, 3, 3], [1, 3, 2, 2, 2], [2, 3], [1, 6, 3]])
        add(draw(r, d, s, "tame"))
        args = {"size": r.choice([1, 2, 3, 5, 0]), "alpha": r.choice([1e-4, 0.5, 1.0]), "beta": r.choice([0.75, 1.0, 2.0]),
                "k": r.choice([1.0, 2.0, 0.5])}
        f = lambda a: [F.local_response_norm(a, args["size"], args["alpha"], args["beta"], args["k"])]
    elif op in ("lp_pool1d", "lp_pool2d"):
        d = r.choice(["f32", "f64"] * 4 + ["f16"])
        s = r.choice([[2, 3, 8], [3, 7], [1, 2, 5]] if op == "lp_pool1d" else [[2, 3, 6, 6], [3, 5, 4], [1, 1, 3, 3]])
        add(draw(r, d, s, "pos" if r.random() < 0.8 else "tame"))
        k = r.choice([2, 3]) if op == "lp_pool1d" else r.choice([[2], [2, 3], [3]])
        st = r.choice([None, 1, 2]) if op == "lp_pool1d" else r.choice([None, [1], [2, 1]])
        args = {"norm_type": r.choice([1.0, 2.0, 3.0, 1.5]), "kernel": k, "stride": st, "ceil_mode": r.random() < 0.3}
        if op == "lp_pool1d":
            f = lambda a: [F.lp_pool1d(a, args["norm_type"], k, stride=st, ceil_mode=args["ceil_mode"])]
        else:
            f = lambda a: [F.lp_pool2d(a, args["norm_type"], tuple(k) if len(k) == 2 else k[0],
                                       stride=(tuple(st) if len(st) == 2 else st[0]) if st else None,
                                       ceil_mode=args["ceil_mode"])]
    elif op in ("max_unpool1d", "max_unpool2d"):
        d = r.choice(["f32", "f64"] * 4 + ["f16"])
        two = op == "max_unpool2d"
        s = r.choice([[1, 2, 4, 4], [2, 1, 6, 4], [3, 4, 4]] if two else [[1, 2, 8], [2, 6], [2, 3, 7]])
        x = torch.tensor(values(r, "f64", math.prod(s), "distinct")).reshape(s).to(m.DTYPES[d])
        k = 2
        pooled, idx = (F.max_pool2d if two else F.max_pool1d)(x.double(), k, return_indices=True)
        pooled = pooled.to(m.DTYPES[d])
        vals = [fmt(float(v)) for v in pooled.double().flatten().tolist()]
        add((pooled, {"dtype": d, "shape": list(pooled.shape), "values": vals, "t": False}))
        iv = idx.flatten().tolist()
        if r.random() < 0.1:
            iv[0] = 10 ** 4
        add(index_tensor(iv, list(idx.shape), "i64" if r.random() < 0.93 else "i32"))
        sp = s[-2:] if two else s[-1:]
        osz = r.choice([None, None, list(sp), [v + 1 for v in sp], [v + 3 for v in sp]])
        args = {"kernel": k, "stride": None, "padding": 0, "output_size": osz}
        fn = F.max_unpool2d if two else F.max_unpool1d
        f = lambda a, i: [fn(a, i, k, output_size=osz)]
    elif op == "bilinear":
        n, i1, i2, o = r.randint(0, 3), r.randint(1, 3), r.randint(1, 3), r.randint(1, 3)
        lead = r.choice([[n], [], [2, n]])
        add(draw(r, d, lead + [i1], "tame"))
        add(draw(r, d if r.random() < 0.9 else some_dtype(r), lead + [i2 if r.random() < 0.9 else i2 + 1], "tame"))
        add(draw(r, d, [o, i1, i2] if r.random() < 0.9 else [o, i2, i1], "tame"))
        args = {"bias": r.random() < 0.6}
        if args["bias"]:
            add(draw(r, d, [o] if r.random() < 0.9 else [o + 1], "tame"))
        f = lambda *a: [F.bilinear(a[0], a[1], a[2], a[3] if args["bias"] else None)]
        diff = list(range(len(ts)))
    elif op in ("adaptive_max_pool1d", "adaptive_max_pool2d"):
        d = r.choice(["f32", "f64"] * 4 + ["f16", "bf16", "i64"])
        two = op == "adaptive_max_pool2d"
        s = r.choice([[2, 3, 7, 5], [1, 2, 4, 4], [3, 5, 6], [2, 0, 3, 3], [1, 1, 3, 0]] if two else
                     [[2, 3, 7], [1, 2, 5], [3, 8], [2, 0, 4], [4], [2, 3, 0]])
        add(draw(r, d, s, "distinct" if r.random() < 0.7 else "any"))
        o = [r.choice([1, 2, 3, 4, 0, 9])] if not two else r.choice([[2], [3, 2], [1, 4], [0, 2], [5, 3]])
        args = {"output_size": o}
        fn = F.adaptive_max_pool2d if two else F.adaptive_max_pool1d
        f = lambda a: list(fn(a, tuple(o) if len(o) > 1 else o[0], return_indices=True))
    elif op == "multilabel_margin_loss":
        d = r.choice(["f32", "f64"] * 5 + ["f16"])
        # No empty batch: PyTorch 2.15's CPU returns uninitialised memory for
        # its mean (and checks no dtype there).
        s = r.choice([[3, 4], [4], [], [2, 5], [1, 1], [2, 0]])
        add(draw(r, d, s))
        n = 1 if len(s) <= 1 else s[0]
        c = 1 if not s else s[-1]
        rows = []
        for _ in range(n):
            row = [r.randrange(max(c, 1)) if r.random() < 0.8 else r.choice([-1, -1, -2]) for _ in range(c)]
            if r.random() < 0.05 and row:
                row[0] = c
            rows.extend(row)
        tshape = list(s) if len(s) == 2 else [c]
        if r.random() < 0.05:
            tshape = [n * c]
        add(index_tensor(rows, tshape, "i64" if r.random() < 0.93 else "i32"))
        args = {"reduction": r.choice(["none", "mean", "sum"])}
        f = lambda a, t: [F.multilabel_margin_loss(a, t, reduction=args["reduction"])]
    elif op == "embedding_bag":
        d = r.choice(["f32", "f64"] * 5 + ["f16"])
        ne, dim = r.randint(1, 5), r.randint(1, 3)
        add(draw(r, d, [ne, dim], "distinct"))
        two = r.random() < 0.3
        if two:
            ishape = [r.randint(0, 3), r.randint(0, 3)]
        else:
            ishape = [r.randint(0, 6)]
        n = math.prod(ishape)
        iv = [r.randrange(ne) if r.random() < 0.97 else ne for _ in range(n)]
        add(index_tensor(iv, ishape))
        mode = r.choice(["sum", "mean", "max"])
        args = {"mode": mode, "offsets": None, "psw": None, "include_last_offset": r.random() < 0.3,
                "padding_idx": r.choice([None, None, 0, -1, ne])}
        if not two or r.random() < 0.1:
            # At least two offsets with include_last_offset: PyTorch 2.15's CPU
            # crashes (SIGSEGV) on one offset and one index.
            k = r.randint(2 if args["include_last_offset"] else 1, 4)
            offs = sorted(r.randint(0, n) for _ in range(k))
            if offs and r.random() < 0.9:
                offs[0] = 0
            if args["include_last_offset"]:
                # PyTorch's contract (its kernels disagree otherwise; strata
                # refuses another last offset).
                offs[-1] = n
            args["offsets"] = len(ts)
            add(index_tensor(offs, [len(offs)]))
        if (mode == "sum" and r.random() < 0.5) or r.random() < 0.05:
            args["psw"] = len(ts)
            add(draw(r, d, ishape, "tame"))
        oi, pi = args["offsets"], args["psw"]
        f = lambda *a: [F.embedding_bag(a[1], a[0], a[oi] if oi else None, mode=mode,
                                        per_sample_weights=a[pi] if pi else None,
                                        include_last_offset=args["include_last_offset"],
                                        padding_idx=args["padding_idx"])]
        diff = [0] + ([pi] if pi else [])
    else:
        raise ValueError(op)
    return ts, args, f, diff


OPS = ["rot90", "block_diag", "unflatten", "hstack", "vstack", "dstack", "column_stack", "row_stack",
       "atleast_1d", "atleast_2d", "atleast_3d", "ravel", "tensor_split", "hsplit", "vsplit", "dsplit",
       "take_along_dim", "channel_shuffle", "vander", "swapaxes", "swapdims", "moveaxis", "narrow_copy",
       "select_scatter", "slice_scatter", "diagonal_scatter",
       "quantile", "nanquantile", "cov", "corrcoef", "aminmax", "trapezoid", "cumulative_trapezoid", "renorm",
       "pdist", "histogram", "multi_margin_loss", "instance_norm", "local_response_norm", "lp_pool1d", "lp_pool2d",
       "max_unpool1d", "max_unpool2d", "bilinear", "adaptive_max_pool1d", "adaptive_max_pool2d",
       "multilabel_margin_loss", "embedding_bag"]


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/shape_stats_s79.json.gz"
    grad_path = sys.argv[2] if len(sys.argv) > 2 else "/tmp/shape_stats_s79_grad.json.gz"
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7901
    per_op = int(sys.argv[4]) if len(sys.argv) > 4 else 120
    generate(OPS, case, "benches/anchors/gen_shape_stats_s79.py", tensor_path, grad_path, seed, per_op)


def generate(ops, case, generator, tensor_path, grad_path, seed, per_op):
    """Draws `per_op` calls of each op of `ops` in turn (`case(r, op)` gives
    the operands, arguments, call and differentiable operands) and writes
    PyTorch's answers to `tensor_path` and, for f32/f64 results, its
    gradients to `grad_path` (session 82's generator reuses it)."""
    r = random.Random(seed)
    cases, grads = [], []
    for i in range(per_op * len(ops)):
        op = ops[i % len(ops)]
        ts, args, f, diff = case(r, op)
        c = {"op": op, "inputs": [rec for _, rec in ts],
             "args": {k: fmt(v) if isinstance(v, float) else v for k, v in args.items()}}
        try:
            if DEBUG and op == "embedding_bag":
                print("F", c["args"], [(t.shape, t.tolist() if t.dtype == torch.int64 else None) for t, _ in ts], flush=True)
            outs = f(*[t for t, _ in ts])
            c["results"] = [m.tensor_record(o) for o in outs]
        except Exception as e:  # noqa: BLE001 - PyTorch raises several types
            c["error"] = str(e).split("\n")[0][:200]
        cases.append(c)
        if "results" not in c or not diff or any(ts[j][1]["dtype"] not in ("f32", "f64") for j in diff):
            continue
        if op == "pdist" and ts[0][0].shape[0] < 2:
            continue  # PyTorch 2.15's pdist backward crashes (SIGSEGV) without a pair
        leaves = [t.detach().clone().requires_grad_(j in diff) for j, (t, _) in enumerate(ts)]
        try:
            outs = f(*leaves)
            total = sum((o * m.upstream(list(o.shape)).to(o.dtype)).sum() for o in outs if o.requires_grad)
            if not isinstance(total, torch.Tensor):
                continue
            if DEBUG: print(op, c["args"], [x.shape for x in leaves], flush=True)
            total.backward()
        except Exception as e:  # noqa: BLE001
            grads.append(dict(c, grad_error=str(e).split("\n")[0][:200]))
            continue
        g = {}
        for j in diff:
            gr = leaves[j].grad
            g[str(j)] = None if gr is None else [fmt(float(v)) for v in gr.double().flatten().tolist()]
        grads.append(dict(c, grads=g))
    doc = {"generator": generator, "torch": torch.__version__, "seed": seed, "cases": cases}
    write_fixture(tensor_path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), tensor_path))
    doc = {"generator": generator, "torch": torch.__version__, "seed": seed, "cases": grads}
    write_fixture(grad_path, json.dumps(doc, allow_nan=False))
    print("%d gradient cases (%d errors) -> %s" % (len(grads), sum("grad_error" in g for g in grads), grad_path))


if __name__ == "__main__":
    main()
