#!/usr/bin/env python3
"""Session-59 families: seeded random tensor programs with PyTorch's answers
(group `fuzz_ops`, split `fuzz`), replayed unchanged by
crates/strata-tensor/tests/conformance.rs (`project_conformance`).

The earlier generators (fuzz_conformance_ops.py, _core.py, _s55.py,
_s56.py, _s58.py) mostly draw one op, or one op and a follower, on
operands built by one view step. This script draws what they leave out
(every seed draws only S59_FAMILIES, so its programs are new for any seed):
- `pipeline`: compositions of 3-7 steps: an operand built by a view step,
  one or two more view steps (transpose, permute, slice, narrow, select,
  unsqueeze, t, split/chunk/unbind pieces, non-overlapping as_strided),
  an in-place op through that view (add_/sub_/mul_/div_ with rounding
  modes, clamp_, masked_fill_, copy_, addcmul_, abs_/neg_/relu_/sign_,
  triu_/tril_, scatter_add_, pow_, fill_, zero_) whose other operand is a
  fresh tensor, a 0-d tensor or a scalar of another dtype, the view itself
  or a disjoint sibling view of the same base, then an element-wise op of
  the (non-contiguous) base or view, then a reduction, scan, index or
  matmul step of that result (sum/mean whose exact value is the answer,
  max/min/argmax/argmin along a dim, cumsum, logsumexp, softmax, var/std,
  vector_norm, gather/index_select, mm/matmul of exact products);
- `promote_pairs`: every ordered pair of the eight dtypes through add/sub/
  mul/div (each rounding mode)/pow/maximum/minimum/comparisons/where/
  addcmul/cat/stack and the in-place forms, with each operand a tensor
  with dims, a 0-d tensor or a Python scalar of each kind;
- `int_divmod`: integer and bool div (true, trunc, floor) and div_ with
  negative operands, zero dividends, ±1 and large divisors, int scalars of
  each sign (integer division by zero with a rounding mode is an error),
  pow of integers with negative tensor exponents, 0^0 and (-1)^n;
- `where_bcast`: where whose condition, a and b each broadcast against the
  others (0-d condition, size-1 and size-0 dims, new leading dims), u8
  conditions, scalar and 0-d branches of every dtype, then a reduction of
  the result;
- `scan_ties`: cumsum along every dim (with and without a dtype) of values
  with NaN and ±inf; max/min/argmax/argmin along every dim of tie-heavy
  values (expanded inputs: all ties) with NaN;
- `index_accum`: scatter_add/scatter_add_/gather/index_select/embedding
  along every dim with duplicate indices, index tensors that are
  transposed, expanded or sliced, src larger than the index, then a
  reduction of the result;
- `join_split`: split/chunk into pieces, an in-place op on one piece seen
  in the base, cat/stack of the pieces in another order (negative dims,
  empty pieces, the legacy 1-D empty operand);
- `softmax_rows`: softmax/log_softmax/logsumexp/vector_norm over every dim
  of inputs with -inf, all -inf, +inf and NaN rows, non-contiguous, with a
  dtype argument, followed by an element-wise op of the result;
- `loss_views`: cross_entropy/nll_loss/mse_loss whose input, target and
  weight are transposed, sliced or expanded views, with weights holding 0
  and negative values, ignore_index hits, every reduction.
Error steps take the class PyTorch's message names (`"?"`); a step PyTorch
refuses with a message no classifier knows leaves the case out.

Left out, as the other generators document: float -> integer conversions
of NaN/inf/out-of-range values; integer division of the smallest integer by
-1 (SIGFPE on x86); float sums, means and matmuls whose value depends on the
order of the additions (a sum is kept only when PyTorch's answer equals the
exact sum rounded once; a matmul only when its operands are small dyadic
values whose exact product is representable in the result dtype); accepted
in-place writes whose result depends on the order PyTorch visits
overlapping elements; gelu(+inf).

Usage (PyTorch on the CPU, one thread):
    OMP_NUM_THREADS=1 python3 benches/anchors/fuzz_conformance_s59.py \\
        [--seed 3500] [--count 1000] [--out /tmp/fuzz_s59_3500.json]
"""

import argparse
import json
import math
import platform
import random
import sys

import torch

import fuzz_conformance_ops as base
import fuzz_conformance_s56 as s56
import fuzz_conformance_s58 as s58
from fuzz_conformance_ops import DTYPES, FLOATS, INTS, NAME, Skip, rshape
from fuzz_conformance_s58 import (Case58, exact_sum_ok, int_vals, lay, self_aliasing,
                                  small_vals)

S59_SEED = 3500
args_seed = [S59_SEED]


def dims_of(r, nd):
    return r.randrange(-max(nd, 1), max(nd, 1))


def sv_of(r):
    return lambda d, k: small_vals(r, d, k)


def mixed_vals(r, p_special=0.1):
    """Small dyadic values with some specials (floats) or limits (ints)."""
    def f(d, k):
        out = []
        for _ in range(k):
            if d == "bool":
                out.append(r.random() < 0.5)
            elif d in INTS:
                if r.random() < p_special:
                    out.extend(int_vals(r, d, 1))
                else:
                    out.append(r.randrange(0, 8) if d == "u8" else r.randrange(-6, 7))
            elif r.random() < p_special:
                out.append(r.choice([math.nan, math.inf, -math.inf, -0.0]))
            else:
                out.append(r.randrange(-16, 17) / 4)
        return out
    return f


def rand_vals(r):
    """Random floats that round (gauss at several scales, subnormals,
    values near the dtype's overflow), small and large integers: answers
    that depend on how and when each operation rounds."""
    def f(d, k):
        out = []
        for _ in range(k):
            if d == "bool":
                out.append(r.random() < 0.5)
            elif d in INTS:
                out.extend(int_vals(r, d, 1) if r.random() < 0.3 else
                           [r.randrange(0, 256) if d == "u8" else r.randrange(-300, 301)])
            else:
                kk = r.random()
                if kk < 0.6:
                    v = r.gauss(0.0, 1.0) * r.choice([1.0, 1.0, 10.0, 1000.0, 1e-3])
                elif kk < 0.7:
                    v = r.choice([1e-40, -3e-39, 5e-8, 6e-5, 1e-310, 2 ** -24 * 3])
                elif kk < 0.8:
                    v = r.choice([65519.0, 65520.0, -65504.5, 3.39e38, 3.4028235e38, 1e300,
                                  -1e39, 70000.0])
                elif kk < 0.9:
                    v = r.randrange(-20, 21) + r.choice([0.5, 0.25, 0.0, 1 / 3])
                else:
                    v = r.choice([math.nan, math.inf, -math.inf, -0.0, 0.0])
                v = float(torch.tensor(v, dtype=torch.float64).to(base.TDT[d]))
                out.append(v)
        return out
    return f


def vals_of(r, p_special=0.1):
    """mixed_vals, or (one operand in four) rand_vals."""
    return rand_vals(r) if r.random() < 0.25 else mixed_vals(r, p_special)


def dyadic_ok(t, bound=256.0, q=64):
    """All values finite, multiples of 1/q, and at most bound in magnitude:
    their products and short sums are exact in f32."""
    v = t.double().reshape(-1)
    if v.numel() == 0:
        return True
    if not bool(torch.isfinite(v).all()):
        return False
    if float(v.abs().max()) > bound:
        return False
    return bool(((v * q) == (v * q).round()).all())


def guard_sum(c, out, src, dims, keep, mean=False):
    if out is None or c.steps[-1].get("error") is not None:
        return
    if not exact_sum_ok(c, c.env[out], c.env[src], dims, keep, mean=mean):
        raise Skip("float sum whose value depends on the order of the additions")


def guard_matmul(c, out, a, b):
    if out is None or c.steps[-1].get("error") is not None:
        return
    res = c.env[out]
    if not res.is_floating_point():
        return
    ta, tb = c.env[a], c.env[b]
    if not (dyadic_ok(ta) and dyadic_ok(tb)):
        raise Skip("matmul operands not small dyadic (order-dependent sums)")
    ref = torch.matmul(ta.double(), tb.double())
    if not torch.equal(ref.to(res.dtype).double(), ref):
        raise Skip("matmul result not representable exactly in its dtype")


def view_step(c, cur, writable=True):
    """One view step of `cur` (a view that never repeats elements when
    writable); returns the new name or None."""
    r = c.rng
    t = c.env[cur]
    n = t.dim()
    kinds = ["unsqueeze"]
    if n >= 1:
        kinds += ["slice", "narrow", "select", "split", "chunk", "unbind", "flip_strided"]
    if n >= 2:
        kinds += ["transpose", "transpose", "t" if n == 2 else "transpose", "permute"]
    if not writable and n >= 1:
        kinds.append("expand")
    k = r.choice(kinds)
    dim = dims_of(r, n)
    if k == "unsqueeze":
        out = c.step(k, [cur, r.randrange(-n - 1, n + 1)], error="?")
    elif k == "slice":
        out = c.step(k, [cur, dim, r.choice([None, 0, 1, -2]), r.choice([None, -1, 3]),
                         r.choice([1, 2, 2, 3])], error="?")
    elif k == "narrow":
        sz = t.shape[dim] if n else 0
        st = r.randrange(0, sz + 1) if sz else 0
        out = c.step(k, [cur, dim, st, r.randrange(0, sz - st + 1) if sz - st > 0 else 0],
                     error="?")
    elif k == "select":
        if t.shape[dim] == 0:
            return None
        out = c.step(k, [cur, dim, r.randrange(-t.shape[dim], t.shape[dim])], error="?")
    elif k in ("split", "chunk"):
        a2 = r.choice([1, 2]) if k == "split" else r.randrange(1, 4)
        if k == "split" and t.shape[dim] == 0:
            a2 = r.choice([0, 1])
        out = c.step(k, [cur, a2, dim], out=[c.name("p")], error="?")
    elif k == "unbind":
        out = c.step(k, [cur, dim], out=[c.name("p")], error="?")
    elif k == "flip_strided":
        if not any(base.sid(c.env[i["name"]]) == base.sid(t) for i in c.inputs):
            # the storage of a result is laid out by the op (strides: not
            # this generator's subject)
            return None
        # a non-overlapping as_strided view: a transposed walk of x's own
        # (contiguous, fresh) storage
        st = t.untyped_storage().nbytes() // t.element_size()
        if st < 2:
            return None
        a_ = r.choice([x for x in range(1, st + 1) if st % x == 0])
        b_ = st // a_
        out = c.step("as_strided", [cur, [b_, a_], [1, b_], 0], error="?")
    elif k == "transpose":
        out = c.step(k, [cur, dim, dims_of(r, n)], error="?")
    elif k == "t":
        out = c.step(k, [cur], error="?")
    elif k == "permute":
        p = list(range(n))
        r.shuffle(p)
        out = c.step(k, [cur, [x - n if r.random() < 0.3 else x for x in p]], error="?")
    else:
        out = c.step(k, [cur, [2] + [-1] * n], error="?")
    if out is None:
        return None
    if isinstance(out, list):
        if not out:
            return None
        out = out[r.randrange(len(out))]
    return out


INPLACE = ["add_", "sub_", "mul_", "div_", "div_", "clamp_", "masked_fill_", "copy_",
           "addcmul_", "abs_", "neg_", "relu_", "sign_", "triu_", "tril_", "scatter_add_",
           "pow_", "fill_", "zero_"]


def other_of(c, v, base_name, dt):
    """The other operand of an in-place op on view v."""
    r = c.rng
    t = c.env[v]
    sh = list(t.shape)
    k = r.random()
    if k < 0.35:
        odt = dt if r.random() < 0.5 else r.choice(DTYPES)
        sh2 = sh[r.randrange(0, len(sh) + 1):] if sh else []
        sh2 = [1 if r.random() < 0.2 else d for d in sh2]
        return lay(c, sh2, odt, vals_of(r, 0.05))
    if k < 0.5:
        return lay(c, [], r.choice(DTYPES), vals_of(r, 0.05))
    if k < 0.7:
        return r.choice([{"int": r.choice([2, -3, 0, 1, 255, -1])},
                         {"float": r.choice([0.5, -1.5, 2.0, "inf", "nan", -0.0, 0.25])},
                         {"bool": r.random() < 0.5}])
    if k < 0.8:
        return v
    # a sibling view of the same base: the mirror of v's walk, often
    # overlapping it (PyTorch refuses a partial overlap)
    b = c.env[base_name]
    if b.dim() == 0 or b.shape[0] < 2:
        return v
    half = b.shape[0] // 2
    s = c.step("narrow", [base_name, 0, half, half], error="?")
    if s is None or list(c.env[s].shape) != sh:
        s2 = c.step("narrow", [base_name, 0, 0, half], error="?")
        if s2 is None or list(c.env[s2].shape) != sh:
            return v
        return s2
    return s


def inplace_on(c, v, base_name):
    r = c.rng
    t = c.env[v]
    dt = NAME[t.dtype]
    op = r.choice(INPLACE)
    if self_aliasing(t) and op not in ("fill_", "zero_", "masked_fill_"):
        op = r.choice(["fill_", "zero_", "masked_fill_"])
    sh = list(t.shape)
    if op in ("add_", "sub_", "mul_", "div_", "copy_", "pow_"):
        o = other_of(c, v, base_name, dt)
        if op == "copy_" and isinstance(o, dict):
            # copy_ takes a tensor (PyTorch also wraps a Python number)
            o = lay(c, [], r.choice(DTYPES), vals_of(r, 0.05))
        args = [v, o]
        if op == "div_" and r.random() < 0.6:
            args.append(r.choice(["trunc", "floor"]))
        if op == "div_" and isinstance(o, str) and len(args) == 3 and \
                NAME[c.env[o].dtype] not in FLOATS and dt not in FLOATS and \
                0 in c.env[o].reshape(-1).tolist():
            pass  # an error (value) PyTorch reports before writing
        if op == "div_" and isinstance(o, str) and NAME[c.env[o].dtype] in INTS and \
                dt in INTS and any(x == -1 for x in c.env[o].reshape(-1).tolist()) and \
                any(x in (-(2 ** 31), -(2 ** 63)) for x in t.reshape(-1).tolist()):
            raise Skip("smallest integer divided by -1 (SIGFPE)")
    elif op == "clamp_":
        lo = r.choice([None, {"int": -1}, {"float": -0.5}, {"int": 0}, {"float": "nan"}])
        hi = r.choice([None, {"int": 2}, {"float": 1.5}, {"int": -2}])
        if lo is None and hi is None:
            hi = {"int": 1}
        args = [v, lo, hi]
    elif op == "masked_fill_":
        msh = sh[r.randrange(0, len(sh) + 1):] if sh else []
        mk = lay(c, msh, "bool")
        val = r.choice([{"int": 1}, {"float": -2.5}, {"bool": True},
                        lay(c, [], r.choice(DTYPES), mixed_vals(r, 0.0))])
        args = [v, mk, val]
    elif op == "addcmul_":
        t1 = other_of(c, v, base_name, dt)
        if isinstance(t1, dict):
            t1 = v
        t2 = lay(c, sh[r.randrange(0, len(sh) + 1):] if sh else [], r.choice([dt, "f32", "i64"]),
                 vals_of(r, 0.05))
        args = [v, t1, t2, r.choice([{"int": 1}, {"int": -2}, {"float": 0.5}])]
    elif op in ("triu_", "tril_"):
        args = [v, r.randrange(-2, 3)]
    elif op == "scatter_add_":
        if not sh or 0 in sh:
            args = [v]
            op = "neg_"
        else:
            d = dims_of(r, len(sh))
            ish = [r.randrange(1, s + 1) for s in sh]
            idx = c.input(ish, "i64", [r.randrange(0, sh[d]) for _ in range(math.prod(ish))],
                          p="i")
            src = lay(c, ish, dt, mixed_vals(r, 0.0))
            args = [v, d, idx, src]
    elif op == "fill_":
        args = [v, r.choice([{"int": 3}, {"float": -0.5}, {"bool": True}])]
    else:
        args = [v]
    env_before = {k: x.clone() for k, x in c.env.items()}
    c.step(op, args, error="?")
    if c.steps[-1].get("error") is None and op not in ("fill_", "zero_"):
        # the answer must not depend on the order of overlapping writes
        probe = s58.env_before_view(c, env_before, v)
        oargs = [probe] + [(env_before[x].clone() if isinstance(x, str) and x in env_before
                            else c.arg(x)) for x in args[1:]]
        try:
            s58.run_op(op, oargs, args, c)
        except Exception:  # noqa: BLE001
            raise Skip("reference of the in-place op failed")
        got = c.env[v]
        if probe.stride() != got.stride() or not torch.equal(
                probe.double().nan_to_num(7.25), got.double().nan_to_num(7.25)):
            raise Skip("in-place result depends on the order of overlapping writes")
        if probe.is_floating_point() and not torch.equal(torch.signbit(probe),
                                                          torch.signbit(got)):
            raise Skip("in-place zero signs depend on the order of overlapping writes")


def elementwise_of(c, x):
    r = c.rng
    t = c.env[x]
    dt = NAME[t.dtype]
    k = r.random()
    if k < 0.35:
        op = r.choice(["neg", "abs", "sign", "relu", "sqrt", "exp", "reciprocal", "sigmoid",
                       "tanh", "clamp", "to_dtype"])
        if op == "clamp":
            return c.step(op, [x, r.choice([None, {"int": -1}, {"float": 0.5}, {"float": 0.1}]),
                               r.choice([{"int": 2}, {"float": 2.5}, {"float": 1e5}])],
                      error="?")
        if op == "to_dtype":
            odt = r.choice(DTYPES)
            if dt in FLOATS and odt not in FLOATS and odt != "bool":
                v = t.double()
                if not bool(torch.isfinite(v).all()) or (v.numel() and
                                                         float(v.abs().max()) > 100):
                    raise Skip("float -> integer of non-finite or large values")
            return c.step(op, [x, odt], error="?")
        return c.step(op, [x], error="?")
    if k < 0.8:
        op = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "eq", "lt", "ge",
                       "pow", "where"])
        sh = list(t.shape)
        if r.random() < 0.4:
            sh = [1 if r.random() < 0.5 else d for d in sh]
        if r.random() < 0.3 and sh:
            sh = sh[r.randrange(1, len(sh) + 1):]
        odt = dt if r.random() < 0.5 else r.choice(DTYPES)
        if r.random() < 0.25:
            o = r.choice([{"int": 2}, {"float": -0.5}, {"bool": True}, {"int": -3}])
        else:
            o = lay(c, sh, odt, vals_of(r, 0.05))
        if op == "where":
            cond = lay(c, sh if not isinstance(o, dict) else list(t.shape), "bool")
            return c.step(op, [cond, x, o] if r.random() < 0.5 else [cond, o, x], error="?")
        args = [x, o] if r.random() < 0.7 or isinstance(o, dict) else [o, x]
        if op in ("maximum", "minimum") and isinstance(o, dict):
            args = [x, lay(c, [], r.choice(DTYPES), vals_of(r, 0.05))]
        if op == "div" and r.random() < 0.5:
            args.append(r.choice(["trunc", "floor"]))
            num, den = (c.arg(a) for a in args[:2])
            den_t = den if isinstance(den, torch.Tensor) else torch.tensor(den)
            num_t = num if isinstance(num, torch.Tensor) else torch.tensor(num)
            if not den_t.is_floating_point() and not num_t.is_floating_point() and \
                    den_t.dtype != torch.bool and bool((den_t == -1).any()) and \
                    bool((num_t <= -(2 ** 31)).any()):
                raise Skip("smallest integer divided by -1 (SIGFPE)")
        return c.step(op, args, error="?")
    return c.step("addcmul", [x, lay(c, list(t.shape), dt, vals_of(r, 0.05)),
                              lay(c, [], r.choice(DTYPES), vals_of(r, 0.0)),
                              r.choice([{"int": 1}, {"float": -0.5}])], error="?")


def reduce_of(c, y):
    r = c.rng
    t = c.env[y]
    n = t.dim()
    dt = NAME[t.dtype]
    op = r.choice(["sum", "sum", "mean", "max", "min", "argmax", "argmin", "cumsum",
                   "logsumexp", "softmax", "var", "vector_norm", "gather", "index_select",
                   "matmul", "mm"])
    keep = r.random() < 0.4
    if op in ("sum", "mean"):
        dims = r.choice([None, [dims_of(r, n)], [dims_of(r, n), dims_of(r, n)], []])
        out = c.step(op, [y, dims, keep], error="?")
        guard_sum(c, out, y, dims, keep, mean=op == "mean")
    elif op in ("max", "min"):
        if r.random() < 0.3:
            c.step(op, [y], error="?")
        else:
            c.step(op, [y, dims_of(r, n), keep], out=[c.name("v"), c.name("i")], error="?")
    elif op in ("argmax", "argmin"):
        c.step(op, [y, r.choice([None, dims_of(r, n)]), keep], error="?")
    elif op == "cumsum":
        odt = r.choice([None, None, "i64", "f64", "f32"])
        if odt in ("i64",) and dt in FLOATS:
            v = t.double()
            if not bool(torch.isfinite(v).all()) or (v.numel() and float(v.abs().max()) > 100):
                raise Skip("cumsum of non-finite floats to an integer dtype")
        if dt in FLOATS and not dyadic_ok(t):
            raise Skip("float cumsum of non-dyadic values (order within tolerance only)")
        c.step(op, [y, dims_of(r, n)] + ([odt] if odt else []), error="?")
    elif op == "logsumexp":
        c.step(op, [y, [dims_of(r, n)], keep], error="?")
    elif op == "softmax":
        c.step(r.choice(["softmax", "log_softmax"]), [y, dims_of(r, n)] +
               ([r.choice(["f32", "f64"])] if r.random() < 0.5 else []), error="?")
    elif op == "var":
        c.step(r.choice(["var", "std"]), [y, r.choice([None, [dims_of(r, n)]]),
                                          r.choice([None, 0, 1, 2]), keep], error="?")
    elif op == "vector_norm":
        p = r.choice([{"int": 2}, {"int": 1}, {"float": "inf"}, {"int": 0}, {"float": "-inf"}])
        c.step(op, [y, p, r.choice([None, [dims_of(r, n)]]), keep], error="?")
    elif op in ("gather", "index_select"):
        if n == 0 or 0 in t.shape:
            c.step("argmax", [y], error="?")
            return
        d = dims_of(r, n)
        sz = t.shape[d]
        if op == "gather":
            ish = [r.randrange(1, s + 1) for s in t.shape]
            ish[d] = r.randrange(1, 4)
            idx = c.input(ish, r.choice(["i64", "i32"]),
                          [r.randrange(0, sz) for _ in range(math.prod(ish))], p="i")
        else:
            k = r.randrange(0, 4)
            idx = c.input([k], r.choice(["i64", "i32"]), [r.randrange(0, sz) for _ in range(k)],
                          p="i")
        c.step(op, [y, d, idx], error="?")
    else:
        if n == 0:
            c.step("sum", [y], error="?")
            return
        if op == "mm" and n != 2:
            op = "matmul"
        k = t.shape[-1]
        bdt = dt if r.random() < 0.85 else r.choice(DTYPES)
        b = lay(c, [k, r.randrange(0, 4)] if r.random() < 0.8 or op == "mm" else [k], bdt,
                sv_of(r))
        out = c.step(op, [y, b], error="?")
        guard_matmul(c, out, y, b)


def fam_pipeline(c):
    c.s45 = True
    r = c.rng
    nd = r.choice([1, 2, 2, 3, 3, 4])
    shape = rshape(r, nd, hi=4, zero_p=0.05)
    dt = r.choice(DTYPES + FLOATS + ["i64", "i32"])
    x0 = lay(c, shape, dt, vals_of(r, 0.06))
    base_name = x0
    # the base of the in-place write: an input, so that its siblings exist
    while c.made_by.get(base_name) is not None:
        st = next(s for s in c.steps if s.get("out") == base_name)
        base_name = st["args"][0]
    v = x0
    for _ in range(r.randrange(1, 3)):
        nv = view_step(c, v)
        if nv is None or not isinstance(c.env.get(nv), torch.Tensor):
            break
        v = nv
    inplace_on(c, v, base_name)
    src = r.choice([v, base_name, x0])
    y = elementwise_of(c, src)
    if y is None:
        return
    if r.random() < 0.35:
        y2 = view_step(c, y, writable=False)
        if y2 is not None and isinstance(c.env.get(y2), torch.Tensor):
            y = y2
    reduce_of(c, y)


def operand_kind(c, kind, dt, shape):
    r = c.rng
    if kind == "scalar":
        if dt == "bool":
            return {"bool": r.random() < 0.5}
        if dt in FLOATS:
            return {"float": r.choice([0.5, -2.5, 3.0, -0.0, "inf", "nan", 1e10, 70000.0,
                                       0.1])}
        return {"int": r.choice([0, 1, -1, 3, -7, 255, 256, 2 ** 31])}
    if kind == "0d":
        return lay(c, [], dt, vals_of(r, 0.1))
    return lay(c, shape, dt, vals_of(r, 0.1))


BIN = ["add", "sub", "mul", "div", "div_t", "div_f", "pow", "maximum", "minimum", "eq", "ne",
       "lt", "le", "gt", "ge", "where", "addcmul", "cat", "stack", "add_", "sub_", "mul_",
       "div_", "pow_", "copy_", "masked_fill"]


def fam_promote_pairs(c):
    c.s45 = True
    r = c.rng
    # a systematic walk over the dtype pairs, with the op drawn
    i = int(c.id.rsplit("_", 1)[1])
    da, db = DTYPES[i % 8], DTYPES[(i // 8) % 8]
    if r.random() < 0.3:
        da, db = r.choice(DTYPES), r.choice(DTYPES)
    op = r.choice(BIN)
    nd = r.choice([1, 1, 2, 2, 3])
    shape = rshape(r, nd, hi=3, zero_p=0.05)
    ka = r.choice(["dim", "dim", "0d"])
    kb = r.choice(["dim", "0d", "scalar"])
    if op in ("cat", "stack"):
        sh2 = list(shape)
        a = operand_kind(c, "dim" if ka == "dim" or op == "cat" else "0d", da, shape)
        b = lay(c, sh2 if r.random() < 0.8 else [0], db, vals_of(r, 0.1))
        if op == "stack" and ka == "0d":
            b = lay(c, [], db, vals_of(r, 0.1))
        c.step(op, [[a, b] if r.random() < 0.5 else [b, a], dims_of(r, nd)], error="?")
        return
    a = operand_kind(c, ka, da, shape)
    sh_b = [1 if r.random() < 0.3 else d for d in shape][r.randrange(0, nd + 1):]
    b = operand_kind(c, kb, db, sh_b)
    if op == "where":
        cond = lay(c, shape if r.random() < 0.7 else [], "bool")
        y = c.step("where", [cond, a, b] if r.random() < 0.5 else [cond, b, a], error="?")
    elif op == "addcmul":
        t2 = operand_kind(c, r.choice(["dim", "0d"]), r.choice(DTYPES), sh_b)
        if isinstance(b, dict):
            b = operand_kind(c, "0d", db, [])
        y = c.step("addcmul", [a, b, t2, r.choice([{"int": 2}, {"float": 0.5},
                                                   {"bool": True}])], error="?")
    elif op == "masked_fill":
        mk = lay(c, sh_b, "bool")
        val = b if isinstance(b, dict) or c.env[b].dim() == 0 else operand_kind(c, "0d", db, [])
        y = c.step("masked_fill", [a, mk, val], error="?")
    elif op in ("maximum", "minimum"):
        if isinstance(b, dict):
            b = operand_kind(c, "0d", db, [])
        y = c.step(op, [a, b] if r.random() < 0.5 else [b, a], error="?")
    elif op == "copy_":
        if isinstance(b, dict):
            b = operand_kind(c, "0d", db, [])
        tb = c.env[b]
        if NAME[tb.dtype] in FLOATS and da not in FLOATS and da != "bool":
            v = tb.double()
            if not bool(torch.isfinite(v).all()) or (v.numel() and float(v.abs().max()) > 100):
                raise Skip("float -> integer copy of non-finite or large values")
        c.step("copy_", [a, b], error="?")
        y = a
    else:
        mode = None
        if op in ("div_t", "div_f"):
            mode = "trunc" if op == "div_t" else "floor"
            op = "div"
        elif op == "div_" and r.random() < 0.5:
            mode = r.choice(["trunc", "floor"])
        args = [a, b] if r.random() < 0.8 or op.endswith("_") or isinstance(b, dict) else [b, a]
        if op == "pow" and isinstance(args[0], dict):
            args = [a, b]
        if mode:
            args.append(mode)
            num, den = (c.arg(x) for x in args[:2])
            if isinstance(num, torch.Tensor) and not num.is_floating_point() and \
                    bool((num <= -(2 ** 31)).any()) and bool((torch.as_tensor(den) == -1).any()):
                raise Skip("smallest integer divided by -1 (SIGFPE)")
        y = c.step(op, args, error="?")
        if op.endswith("_"):
            y = a if c.steps[-1].get("error") is None else None
    if y is not None and isinstance(c.env.get(y), torch.Tensor) and r.random() < 0.3:
        reduce_of(c, y)


def fam_int_divmod(c):
    c.s45 = True
    r = c.rng
    da = r.choice(["i32", "i64", "u8", "i32", "i64", "bool"])
    db = r.choice(["i32", "i64", "u8", "bool", "f32", da, da])
    nd = r.choice([0, 1, 1, 2])
    shape = rshape(r, nd, hi=4, zero_p=0.05)

    def iv(d, k):
        out = []
        for _ in range(k):
            if d == "bool":
                out.append(r.random() < 0.6)
            elif d == "u8":
                out.append(r.choice([0, 1, 2, 3, 7, 128, 254, 255, r.randrange(0, 256)]))
            elif d in ("i32", "i64"):
                lo, hi = s58.LIMITS[d]
                out.append(r.choice([0, 1, -1, 2, -2, 3, -3, 7, -7, 10, -10, hi, lo + 1,
                                     r.randrange(-100, 101)]))
            else:
                out.append(r.choice([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -7.0, 0.5]))
        return out
    a = lay(c, shape, da, iv)
    op = r.choice(["div", "div", "div_", "pow", "pow", "pow_"])
    if r.random() < 0.35:
        b = {"int": r.choice([0, 1, -1, 2, -2, 3, -3, 7, -7, 256, -256, 2 ** 31, -(2 ** 31)])}
        if op.startswith("pow") and r.random() < 0.5:
            b = {"int": r.choice([0, 1, 2, 3, 31, 63, 64, -1, -2])}
    else:
        sh = shape[r.randrange(0, nd + 1):] if nd else []
        b = lay(c, [1 if r.random() < 0.3 else d for d in sh], db, iv)
    args = [a, b]
    if op.startswith("div"):
        args.append(r.choice([None, "trunc", "floor", "floor", "trunc"]))
        if args[-1] is None:
            args.pop()
        den = c.arg(b)
        den_t = torch.as_tensor(den)
        if bool((den_t == -1).any()) and bool((c.env[a] <= -(2 ** 31)).any()):
            raise Skip("smallest integer divided by -1 (SIGFPE)")
    elif r.random() < 0.3 and not isinstance(b, dict):
        args = [b, a]
    y = c.step(op, args, error="?")
    if op.endswith("_"):
        y = a if c.steps[-1].get("error") is None else None
    if y is not None and r.random() < 0.3:
        t = c.env[y]
        if not t.is_floating_point():
            if r.random() < 0.5:
                c.step("sum", [y, None, False], error="?")
            else:
                c.step("cumsum", [y, dims_of(r, t.dim())], error="?")


def fam_where_bcast(c):
    c.s45 = True
    r = c.rng
    nd = r.choice([1, 2, 2, 3])
    full = rshape(r, nd, hi=3, zero_p=0.08)

    def sub_shape():
        k = r.random()
        if k < 0.2:
            return []
        sh = full[r.randrange(0, nd + 1):]
        return [1 if r.random() < 0.4 else d for d in sh]
    cdt = "bool" if r.random() < 0.85 else "u8"
    cond = lay(c, sub_shape(), cdt, lambda d, k: [r.random() < 0.5 if d == "bool" else
                                                  r.randrange(0, 3) for _ in range(k)])

    def branch():
        k = r.random()
        dt = r.choice(DTYPES)
        if k < 0.2:
            return operand_kind(c, "scalar", dt, [])
        return lay(c, sub_shape(), dt, vals_of(r, 0.05))
    a, b = branch(), branch()
    y = c.step("where", [cond, a, b], error="?")
    if y is None:
        return
    k = r.random()
    if k < 0.5:
        reduce_of(c, y)
    elif k < 0.75 and c.env[y].dim() >= 1:
        v = view_step(c, y)
        if v is not None and isinstance(c.env.get(v), torch.Tensor):
            inplace_on(c, v, y)


def fam_scan_ties(c):
    c.s45 = True
    r = c.rng
    dt = r.choice(DTYPES + FLOATS)
    nd = r.choice([1, 2, 2, 3])
    shape = rshape(r, nd, hi=4, zero_p=0.05)

    def tv(d, k):
        out = []
        for _ in range(k):
            if d == "bool":
                out.append(r.random() < 0.5)
            elif d in INTS:
                out.append(r.choice([0, 1, 1, 2, 2, 5] + ([-1, -5] if d != "u8" else [255])))
            else:
                out.append(r.choice([0.0, -0.0, 1.0, 1.0, 2.0, -1.0, math.nan, math.inf,
                                     -math.inf, 0.5]))
        return out
    x = lay(c, shape, dt, tv)
    op = r.choice(["cumsum", "cumsum", "max", "min", "argmax", "argmin"])
    for _ in range(r.randrange(1, 3)):
        d = dims_of(r, nd)
        if op == "cumsum":
            odt = r.choice([None, None, "i64", "i32", "f32", "f64", "f16"])
            if odt in ("i64", "i32") and dt in FLOATS:
                odt = "f64"
            c.step(op, [x, d] + ([odt] if odt else []), error="?")
        elif op in ("max", "min"):
            c.step(op, [x, d, r.random() < 0.5], out=[c.name("v"), c.name("i")], error="?")
        else:
            c.step(op, [x, d, r.random() < 0.5], error="?")


def fam_index_accum(c):
    c.s45 = True
    r = c.rng
    dt = r.choice(DTYPES + ["f32", "i64"])
    nd = r.choice([1, 2, 2, 3])
    shape = [r.randrange(1, 4) for _ in range(nd)]
    x = lay(c, shape, dt, sv_of(r))
    d = dims_of(r, nd)
    sz = shape[d]
    op = r.choice(["scatter_add", "scatter_add_", "gather", "index_select", "embedding"])
    idt = r.choice(["i64", "i64", "i32"])

    def idx_of(ish, hi):
        # duplicate-heavy indices, often built by a view step
        pool = [r.randrange(0, hi) for _ in range(2)]
        return lay(c, ish, idt, lambda dd, k: [r.choice(pool) for _ in range(k)],
                   layout=r.choice(["contig", "transpose", "expand", "slice"])
                   if len(ish) >= 2 else r.choice(["contig", "expand", "slice"]))
    if op in ("scatter_add", "scatter_add_"):
        ish = [r.randrange(1, s + 1) for s in shape]
        ish[d] = r.randrange(1, 5)
        idx = idx_of(ish, sz)
        ssh = [s + r.randrange(0, 2) for s in ish]
        src = lay(c, ssh, dt, sv_of(r))
        if dt == "bool" and op == "scatter_add_":
            pass
        c.step(op, [x, d, idx, src], error="?")
        y = x if op == "scatter_add_" else (c.steps[-1].get("out"))
    elif op == "gather":
        ish = [r.randrange(1, s + 1) for s in shape]
        ish[d] = r.randrange(1, 5)
        y = c.step(op, [x, d, idx_of(ish, sz)], error="?")
    elif op == "index_select":
        k = r.randrange(0, 5)
        idx = lay(c, [k], idt, lambda dd, kk: [r.randrange(0, sz) for _ in range(kk)],
                  layout=r.choice(["contig", "slice", "expand"]))
        y = c.step(op, [x, d, idx], error="?")
    else:
        w = lay(c, [r.randrange(1, 5), r.randrange(0, 3)], dt, sv_of(r))
        V = c.env[w].shape[0]
        ish = rshape(r, r.choice([0, 1, 2]), hi=3)
        y = c.step(op, [idx_of(ish, V), w] + ([r.randrange(-V, V)] if r.random() < 0.3 else []),
                   error="?")
    if y is not None and c.steps[-1].get("error") is None and r.random() < 0.6:
        reduce_of(c, y)


def fam_join_split(c):
    c.s45 = True
    r = c.rng
    dt = r.choice(DTYPES)
    nd = r.choice([1, 2, 2, 3])
    shape = rshape(r, nd, hi=5, zero_p=0.08)
    x = lay(c, shape, dt, sv_of(r), layout=r.choice(["contig", "contig", "transpose", "slice"])
            if nd >= 2 else "contig")
    d = dims_of(r, nd)
    if r.random() < 0.5:
        sz = shape[d]
        parts = []
        left = sz
        while left > 0 and len(parts) < 3:
            p = r.randrange(0, left + 1)
            parts.append(p)
            left -= p
        parts.append(left)
        pieces = c.step("split", [x, parts if r.random() < 0.7 else r.choice([1, 2, 3]), d],
                        out=[c.name("p")], error="?")
    else:
        pieces = c.step("chunk", [x, r.randrange(1, 5), d], out=[c.name("p")], error="?")
    if not pieces:
        return
    pieces = [p for p in pieces if isinstance(c.env.get(p), torch.Tensor)]
    if not pieces:
        return
    p0 = r.choice(pieces)
    if r.random() < 0.6:
        inplace_on(c, p0, x)
    order = list(pieces)
    r.shuffle(order)
    if r.random() < 0.3:
        order.append(lay(c, [0], r.choice(DTYPES)))
    if r.random() < 0.2:
        order = order + [lay(c, list(c.env[order[0]].shape), r.choice(DTYPES), sv_of(r))]
    op = r.choice(["cat", "cat", "stack"])
    y = c.step(op, [order, r.choice([d, d - nd if d >= 0 else d + nd, 0, -1])], error="?")
    if y is not None and r.random() < 0.4:
        reduce_of(c, y)


def fam_softmax_rows(c):
    c.s45 = True
    r = c.rng
    dt = r.choice(FLOATS + FLOATS + ["i64", "bool"])
    nd = r.choice([1, 2, 2, 3])
    shape = rshape(r, nd, hi=4, zero_p=0.05)
    n = math.prod(shape)
    vals = []
    rowlen = shape[-1] if shape else 1
    for i in range(n):
        if i % max(rowlen, 1) == 0:
            mode = r.choice(["plain", "plain", "ninf", "allninf", "pinf", "nan"])
        if dt == "bool":
            vals.append(r.random() < 0.5)
        elif dt == "i64":
            vals.append(r.randrange(-3, 4))
        elif mode == "allninf":
            vals.append(-math.inf)
        elif mode == "ninf" and r.random() < 0.5:
            vals.append(-math.inf)
        elif mode == "pinf" and r.random() < 0.3:
            vals.append(math.inf)
        elif mode == "nan" and r.random() < 0.2:
            vals.append(math.nan)
        else:
            vals.append(r.randrange(-8, 9) / 4)
    it = iter(vals)
    x = lay(c, shape, dt, lambda d, k: [next(it, 0.5) for _ in range(k)])
    op = r.choice(["softmax", "log_softmax", "logsumexp", "vector_norm"])
    dim = dims_of(r, nd)
    if op == "logsumexp":
        y = c.step(op, [x, r.choice([[dim], list(range(nd)), [dim, dims_of(r, nd)]]),
                        r.random() < 0.5], error="?")
    elif op == "vector_norm":
        p = r.choice([{"int": 2}, {"int": 1}, {"float": "inf"}, {"float": "-inf"}, {"int": 0},
                      {"float": 0.5}, {"int": 3}])
        y = c.step(op, [x, p, r.choice([None, [dim], []]), r.random() < 0.5], error="?")
    else:
        y = c.step(op, [x, dim] + ([r.choice(["f32", "f64", "f16", "bf16"])]
                                  if r.random() < 0.4 or dt not in FLOATS else []), error="?")
    if y is not None and r.random() < 0.5:
        t = c.env[y]
        f = r.choice(["exp", "neg", "mul", "maximum"])
        if f == "mul":
            c.step(f, [y, {"float": 2.0}], error="?")
        elif f == "maximum":
            c.step(f, [y, lay(c, [], NAME[t.dtype], lambda d, k: [0.5] * k)], error="?")
        else:
            c.step(f, [y], error="?")


def fam_loss_views(c):
    c.s45 = True
    r = c.rng
    op = r.choice(["cross_entropy", "cross_entropy", "nll_loss", "mse_loss"])
    dt = r.choice(["f32", "f64", "f32", "f16", "bf16"])
    if op == "mse_loss":
        shape = rshape(r, r.choice([1, 2, 3]), hi=3, zero_p=0.05)
        a = lay(c, shape, dt, sv_of(r), layout=r.choice(["transpose", "slice", "expand",
                                                          "contig"]) if len(shape) >= 2
                else None)
        b = lay(c, shape, dt, sv_of(r))
        w = lay(c, shape, dt, lambda d, k: [r.choice([0.0, 1.0, 0.5, 2.0, -1.0])
                                            for _ in range(k)]) if r.random() < 0.4 else None
        args = [a, b, r.choice([None, "none", "mean", "sum"]), w]
        while len(args) > 2 and args[-1] is None:
            args.pop()
        c.step(op, args, error="?")
        return
    C = r.randrange(1, 5)
    N = r.randrange(1, 4)
    ds = [r.randrange(1, 3) for _ in range(r.choice([0, 0, 1, 2]))]
    ishape, tshape = [N, C] + ds, [N] + ds
    if r.random() < 0.15:
        ishape, tshape = [C], []
    x = lay(c, ishape, dt, sv_of(r), layout=r.choice(["transpose", "slice", "expand",
                                                       "permute", "contig"])
            if len(ishape) >= 3 else (r.choice(["transpose", "slice", "expand", "contig"])
                                      if len(ishape) == 2 else None))
    if op == "nll_loss" and r.random() < 0.5:
        x = c.step("log_softmax", [x, 1 if len(ishape) > 1 else 0], error="?")
        if x is None:
            return
    ign = r.choice([None, None, -100, 0, C - 1])
    real = -100 if ign is None else ign
    if op == "cross_entropy" and r.random() < 0.25:
        tgt = lay(c, ishape, dt, lambda d, k: [r.randrange(0, 5) / 4 for _ in range(k)],
                  layout=r.choice(["transpose", "slice", "contig"]) if len(ishape) >= 2
                  else None)
        ign = None
    else:
        tgt = lay(c, tshape, "i64", lambda d, k: [real if r.random() < 0.2 else
                                                  r.randrange(0, C) for _ in range(k)],
                  layout=r.choice(["transpose", "slice", "expand", "contig"])
                  if len(tshape) >= 2 else r.choice(["slice", "contig", "expand"])
                  if tshape else None)
    w = None
    if r.random() < 0.6:
        w = lay(c, [C], dt, lambda d, k: [r.choice([0.0, 1.0, 0.5, 2.0, -1.0, 0.25])
                                          for _ in range(k)],
                layout=r.choice(["slice", "contig", "expand"]))
    red = r.choice([None, "none", "mean", "sum"])
    ls = r.choice([None, None, 0.25, 0.5]) if op == "cross_entropy" else None
    args = [x, tgt, w, ign, red] + ([ls] if op == "cross_entropy" else [])
    while len(args) > 2 and args[-1] is None:
        args.pop()
    y = c.step(op, args, error="?")
    if y is not None and red == "none" and r.random() < 0.4:
        out = c.step("sum", [y, None, False], error="?")
        guard_sum(c, out, y, None, False)


WIDE = [7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 129]


def fam_wide(c):
    """Element-wise, comparison, conversion, scan, extremum and index ops
    over rows around the CPU's vector widths (bodies and tails), often not
    row-major, with values that round."""
    c.s45 = True
    r = c.rng
    W = r.choice(WIDE)
    shape = r.choice([[W], [2, W], [W, 2], [3, W], [2, W, 2], [W, 3]])
    if math.prod(shape) > 400:
        shape = [W]
    dt = r.choice(DTYPES + FLOATS + ["f16", "bf16"])
    x = lay(c, shape, dt, vals_of(r, 0.1))
    nd = len(shape)
    op = r.choice(["binary", "binary", "binary", "unary", "inplace", "to_dtype", "cmp",
                   "where", "clamp", "ext", "ext", "cumsum", "index", "sum_int", "softmax",
                   "masked_fill", "tri"])
    if op == "binary":
        f = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "pow", "div", "addcmul"])
        sh = [1 if r.random() < 0.4 else d for d in shape][r.randrange(0, nd + 1):]
        odt = dt if r.random() < 0.4 else r.choice(DTYPES)
        o = lay(c, sh, odt, vals_of(r, 0.1)) if r.random() < 0.75 else \
            operand_kind(c, "scalar", r.choice(DTYPES), [])
        if f == "addcmul":
            o2 = lay(c, sh, r.choice(DTYPES), vals_of(r, 0.1))
            if isinstance(o, dict):
                o = o2
            y = c.step(f, [x, o, o2, r.choice([{"int": 2}, {"float": 0.1}, {"float": -1.5}])],
                       error="?")
        else:
            if f in ("maximum", "minimum") and isinstance(o, dict):
                o = lay(c, [], odt, vals_of(r, 0.1))
            args = [x, o] if r.random() < 0.7 or isinstance(o, dict) else [o, x]
            if f == "div" and r.random() < 0.6:
                args.append(r.choice(["trunc", "floor"]))
                num, den = (c.arg(a) for a in args[:2])
                den_t, num_t = torch.as_tensor(den), torch.as_tensor(num)
                if not den_t.is_floating_point() and not num_t.is_floating_point() and \
                        bool((den_t == -1).any()) and bool((num_t <= -(2 ** 31)).any()):
                    raise Skip("smallest integer divided by -1 (SIGFPE)")
            y = c.step(f, args, error="?")
    elif op == "unary":
        f = r.choice(["neg", "abs", "sign", "relu", "sqrt", "reciprocal", "exp", "log",
                      "sigmoid", "tanh", "rsqrt", "expm1", "log1p", "sin", "erf"])
        y = c.step(f, [x], error="?")
    elif op == "inplace":
        f = r.choice(["add_", "sub_", "mul_", "div_", "pow_", "copy_", "abs_", "neg_",
                      "clamp_", "sqrt_", "reciprocal_", "sign_"])
        if f in ("abs_", "neg_", "sqrt_", "reciprocal_", "sign_"):
            c.step(f, [x], error="?")
        elif f == "clamp_":
            c.step(f, [x, r.choice([None, {"float": -0.1}, {"int": -2}]),
                       r.choice([{"float": 1.5}, {"int": 3}, {"float": "nan"}])], error="?")
        else:
            sh = [1 if r.random() < 0.4 else d for d in shape][r.randrange(0, nd + 1):]
            o = lay(c, sh, r.choice(DTYPES), vals_of(r, 0.1))
            if f == "copy_" and c.env[o].is_floating_point() and dt in INTS:
                v = c.env[o].double()
                if not bool(torch.isfinite(v).all()) or float(v.abs().max()) > 100:
                    raise Skip("float -> integer copy of non-finite or large values")
            args = [x, o]
            if f == "div_" and r.random() < 0.5:
                args.append(r.choice(["trunc", "floor"]))
                if dt in INTS and bool((c.env[o] == -1).any()) and \
                        bool((c.env[x] <= -(2 ** 31)).any()):
                    raise Skip("smallest integer divided by -1 (SIGFPE)")
            c.step(f, args, error="?")
        y = None
    elif op == "to_dtype":
        odt = r.choice(DTYPES + ["f16", "bf16"])
        t = c.env[x]
        if t.is_floating_point() and odt in INTS:
            v = t.double()
            if not bool(torch.isfinite(v).all()) or float(v.abs().max()) > 100:
                raise Skip("float -> integer of non-finite or large values")
        y = c.step("to_dtype", [x, odt], error="?")
    elif op == "cmp":
        f = r.choice(["eq", "ne", "lt", "le", "gt", "ge"])
        o = lay(c, [1 if r.random() < 0.4 else d for d in shape], r.choice(DTYPES),
                vals_of(r, 0.1)) if r.random() < 0.6 else \
            operand_kind(c, "scalar", r.choice(DTYPES), [])
        y = c.step(f, [x, o], error="?")
    elif op == "where":
        cond = lay(c, [1 if r.random() < 0.3 else d for d in shape], "bool")
        o = lay(c, [1 if r.random() < 0.4 else d for d in shape], r.choice(DTYPES),
                vals_of(r, 0.1)) if r.random() < 0.7 else \
            operand_kind(c, "scalar", r.choice(DTYPES), [])
        y = c.step("where", [cond, x, o] if r.random() < 0.5 else [cond, o, x], error="?")
    elif op == "clamp":
        y = c.step("clamp", [x, r.choice([None, {"float": -0.5}, {"int": -3}, {"float": "nan"},
                                          {"float": 1e-3}]),
                             r.choice([None, {"float": 2.5}, {"int": 100}, {"float": 0.1}])],
                   error="?")
    elif op == "ext":
        f = r.choice(["max", "min", "argmax", "argmin"])
        d = dims_of(r, nd)
        if f in ("max", "min"):
            if r.random() < 0.7:
                c.step(f, [x, d, r.random() < 0.3], out=[c.name("v"), c.name("i")], error="?")
            else:
                c.step(f, [x], error="?")
        else:
            c.step(f, [x] + ([d, r.random() < 0.3] if r.random() < 0.6 else []), error="?")
        y = None
    elif op == "cumsum":
        t = c.env[x]
        if t.is_floating_point():
            raise Skip("float cumsum of rounding values (order within tolerance only)")
        y = c.step("cumsum", [x, dims_of(r, nd)] + ([r.choice(["i32", "i64", "f64"])]
                                                    if r.random() < 0.4 else []), error="?")
    elif op == "index":
        d = dims_of(r, nd)
        sz = shape[d]
        f = r.choice(["gather", "index_select", "scatter_add"])
        if f == "index_select":
            k = r.randrange(0, 40)
            idx = c.input([k], r.choice(["i64", "i32"]), [r.randrange(0, sz) for _ in range(k)],
                          p="i")
            y = c.step(f, [x, d, idx], error="?")
        else:
            ish = [r.randrange(1, s + 1) for s in shape]
            idx = lay(c, ish, "i64", lambda dd, k: [r.randrange(0, sz) for _ in range(k)])
            if f == "gather":
                y = c.step(f, [x, d, idx], error="?")
            else:
                if dt in FLOATS:
                    raise Skip("float scatter_add of rounding values (order)")
                src = lay(c, ish, dt, vals_of(r, 0.1))
                y = c.step(f, [x, d, idx, src], error="?")
    elif op == "sum_int":
        if c.env[x].is_floating_point():
            f = r.choice(["max", "argmax"])
            y = c.step(f, [x], error="?")
        else:
            y = c.step("sum", [x, r.choice([None, [dims_of(r, nd)]]), r.random() < 0.3],
                       error="?")
    elif op == "softmax":
        y = c.step(r.choice(["softmax", "log_softmax"]), [x, dims_of(r, nd)] +
                   ([r.choice(["f32", "f64"])] if c.env[x].dtype in (torch.int64, torch.int32,
                                                                   torch.uint8, torch.bool)
                    else []), error="?")
    elif op == "masked_fill":
        mk = lay(c, [1 if r.random() < 0.3 else d for d in shape], "bool")
        f = r.choice(["masked_fill", "masked_fill_"])
        y = c.step(f, [x, mk, r.choice([{"float": 0.1}, {"int": -1}, {"bool": True},
                                        {"float": "-inf"}, {"int": 300}])], error="?")
    else:
        if nd < 2:
            raise Skip("tri of 1-D")
        y = c.step(r.choice(["triu", "tril", "triu_", "tril_"]), [x, r.randrange(-3, 4)],
                   error="?")
    _ = y


def big_int_vals(r):
    """Integers beyond the float dtypes' exact range (2^24 for f32, 2^53 for
    f64, 2^11/2^8 for f16/bf16), around halfway points."""
    def f(d, k):
        out = []
        for _ in range(k):
            if d == "bool":
                out.append(r.random() < 0.5)
                continue
            lo, hi = s58.LIMITS.get(d, (0, 255))
            e = r.choice([8, 11, 12, 24, 25, 31, 53, 54, 62, 63])
            v = r.choice([1, -1]) * (2 ** e + r.choice([0, 1, -1, 2 ** max(e - 24, 0),
                                                        2 ** max(e - 25, 0), 3,
                                                        2 ** max(e - 53, 0) + 1]))
            if r.random() < 0.25:
                v = r.randrange(-2049, 2050)
            out.append(max(lo, min(hi, v)))
        return out
    return f


def fam_int_float(c):
    """Integer tensors holding values that the float dtypes cannot hold
    exactly, against float scalars, 0-d float tensors and float tensors of
    every width: where and in which dtype each operand is rounded."""
    c.s45 = True
    r = c.rng
    dt = r.choice(["i64", "i64", "i32", "u8"])
    nd = r.choice([0, 1, 1, 2])
    shape = rshape(r, nd, hi=4, zero_p=0.03)
    x = lay(c, shape, dt, big_int_vals(r))
    fdt = r.choice(FLOATS)
    k = r.random()
    if k < 0.35:
        o = {"float": r.choice([0.5, 1.5, 3.0, -1.0, 16777217.0, 9007199254740993.0, 2.0 ** 62,
                                2.0 ** 24, 2049.0, 257.0, 0.1, 1e20, -2.0 ** 63])}
    elif k < 0.6:
        o = lay(c, [], fdt, lambda d, kk: [float(torch.tensor(v, dtype=torch.float64)
                                                 .to(base.TDT[d])) for v in
                                           [r.choice([0.5, 3.0, 2.0 ** 24 + 2, 2049.0, 2.0 ** 53,
                                                      -2.0 ** 31, 0.1, 257.0])
                                            for _ in range(kk)]])
    else:
        sh = shape[r.randrange(0, nd + 1):] if nd else []
        o = lay(c, sh, r.choice([fdt, "i64", "i32"]), lambda d, kk: big_int_vals(r)(d, kk)
                if d in INTS else [float(torch.tensor(float(v), dtype=torch.float64)
                                         .to(base.TDT[d])) for v in big_int_vals(r)("i64", kk)])
    op = r.choice(["add", "sub", "mul", "div", "eq", "ne", "lt", "ge", "maximum", "where",
                   "clamp", "pow", "add_", "mul_", "div_", "to_dtype", "cat", "copy_", "sum",
                   "mean", "div_f", "cumsum"])
    if op == "clamp":
        lo = r.choice([None, {"float": 16777216.5}, {"float": -3.5}, {"int": 2 ** 40 + 1},
                       {"float": 2.0 ** 62}])
        hi = r.choice([None, {"float": 9007199254740993.0}, {"int": 2 ** 53 + 1},
                       {"float": 257.5}])
        if lo is None and hi is None:
            hi = {"float": 0.5}
        c.step(op, [x, lo, hi], error="?")
    elif op in ("maximum",):
        if isinstance(o, dict):
            o = lay(c, [], fdt, lambda d, kk: [2049.0] * kk)
        c.step(op, [x, o], error="?")
    elif op == "where":
        cond = lay(c, shape, "bool")
        c.step(op, [cond, x, o] if r.random() < 0.5 else [cond, o, x], error="?")
    elif op == "to_dtype":
        c.step(op, [x, r.choice(FLOATS + ["i32", "u8", "i64"])], error="?")
    elif op == "cat":
        if isinstance(o, dict) or c.env[o].dim() != nd or nd == 0:
            o = lay(c, shape, fdt, lambda d, kk: [0.5] * kk)
        c.step(op, [[x, o], 0], error="?")
    elif op == "copy_":
        dst = lay(c, shape, r.choice(FLOATS), lambda d, kk: [0.0] * kk)
        c.step(op, [dst, x], error="?")
    elif op in ("sum", "mean"):
        if op == "mean":
            xf = c.step("to_dtype", [x, r.choice(FLOATS)], error="?")
            out = c.step(op, [xf, None, False], error="?")
            guard_sum(c, out, xf, None, False, mean=True)
        else:
            c.step(op, [x, None, False], error="?")
    elif op == "cumsum":
        c.step(op, [x, 0 if nd else 0] + ([r.choice(["f64", "f32", "i32"])]
                                          if r.random() < 0.6 else []), error="?")
    else:
        args = [x, o]
        if op == "div_f":
            op = "div"
            args.append(r.choice(["floor", "trunc"]))
        if op == "div_" and r.random() < 0.5:
            args.append(r.choice(["floor", "trunc"]))
        if len(args) == 3:
            den = torch.as_tensor(c.arg(o))
            if not den.is_floating_point() and bool((den == -1).any()) and \
                    bool((c.env[x] <= -(2 ** 31)).any()):
                raise Skip("smallest integer divided by -1 (SIGFPE)")
        if op == "pow" and isinstance(o, dict) and "float" in o and \
                isinstance(o["float"], float) and \
                float(torch.tensor(o["float"], dtype=torch.float32)) != o["float"]:
            # PyTorch's CPU pow takes such an exponent at double precision in
            # its scalar loop and rounded to f32 in its vector loop: the
            # answer depends on an element's position (-1 ** 16777217.0 is
            # -1 for one element, 1 for the first 32 of 40)
            raise Skip("pow with a float exponent f32 cannot hold")
        if op in ("add", "sub", "mul", "div", "eq", "ne", "lt", "ge", "pow") and \
                not isinstance(o, dict) and r.random() < 0.4:
            args[0], args[1] = args[1], args[0]
        c.step(op, args, error="?")


S59_FAMILIES = [("pipeline", fam_pipeline, 16), ("promote_pairs", fam_promote_pairs, 12),
                ("int_divmod", fam_int_divmod, 7), ("where_bcast", fam_where_bcast, 6),
                ("scan_ties", fam_scan_ties, 6), ("index_accum", fam_index_accum, 8),
                ("join_split", fam_join_split, 6), ("softmax_rows", fam_softmax_rows, 5),
                ("loss_views", fam_loss_views, 6), ("wide", fam_wide, 14),
                ("int_float", fam_int_float, 10)]


def fam_sum_order(c):
    """Float sums and means over any layout of values that round, PyTorch's
    answer whatever its order of the additions (not in S59_FAMILIES: the
    format leaves such sums out; `--only sum_order` draws them to check that
    strata's CPU adds in PyTorch's single-threaded order)."""
    c.s45 = True
    r = c.rng
    dt = r.choice(["f32", "f64", "f32", "f64", "f16", "bf16"])
    nd = r.choice([1, 2, 2, 3, 3, 4])
    shape = [r.choice([1, 2, 3, 4, 5, 7, 9, 17, 33]) for _ in range(nd)]
    while math.prod(shape) > 800:
        shape[shape.index(max(shape))] //= 2
    x = lay(c, shape, dt, rand_vals(r))
    for _ in range(r.randrange(0, 3)):
        v = view_step(c, x, writable=False)
        if v is None or not isinstance(c.env.get(v), torch.Tensor):
            break
        x = v
    n = c.env[x].dim()
    op = r.choice(["sum", "sum", "mean"])
    dims = r.choice([None, [dims_of(r, n)], [dims_of(r, n), dims_of(r, n)],
                     sorted(r.sample(range(n), r.randint(1, n))) if n else None])
    c.step(op, [x, dims, r.random() < 0.4], error="?")


def install_s58_machinery(seed, first=None):
    """The s58 machinery with every round of its rules on: its run_op, its
    classifiers and tolerances. `first(message)`, when given, is asked
    before the shared rules: a class, "" for none (the draft is left out),
    or None to go on (fuzz_conformance_s63.py's messages)."""
    s58.args_seed[0] = max(seed, s58.S58D_SEED)
    base.run_op = s58.run_op
    base.classify_s45 = s58.classify_s58
    classify0 = base.classify

    def classify(m):
        if first is not None:
            cl = first(m)
            if cl is not None:
                return cl or None
        for k, cl in [("does not have an identity", "empty")] + s58.S58B_MESSAGES:
            if k in m:
                return cl
        return classify0(m)

    base.classify = classify
    base.TOL_OPS.update(s56.NEW_TOL_OPS)
    base.CHECKED_OPS.update({"zeros", "ones", "full", "arange", "eye"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=S59_SEED)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--out", default="/tmp/fuzz_s59.json")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    args_seed[0] = args.seed
    install_s58_machinery(args.seed)
    rng = random.Random(args.seed)
    families = list(S59_FAMILIES)
    if args.only and "sum_order" in args.only.split(","):
        families.append(("sum_order", fam_sum_order, 1))
    if args.only:
        keep = set(args.only.split(","))
        families = [f for f in families if f[0] in keep]
        assert families, "no family named in --only"
    generator = "benches/anchors/fuzz_conformance_s59.py --seed %d --count %d%s" % (
        args.seed, args.count, " --only " + args.only if args.only else "")
    # StopIteration: a draft the builder itself could not set up (PyTorch
    # refused a view step it planned); counted, never written.
    draw_and_write(rng, args, families, generator, tag="o" if args.only else "",
                   builder_errors=(RuntimeError, ValueError, IndexError, TypeError, StopIteration))


def draw_and_write(rng, args, families, generator, tag="", builder_errors=(),
                   prepare=lambda c: None):
    """Draws `args.count` programs from `families` ((name, builder, weight)
    triples, one drawn by weight per program, each with its own seed from
    `rng`), writes them to `args.out` in the conformance format with
    `generator` as the command that made them, and reports on stderr how many
    drafts were left out (by reason with `args.verbose`): a builder's `Skip`,
    or one of `builder_errors` raised while it set the draft up. `prepare`
    adjusts each fresh case before its builder runs."""
    total_w = sum(w for _, _, w in families)
    cases, skipped = [], {}
    while len(cases) < args.count:
        x = rng.random() * total_w
        for fname, fn, w in families:
            x -= w
            if x < 0:
                break
        seed = rng.randrange(2 ** 32)
        c = Case58(random.Random(seed), f"fuzz_ops.s{args.seed}{tag}_{fname}_{len(cases):04d}",
                   f"random {fname} program (case seed {seed})")
        prepare(c)
        try:
            fn(c)
            if not c.steps:
                raise Skip("no step")
            cases.append(c.finish())
        except Skip as e:
            key = f"{fname}: {str(e)[:90]}"
            skipped[key] = skipped.get(key, 0) + 1
        except builder_errors as e:
            key = f"{fname}: builder: {type(e).__name__} {str(e)[:80]}"
            skipped[key] = skipped.get(key, 0) + 1
    doc = {"format": "strata-conformance", "format_version": 1,
           "torch_version": torch.__version__, "python_version": platform.python_version(),
           "oracle": "PyTorch on the CPU, one thread", "generator": generator,
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
