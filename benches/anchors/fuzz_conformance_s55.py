#!/usr/bin/env python3
"""fuzz_conformance_ops.py with the session-55 families: seeded random
tensor programs with PyTorch's answers (group `fuzz_ops`, split `fuzz`),
replayed by crates/strata-tensor/tests/conformance.rs
(`project_conformance`).

For seeds below S55_SEED this draws exactly the cases of
fuzz_conformance_ops.py (the same file byte for byte; checked for seed
3296). From S55_SEED on it also draws S55_FAMILIES, layouts and dtypes
PyTorch users hit that the other families draw rarely:
- `half_layout`: unary ops (sqrt, rsqrt, reciprocal, abs, sign, neg,
  sigmoid, tanh, silu, gelu, exp, log, ...) of f16/bf16 (now and then
  f32/integer) inputs whose inner rows are around PyTorch's 32-element
  vector chunk (31, 32, 33, 64, 65), contiguous, transposed, permuted,
  stepped, narrowed or expanded; in place on a clone or the view too;
- `binary_layout`: add/sub/mul/div (with rounding modes)/maximum/minimum
  and comparisons between operands of different layouts (transposed
  against contiguous, expanded size-1 dims, new leading dims), mixed
  dtypes (f16 against bf16, integer against float, 0-d tensors of a higher
  category, Python scalars), size-0 and size-1 dims, in place too;
- `reduce_layout`: sum/mean (several, negative, repeated dims, keepdim),
  max/min/argmax/argmin along a dim (keepdim), var/std and logsumexp over
  several dims, of permuted, transposed and expanded inputs with tie-free
  exact values (sums exact whatever their order);
- `softmax_dims`: softmax/log_softmax/cumsum along every dim (negative
  too) of non-contiguous f16/bf16/f32/f64/integer inputs, with and without
  a dtype argument.
Their error steps take the class PyTorch's message names (`"?"`).

Usage (PyTorch on the CPU, one thread):
    OMP_NUM_THREADS=1 python3 benches/anchors/fuzz_conformance_s55.py \\
        [--seed 3310] [--count 1000] [--out /tmp/fuzz_ops_3310.json]
"""

import argparse
import json
import math
import platform
import random
import sys

import torch

import fuzz_conformance_ops as base
from fuzz_conformance_ops import (DTYPES, FLOATS, INTS, NAME, Case, Skip, dim_of, follow,
                                  s45_operand)

# The first seed that also draws S55_FAMILIES.
S55_SEED = 3310

CHUNKY = [1, 2, 3, 31, 32, 33, 63, 64, 65]


def chunky_shape(r, max_numel=400):
    """1-3 dims, one of them near a multiple of 32, the rest small (size-0
    and size-1 dims now and then)."""
    nd = r.choice([1, 1, 2, 2, 2, 3])
    s = [r.choice([0, 1, 2, 3, 4]) if r.random() < 0.15 else r.randrange(1, 5) for _ in range(nd)]
    s[r.randrange(nd)] = r.choice(CHUNKY)
    if math.prod(s) > max_numel:
        s = [min(d, 2) for d in s]
        s[r.randrange(nd)] = r.choice(CHUNKY)
    return s


def fam_half_layout(c):
    c.s45 = True
    r = c.rng
    op = r.choice(["sqrt", "rsqrt", "reciprocal", "abs", "sign", "neg", "sigmoid", "tanh",
                   "silu", "gelu", "exp", "log", "sin", "cos", "erf", "expm1", "log1p"])
    dt = r.choice(["f16", "bf16", "f16", "bf16", "f32", "f64", "i32", "u8", "bool"])
    shape = chunky_shape(r)
    x = c.operand(shape, dt, special=0.1, lo=0.0 if op in ("sqrt", "rsqrt", "log") else -4.0)
    if op == "gelu" and any(v == math.inf for v in c.env[x].double().reshape(-1).tolist()):
        raise Skip("gelu(+inf)")
    err = None
    if op in ("silu", "gelu") and dt not in FLOATS:
        err = "?"
    if op in ("abs", "neg") and dt == "bool":
        err = "?"
    y = c.step(op, [x], error=err)
    if (op in base.UNARY_FLOAT or op in ("abs", "sign")) and r.random() < 0.5:
        tgt = x if r.random() < 0.4 else c.step("clone", [x])
        t = c.env[tgt]
        e = None
        if dt not in FLOATS and op not in ("abs", "sign"):
            e = "?"
        if dt == "bool" and op == "abs":
            e = "?"
        if t.numel() > 1 and any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape)):
            e = "overlap" if e is None else e
        c.step(op + "_", [tgt], error=e)
    if y is not None and r.random() < 0.2:
        follow(c, y)


def fam_binary_layout(c):
    c.s45 = True
    r = c.rng
    op = r.choice(["add", "sub", "mul", "div", "div", "maximum", "minimum", "eq", "lt", "ge",
                   "ne"])
    dt = r.choice(["f16", "bf16", "f32", "f64", "i32", "i64", "u8", "bool", "f16", "bf16"])
    shape = chunky_shape(r, 300)
    x = c.operand(shape, dt, ints=(-6, 6), special=0.1, big=False)
    k = r.random()
    if k < 0.2 and op not in ("maximum", "minimum"):
        b = r.choice([{"int": r.choice([-2, 0, 3, 7])},
                      {"float": r.choice([0.5, -1.25, 3.0, "inf", "nan", -0.0])},
                      {"bool": True}])
    else:
        sh = list(shape)
        if r.random() < 0.5:
            sh = [1 if r.random() < 0.5 else d for d in sh]
        if r.random() < 0.3 and sh:
            sh = sh[r.randrange(1, len(sh) + 1):]
        if r.random() < 0.1:
            sh = [2] + sh
        dt2 = dt if r.random() < 0.5 else r.choice(DTYPES)
        b = c.operand(sh, dt2, ints=(-6, 6), special=0.1, big=False)
    for nm in [x] + ([b] if isinstance(b, str) else []):
        vals = c.env[nm].reshape(-1).tolist()
        if any(v in (-(2 ** 31), -(2 ** 63)) for v in vals if type(v) is int):
            raise Skip("integer division of the smallest integer")
    args = [x, b]
    if isinstance(b, str) and r.random() < 0.4:
        args = [b, x]
    if op == "div" and r.random() < 0.5:
        args.append(r.choice(["trunc", "floor"]))
    y = c.step(op, args, error="?")
    if op in ("add", "sub", "mul", "div") and r.random() < 0.3:
        iop = op + "_"
        tgt = c.step("clone", [args[0]])
        c.step(iop, [tgt] + args[1:], error="?")
    if y is not None and r.random() < 0.2:
        follow(c, y)


def fam_reduce_layout(c):
    c.s45 = True
    r = c.rng
    dt = r.choice(DTYPES + FLOATS)
    nd = r.choice([1, 2, 3, 3, 4])
    shape = base.rshape(r, nd, hi=4, zero_p=0.08)
    if r.random() < 0.5:
        shape[r.randrange(nd)] = r.choice([31, 32, 33])
    if math.prod(shape) > 500:
        raise Skip("large")
    x = s45_operand(c, shape, dt, pool_p=0.95)
    for _ in range(r.randrange(1, 3)):
        op = r.choice(["sum", "sum", "mean", "max", "min", "argmax", "argmin", "var", "std",
                       "logsumexp"])
        keep = r.random() < 0.5
        if op in ("sum", "mean", "var", "std", "logsumexp"):
            dims = r.sample(range(nd), r.randrange(1, nd + 1))
            dims = [d - nd if r.random() < 0.4 else d for d in dims]
            if op == "logsumexp":
                c.step(op, [x, dims, keep], error="?")
            elif op in ("var", "std"):
                if dt not in FLOATS:
                    raise Skip("var of an integer tensor")
                c.step(op, [x, dims, r.choice([0, 1]), keep], error="?")
            else:
                c.step(op, [x, dims, keep], error="?")
        elif op in ("max", "min"):
            d = dim_of(r, nd)
            c.step(op, [x, d, keep], out=[c.name("v"), c.name("i")], error="?")
        else:
            c.step(op, [x, dim_of(r, nd), keep], error="?")


def fam_softmax_dims(c):
    c.s45 = True
    r = c.rng
    dt = r.choice(["f16", "bf16", "f32", "f64", "f16", "bf16", "i64", "bool"])
    nd = r.choice([1, 2, 2, 3])
    shape = base.rshape(r, nd, hi=4, zero_p=0.05)
    if r.random() < 0.5:
        shape[r.randrange(nd)] = r.choice([15, 16, 17, 31, 32, 33])
    x = c.operand(shape, dt, special=0.05, big=False)
    op = r.choice(["softmax", "log_softmax", "cumsum"])
    d = dim_of(r, nd)
    odt = None
    if r.random() < 0.3:
        odt = r.choice(FLOATS) if op != "cumsum" else r.choice(FLOATS + ["i64"])
    y = c.step(op, [x, d] + ([odt] if odt else []), error="?")
    if y is not None and r.random() < 0.2:
        follow(c, y)


S55_FAMILIES = [("half_layout", fam_half_layout, 8), ("binary_layout", fam_binary_layout, 8),
                ("reduce_layout", fam_reduce_layout, 6), ("softmax_dims", fam_softmax_dims, 5)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=S55_SEED)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--out", default="conformance/fuzz_ops.json")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--only", default=None,
                    help="comma-separated family names: draw only these (a different "
                         "program set than the seed's default; the case ids say so)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    families = base.FAMILIES + (base.S44_FAMILIES if args.seed >= base.S44_SEED else []) + \
        (base.S45_FAMILIES if args.seed >= base.S45_SEED else []) + \
        (S55_FAMILIES if args.seed >= S55_SEED else [])
    if args.only:
        keep = set(args.only.split(","))
        families = [f for f in families if f[0] in keep]
        assert families, "no family named in --only"
    total_w = sum(w for _, _, w in families)
    cases, skipped = [], {}
    attempt = 0
    while len(cases) < args.count:
        attempt += 1
        x = rng.random() * total_w
        for fname, fn, w in families:
            x -= w
            if x < 0:
                break
        seed = rng.randrange(2 ** 32)
        tag = "o" if args.only else ""
        c = Case(random.Random(seed), f"fuzz_ops.s{args.seed}{tag}_{fname}_{len(cases):04d}",
                 f"random {fname} program (case seed {seed})")
        try:
            fn(c)
            if not c.steps:
                raise Skip("no step")
            cases.append(c.finish())
        except Skip as e:
            key = f"{fname}: {str(e)[:90]}"
            skipped[key] = skipped.get(key, 0) + 1
    # Below S55_SEED the generator line names the script whose cases these are.
    script = "fuzz_conformance_s55.py" if args.seed >= S55_SEED else "fuzz_conformance_ops.py"
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
