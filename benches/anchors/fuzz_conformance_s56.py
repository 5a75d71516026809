#!/usr/bin/env python3
"""fuzz_conformance_s55.py with the session-56 families: seeded random
tensor programs with PyTorch's answers (group `fuzz_ops`, split `fuzz`),
replayed by crates/strata-tensor/tests/conformance.rs
(`project_conformance`).

For seeds below S56_SEED this draws exactly the cases of
fuzz_conformance_s55.py (the same file byte for byte but for the generator
line, which names that script). From S56_SEED on it also draws
S56_FAMILIES:
- `result_views`: an element-wise op (unary, binary with mixed dtypes and
  broadcasting, comparisons, where, addcmul, clamp, *_like) of transposed,
  permuted, stepped, expanded or size-1-strided operands, whose result's
  layout is now part of the program (layout `checked`: strides, offset and
  is_contiguous compared; PyTorch's TensorIterator lays the output out in
  its operands' order, which strata follows since session 56), then views
  of it (view(-1), which is a `layout` error where the result is not
  viewable, flatten, transpose, unsqueeze, contiguous) and an in-place
  op through such a view;
- `grad_ops`: the backward kernels strata exposes, as PyTorch's aten ops:
  gelu_backward (both approximations), _softmax_backward_data and
  _log_softmax_backward_data along every dim (of a softmax output), and
  torch.linalg.vector_norm (orders 0, 1, 2, 3, 0.5, -1, inf, -inf, over
  several, negative or no dims, keepdim, empty inputs) of non-contiguous
  float inputs, integer and bool inputs too (errors).
Their error steps take the class PyTorch's message names (`"?"`).

Usage (PyTorch on the CPU, one thread):
    OMP_NUM_THREADS=1 python3 benches/anchors/fuzz_conformance_s56.py \\
        [--seed 3324] [--count 1000] [--out /tmp/fuzz_ops_3324.json]
"""

import argparse
import json
import math
import platform
import random
import sys

import torch
import torch.nn.functional as F

import fuzz_conformance_ops as base
import fuzz_conformance_s55 as s55
from fuzz_conformance_ops import DTYPES, FLOATS, NAME, TDT, Case, Skip, dim_of, rshape

# The first seed that also draws S56_FAMILIES.
S56_SEED = 3324

# Ops whose results PyTorch lays out itself and strata lays out the same
# way since session 56 (clone and to_dtype stay row-major in strata).
LAID_OUT = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "sign",
            "silu", "gelu", "sin", "reciprocal", "clamp", "add", "sub", "mul", "div", "eq",
            "ne", "lt", "ge", "maximum", "minimum", "pow", "where", "addcmul", "zeros_like",
            "ones_like", "full_like"}

NEW_TOL_OPS = {"gelu_backward", "softmax_backward", "log_softmax_backward", "vector_norm"}

_run_op = base.run_op


def run_op(op, a, raw, case):
    """base.run_op with the session-56 ops."""
    def opt(i, d=None):
        return a[i] if len(a) > i and a[i] is not None else d
    if op == "gelu_backward":
        return torch.ops.aten.gelu_backward(a[0], a[1], approximate=opt(2, "none"))
    if op in ("softmax_backward", "log_softmax_backward"):
        f = (torch.ops.aten._softmax_backward_data if op == "softmax_backward"
             else torch.ops.aten._log_softmax_backward_data)
        return f(a[0], a[1], a[2], a[1].dtype)
    if op == "vector_norm":
        return torch.linalg.vector_norm(a[0], ord=a[1], dim=opt(2), keepdim=bool(opt(3, False)))
    if op in ("flatten", "view", "reshape", "t"):
        x = a[0]
        if op == "flatten":
            return x.flatten(opt(1, 0), opt(2, -1))
        if op == "t":
            return x.t()
        return getattr(x, op)(a[1])
    if op in ("ne", "lt", "ge", "eq", "sub", "mul", "add") and len(a) == 2:
        return getattr(torch, op)(a[0], a[1])
    if op in ("minimum", "maximum"):
        return getattr(torch, op)(a[0], a[1])
    if op == "relu":
        return torch.relu(a[0])
    return _run_op(op, a, raw, case)


_classify_s45 = base.classify_s45


def classify_s56(msg):
    """base.classify_s45 with the messages of the session-56 families."""
    if "view size is not compatible with input tensor's size and stride" in msg:
        return "layout"
    if "linalg.vector_norm: Expected a floating point" in msg:
        return "dtype"
    return _classify_s45(msg)


class Case56(Case):
    """A case whose element-wise results' layouts are checked."""

    def step(self, op, args, out=None, error=None, p=None):
        saved = base.CHECKED_OPS
        base.CHECKED_OPS = saved | LAID_OUT
        try:
            return super().step(op, args, out=out, error=error, p=p)
        finally:
            base.CHECKED_OPS = saved

    def finish(self):
        saved = base.CHECKED_OPS
        base.CHECKED_OPS = saved | LAID_OUT
        try:
            return super().finish()
        finally:
            base.CHECKED_OPS = saved


def layout_operand(c, shape, dt, **kw):
    """An operand built by a view step that is not row-major (most often)."""
    r = c.rng
    nd = len(shape)
    kinds = ["contig"]
    if nd >= 1:
        kinds += ["slice", "expand"]
    if nd >= 2:
        kinds += ["transpose"] * 3
    if nd >= 3:
        kinds += ["permute"] * 3
    return c.operand(shape, dt, layout=r.choice(kinds), **kw)


def fam_result_views(c):
    c.s45 = True
    r = c.rng
    nd = r.choice([2, 2, 3, 3, 4])
    shape = [r.choice([1, 2, 3, 4]) for _ in range(nd)]
    dt = r.choice(DTYPES + FLOATS)
    x = layout_operand(c, shape, dt, special=0.05, big=False)
    k = r.random()
    if k < 0.3:
        op = r.choice(["neg", "abs", "exp", "sqrt", "sigmoid", "relu", "sign", "silu", "gelu",
                       "reciprocal"])
        if op in ("silu", "gelu") and dt not in FLOATS:
            raise Skip("float-only op of an integer tensor")
        if op == "gelu" and any(v == math.inf for v in c.env[x].double().reshape(-1).tolist()):
            raise Skip("gelu(+inf)")
        y = c.step(op, [x], error="?")
    elif k < 0.65:
        op = r.choice(["add", "sub", "mul", "div", "eq", "lt", "ge", "maximum", "pow"])
        sh = list(shape)
        if r.random() < 0.4:
            sh = [1 if r.random() < 0.5 else d for d in sh]
        if r.random() < 0.3:
            sh = sh[r.randrange(1, nd + 1):]
        dt2 = dt if r.random() < 0.5 else r.choice(DTYPES)
        b = layout_operand(c, sh, dt2, special=0.05, big=False, ints=(-4, 4))
        args = [x, b] if r.random() < 0.5 else [b, x]
        for nm in args:
            vals = c.env[nm].reshape(-1).tolist()
            if any(v in (-(2 ** 31), -(2 ** 63)) for v in vals if type(v) is int):
                raise Skip("integer division of the smallest integer")
        if op == "pow" and (NAME[c.env[args[0]].dtype] not in FLOATS
                            and NAME[c.env[args[1]].dtype] not in FLOATS):
            raise Skip("integer pow (negative exponents)")
        y = c.step(op, args, error="?")
    elif k < 0.75:
        cond = layout_operand(c, shape, "bool")
        b = layout_operand(c, shape[r.randrange(0, nd):], r.choice(DTYPES))
        args = [cond, x, b] if r.random() < 0.7 else [cond, x, {"float": 1.5}]
        y = c.step("where", args, error="?")
    elif k < 0.85:
        t1 = layout_operand(c, shape, dt, big=False)
        t2 = layout_operand(c, shape[r.randrange(0, nd):], dt, big=False)
        if dt == "bool":
            raise Skip("addcmul of bool")
        v = {"int": 2} if dt not in FLOATS else {"float": 0.5}
        y = c.step("addcmul", [x, t1, t2, v], error="?")
    elif k < 0.92:
        if dt == "bool":
            raise Skip("clamp of bool")
        y = c.step("clamp", [x, {"int": -1}, {"int": 2}], error="?")
    else:
        op = r.choice(["zeros_like", "ones_like", "full_like"])
        odt = r.choice([None, None] + DTYPES)
        if op == "full_like":
            y = c.step(op, [x, {"int": 3}] + ([odt] if odt else []), error="?")
        else:
            y = c.step(op, [x] + ([odt] if odt else []), error="?")
    if y is None:
        return
    t = c.env[y]
    for _ in range(r.randrange(1, 3)):
        kk = r.random()
        if kk < 0.3:
            ok = t.is_contiguous() or t.numel() <= 1
            try:
                t.view(-1)
                ok = True
            except RuntimeError:
                ok = False
            c.step("view", [y, [-1]], error=None if ok else "layout")
        elif kk < 0.45:
            c.step("contiguous", [y])
        elif kk < 0.6:
            c.step("flatten", [y, 0, -1])
        elif kk < 0.75:
            c.step("transpose", [y, 0, -1])
        elif kk < 0.85:
            c.step("unsqueeze", [y, r.randrange(0, t.dim() + 1)])
        else:
            # in place through a view of the result (not an expanded one)
            v = c.step("transpose", [y, 0, 1])
            if NAME[t.dtype] == "bool":
                c.step("masked_fill_", [v, c.input([], "bool", [True], p="m"), {"bool": False}])
            else:
                c.step("abs_", [v])


def fam_grad_ops(c):
    c.s45 = True
    r = c.rng
    op = r.choice(["gelu_backward", "softmax_backward", "log_softmax_backward",
                   "vector_norm", "vector_norm"])
    dt = r.choice(FLOATS * 3 + ["i64", "bool"])
    nd = r.choice([0, 1, 2, 2, 3])
    shape = rshape(r, nd, hi=4, zero_p=0.06)
    if nd and r.random() < 0.4:
        shape[r.randrange(nd)] = r.choice([15, 16, 17, 31, 33])
    if math.prod(shape) > 400:
        raise Skip("large")
    if op == "gelu_backward":
        x = layout_operand(c, shape, dt, special=0.05, big=False)
        g = layout_operand(c, shape, dt if r.random() < 0.8 else r.choice(FLOATS), big=False)
        if any(v == math.inf for v in c.env[x].double().reshape(-1).tolist()):
            raise Skip("gelu'(+inf)")
        approx = r.choice([None, "none", "tanh"])
        c.step(op, [g, x] + ([approx] if approx else []), error="?")
    elif op in ("softmax_backward", "log_softmax_backward"):
        if dt not in FLOATS:
            raise Skip("softmax of an integer tensor")
        d = dim_of(r, nd)
        xin = layout_operand(c, shape, dt, special=0.0, big=False)
        fwd = "softmax" if op == "softmax_backward" else "log_softmax"
        yv = c.step(fwd, [xin, d], error="?")
        if yv is None:
            return
        g = layout_operand(c, shape, dt, special=0.0, big=False)
        c.step(op, [g, yv, d], error="?")
    else:
        x = layout_operand(c, shape, dt, special=0.05, big=False)
        p = r.choice([{"int": 2}, {"int": 1}, {"float": 2.0}, {"float": 3.0}, {"float": 0.5},
                      {"int": 0}, {"float": -1.0}, {"float": "inf"}, {"float": "-inf"}])
        keep = r.random() < 0.4
        if nd == 0 or r.random() < 0.3:
            dims = None
        else:
            dims = r.sample(range(nd), r.randrange(1, nd + 1))
            dims = [d - nd if r.random() < 0.4 else d for d in dims]
        c.step(op, [x, p, dims, keep], error="?")


S56_FAMILIES = [("result_views", fam_result_views, 10), ("grad_ops", fam_grad_ops, 8)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=S56_SEED)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--out", default="conformance/fuzz_ops.json")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--only", default=None,
                    help="comma-separated family names: draw only these (a different "
                         "program set than the seed's default; the case ids say so)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    s56 = args.seed >= S56_SEED
    if s56:
        base.run_op = run_op
        base.classify_s45 = classify_s56
        base.TOL_OPS.update(NEW_TOL_OPS)
    rng = random.Random(args.seed)
    families = base.FAMILIES + (base.S44_FAMILIES if args.seed >= base.S44_SEED else []) + \
        (base.S45_FAMILIES if args.seed >= base.S45_SEED else []) + \
        (s55.S55_FAMILIES if args.seed >= s55.S55_SEED else []) + \
        (S56_FAMILIES if s56 else [])
    if args.only:
        keep = set(args.only.split(","))
        families = [f for f in families if f[0] in keep]
        assert families, "no family named in --only"
    new = {f for f, _, _ in S56_FAMILIES}
    total_w = sum(w for _, _, w in families)
    cases, skipped = [], {}
    while len(cases) < args.count:
        x = rng.random() * total_w
        for fname, fn, w in families:
            x -= w
            if x < 0:
                break
        seed = rng.randrange(2 ** 32)
        tag = "o" if args.only else ""
        cls = Case56 if fname in new else Case
        c = cls(random.Random(seed), f"fuzz_ops.s{args.seed}{tag}_{fname}_{len(cases):04d}",
                f"random {fname} program (case seed {seed})")
        try:
            fn(c)
            if not c.steps:
                raise Skip("no step")
            cases.append(c.finish())
        except Skip as e:
            key = f"{fname}: {str(e)[:90]}"
            skipped[key] = skipped.get(key, 0) + 1
    # Below S56_SEED the generator line names the script whose cases these are.
    if s56:
        script = "fuzz_conformance_s56.py"
    elif args.seed >= s55.S55_SEED:
        script = "fuzz_conformance_s55.py"
    else:
        script = "fuzz_conformance_ops.py"
    doc = {"format": "strata-conformance", "format_version": 1,
           "torch_version": torch.__version__, "python_version": platform.python_version(),
           "oracle": "PyTorch on the CPU, one thread",
           "generator": "benches/anchors/%s --seed %d --count %d%s" % (
               script, args.seed, args.count, " --only " + args.only if args.only else ""),
           "group": "fuzz_ops", "split": "fuzz", "count": len(cases), "cases": cases}
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    n_skip = sum(skipped.values())
    print(f"wrote {len(cases)} cases to {args.out}; {n_skip} drafts left out", file=sys.stderr)
    if args.verbose:
        for k, v in sorted(skipped.items(), key=lambda kv: -kv[1]):
            print(f"  {v:4d}  {k}", file=sys.stderr)


if __name__ == "__main__":
    main()
