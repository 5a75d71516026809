#!/usr/bin/env python3
"""Session 75: PyTorch 2.15's CPU answers (one thread) for convolution and
pooling, written to crates/strata-autograd/tests/data/conv_pool_s75.json.gz
(crates/strata-autograd/tests/suite/conv_pool_s75.rs checks strata's Tensor
and Var forms and the gradients).

Ops: F.conv1d/2d/3d (stride, explicit or "same"/"valid" padding, dilation,
groups, with or without a bias), F.conv_transpose1d/2d/3d (stride, padding,
output_padding, groups, dilation; never an output 0 long, which PyTorch's
CPU returns or refuses by kernel), F.max_pool1d/2d/3d with return_indices
(kernel, stride or none, padding, dilation, ceil_mode), F.avg_pool1d/2d/3d
(ceil_mode, count_include_pad, divisor_override), F.adaptive_avg_pool1d/2d/3d
and Tensor.unfold. Inputs are batched or not (batch 0 sometimes), f32, f64,
bf16, f16 or i64 (avg_pool3d's f16/bf16 are left out: PyTorch's CPU has no
kernel for them, its GPU has), of values in [-1, 1] (pools: sometimes on a
grid of 0.5, for ties, with a NaN or -inf now and then; integers in
[-3, 3]). max_pool1d is never asked for an output shorter than 1: PyTorch
2.15's CPU kernel does not check it and corrupts its heap (strata returns
its typed error, as PyTorch's max_pool2d does). One call in eight has a bad argument (a zero stride, too much
padding, channels that do not divide into the groups, a mismatched bias or
weight dtype, a kernel larger than the input, "same" with a stride, a wrong
rank or list length). Recorded: PyTorch's result (dtype, shape, values; the
indices too for max pooling) or the fact that it raised, and for f32/f64
the gradients of the input, weight and bias for the upstream gradient whose
element j is `((3 j) mod 7 - 3) / 2`.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_conv_pool_s75.py \\
        crates/strata-autograd/tests/data/conv_pool_s75.json.gz
"""
import json
import math
import random
import sys

import torch
import torch.nn.functional as F

from fixture_io import LeftOut, fmt, write_fixture
import gen_math_s74 as m

torch.set_num_threads(1)
DEBUG = False


def values(r, dtype, n, pool):
    if dtype == "i64":
        return [r.randint(-3, 3) for _ in range(n)]
    grid = pool and r.random() < 0.3
    out = []
    for _ in range(n):
        v = round(r.uniform(-2, 2) * 2) / 2 if grid else r.uniform(-1, 1)
        if pool and r.random() < 0.02:
            v = r.choice([math.nan, -math.inf, math.inf])
        out.append(v)
    return out


def tensor(r, dtype, shape, pool=False):
    t = torch.tensor(values(r, dtype, math.prod(shape), pool), dtype=torch.float64)
    t = t.to(m.DTYPES[dtype]).reshape(shape)
    stored = [fmt(float(v)) if dtype != "i64" else int(v) for v in t.flatten().tolist()]
    return t, {"dtype": dtype, "shape": shape, "values": stored, "t": False}


def per_dim(r, d, lo, hi):
    return [r.randint(lo, hi)] if r.random() < 0.5 else [r.randint(lo, hi) for _ in range(d)]


def conv_case(r, op, d, dtype, bad):
    groups = r.choice([1, 1, 1, 2, 3])
    cin = groups * r.choice([1, 2])
    cout = groups * r.choice([1, 2])
    k = [r.choice([1, 2, 3]) for _ in range(d)]
    args = {"stride": per_dim(r, d, 1, 3), "dilation": per_dim(r, d, 1, 2), "groups": groups}
    p = r.random()
    args["padding"] = "same" if p < 0.15 else "valid" if p < 0.25 else per_dim(r, d, 0, 2)
    if args["padding"] == "same":
        args["stride"] = [1]
    size = [r.randint(1, 7 if d < 3 else 4) for _ in range(d)]
    shape = ([r.choice([0, 1, 2, 2, 3])] if r.random() < 0.85 else []) + [cin] + size
    wshape = [cout, cin // groups] + k
    wdtype, has_bias = dtype, r.random() < 0.7
    bshape = [cout]
    if bad:
        # (PyTorch's integer convolution takes a dilation of 0; its float ones refuse it.)
        what = r.choice(["stride0", "groups", "channels", "bias", "wdtype", "rank", "list", "same"]
                        + (["dilation0"] if dtype != "i64" else []))
        if what == "stride0":
            args["stride"] = [0]
        elif what == "dilation0":
            args["dilation"] = [0]
        elif what == "groups":
            args["groups"] = groups + 1
        elif what == "channels":
            shape[-d - 1] += 1
        elif what == "bias":
            has_bias, bshape = True, [cout + 1]
        elif what == "wdtype":
            wdtype = "f64" if dtype != "f64" else "f32"
        elif what == "rank":
            shape = [2] + shape
        elif what == "list":
            args["stride"] = [1] * (d + 1)
        else:
            args["padding"], args["stride"] = "same", [2]
    x, xd = tensor(r, dtype, shape)
    w, wd = tensor(r, wdtype, wshape)
    c = {"op": op, "x": xd, "weight": wd, "args": args}
    params = {"weight": w}
    if has_bias:
        params["bias"], c["bias"] = tensor(r, dtype, bshape)

    def call(x, p):
        return getattr(F, op)(x, p["weight"], p.get("bias"), args["stride"], args["padding"],
                              args["dilation"], args["groups"])
    return c, x, params, call


def transpose_out_has_zero(size, k, args, d):
    """Whether a transposed convolution's output would be 0 long in a dim."""
    def each(v):
        return v * d if len(v) == 1 else v
    st, pa, op_, di = each(args["stride"]), each(args["padding"]), each(args["output_padding"]), each(args["dilation"])
    return any((size[i] - 1) * st[i] - 2 * pa[i] + di[i] * (k[i] - 1) + op_[i] + 1 == 0 for i in range(d)
               if len(st) == d and len(pa) == d and len(op_) == d and len(di) == d)


def conv_transpose_case(r, op, d, dtype, bad):
    groups = r.choice([1, 1, 2])
    cin = groups * r.choice([1, 2])
    cout_g = r.choice([1, 2])
    k = [r.choice([1, 2, 3]) for _ in range(d)]
    stride = per_dim(r, d, 1, 3)
    dilation = per_dim(r, d, 1, 2)
    padding = per_dim(r, d, 0, 2)
    # output_padding below the stride or the dilation (sometimes not).
    sd = [max(a, b) for a, b in zip(stride * d if len(stride) == 1 else stride,
                                    dilation * d if len(dilation) == 1 else dilation)]
    output_padding = [r.randint(0, m - 1) for m in sd] if r.random() < 0.4 else [0]
    args = {"stride": stride, "padding": padding, "output_padding": output_padding,
            "groups": groups, "dilation": dilation}
    size = [r.randint(1, 5 if d < 3 else 3) for _ in range(d)]
    shape = ([r.choice([0, 1, 2, 2])] if r.random() < 0.85 else []) + [cin] + size
    wshape = [cin, cout_g] + k
    wdtype, has_bias, bshape = dtype, r.random() < 0.7, [cout_g * groups]
    if bad:
        what = r.choice(["stride0", "channels", "bias", "wdtype", "output_padding", "rank"])
        if what == "stride0":
            args["stride"] = [0]
        elif what == "channels":
            shape[-d - 1] += 1
        elif what == "bias":
            has_bias, bshape = True, [cout_g * groups + 1]
        elif what == "wdtype":
            wdtype = "f64" if dtype != "f64" else "f32"
        elif what == "output_padding":
            args["output_padding"] = [3]
        else:
            shape = [2] + shape
    if transpose_out_has_zero(shape[-d:], k, args, d):
        # PyTorch's CPU gives an empty result or refuses an output size of 0,
        # by kernel (oneDNN or its slow path); never asked of it.
        raise LeftOut
    x, xd = tensor(r, dtype, shape)
    w, wd = tensor(r, wdtype, wshape)
    c = {"op": op, "x": xd, "weight": wd, "args": args}
    params = {"weight": w}
    if has_bias:
        params["bias"], c["bias"] = tensor(r, dtype, bshape)

    def call(x, p):
        return getattr(F, op)(x, p["weight"], p.get("bias"), args["stride"], args["padding"],
                              args["output_padding"], args["groups"], args["dilation"])
    return c, x, params, call


def pool_case(r, op, d, dtype, bad):
    kind = op.split("_")[0]
    if kind == "adaptive":
        size = [r.randint(1, 7 if d < 3 else 4) for _ in range(d)]
        shape = ([r.choice([0, 1, 2])] if r.random() < 0.8 else []) + [r.choice([1, 2, 3])] + size
        args = {"output_size": per_dim(r, d, 0 if r.random() < 0.05 else 1, 5)}
        if bad:
            shape[-1] = 0
        x, xd = tensor(r, dtype, shape, True)
        os = args["output_size"]
        os = os[0] if len(os) == 1 else os
        return {"op": op, "x": xd, "args": args}, x, {}, lambda x, p: getattr(F, op)(x, os)
    k = per_dim(r, d, 1, 3)
    args = {"kernel_size": k, "stride": per_dim(r, d, 1, 3) if r.random() < 0.7 else None,
            "padding": [min(r.randint(0, 1), min(k) // 2)] if r.random() < 0.5 else [0],
            "ceil_mode": r.random() < 0.4}
    if kind == "max":
        args["dilation"] = per_dim(r, d, 1, 2)
    else:
        args["count_include_pad"] = r.random() < 0.6
        if d > 1:  # avg_pool1d has no divisor_override
            args["divisor_override"] = r.choice([None, None, None, 2, 3, -2])
    size = [r.randint(1, 7 if d < 3 else 4) for _ in range(d)]
    shape = ([r.choice([0, 1, 2])] if r.random() < 0.8 else []) + [r.choice([1, 2, 3])] + size
    if bad:
        what = r.choice(["stride0", "pad", "small", "rank", "kernel0"])
        if what == "stride0":
            args["stride"] = [0]
        elif what == "pad":
            args["padding"] = [2]
        elif what == "small":
            shape[-1], args["kernel_size"] = 1, [3] * d
        elif what == "kernel0":
            args["kernel_size"] = [0]
        else:
            shape = [2, 2] + shape
    if op == "max_pool1d" and too_small_1d(shape[-1], args):
        # PyTorch 2.15's CPU max_pool1d does not check for an output size
        # below 1: it corrupts its heap (and aborts, now or later). Never
        # asked of it.
        raise LeftOut
    x, xd = tensor(r, dtype, shape, kind == "max")
    c = {"op": op, "x": xd, "args": args}

    def call(x, p):
        f = getattr(F, op)
        a = dict(args)
        ks, st = a.pop("kernel_size"), a.pop("stride")
        if kind == "max":
            return f(x, ks, st, return_indices=True, **a)
        return f(x, ks, st, **a)
    return c, x, {}, call


def too_small_1d(length, args):
    """Whether max_pool1d's output length would be below 1."""
    k, p = args["kernel_size"][0], args["padding"][0]
    s = (args["stride"] or args["kernel_size"])[0]
    dil = args["dilation"][0]
    if k == 0 or s == 0 or p > k // 2:
        return False
    span = length + 2 * p - dil * (k - 1) - 1 + (s - 1 if args["ceil_mode"] else 0)
    o = span // s + 1
    if args["ceil_mode"] and (o - 1) * s >= length + p:
        o -= 1
    return o < 1


def has_empty_window(shape, args, d):
    """Whether a max pooling window holds no input element (only padding,
    or dilated past the input). PyTorch gives it -inf and an index past the
    window, and its backward adds the gradient there: into another channel's
    elements, or past the tensor. Such calls get no gradient recorded."""
    def each(v):
        return v * d if len(v) == 1 else v
    ks, pads, dils = each(args["kernel_size"]), each(args["padding"]), each(args["dilation"])
    sts = each(args["stride"] or args["kernel_size"])
    for i in range(d):
        length, k, p, s, dil = shape[len(shape) - d + i], ks[i], pads[i], sts[i], dils[i]
        span = length + 2 * p - dil * (k - 1) - 1 + (s - 1 if args["ceil_mode"] else 0)
        o = span // s + 1
        if args["ceil_mode"] and (o - 1) * s >= length + p:
            o -= 1
        for j in range(o):
            start = j * s - p
            end = min(start + (k - 1) * dil + 1, length)
            while start < 0:
                start += dil
            if start >= end:
                return True
    return False


def unfold_case(r, dtype, bad):
    shape = [r.randint(0, 5) for _ in range(r.randint(0, 3))]
    nd = len(shape)
    dim = r.randint(-max(nd, 1), max(nd, 1) - 1)
    top = shape[dim] if nd else 1
    args = {"dim": dim, "size": r.randint(0, top), "step": r.randint(1, 3)}
    if bad:
        args[r.choice(["size", "step", "dim"])] = r.choice([-1, top + 1, 0, 4])
    x, xd = tensor(r, dtype, shape)
    return {"op": "unfold", "x": xd, "args": args}, x, {}, lambda x, p: x.unfold(args["dim"], args["size"], args["step"])


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/conv_pool_s75.json.gz"
    r = random.Random(7501)
    cases = []
    ops = ([("conv1d", 1), ("conv2d", 2), ("conv2d", 2), ("conv3d", 3)] * 2
           + [("max_pool1d", 1), ("max_pool2d", 2), ("max_pool2d", 2), ("max_pool3d", 3)]
           + [("avg_pool1d", 1), ("avg_pool2d", 2), ("avg_pool2d", 2), ("avg_pool3d", 3)]
           + [("adaptive_avg_pool1d", 1), ("adaptive_avg_pool2d", 2), ("adaptive_avg_pool3d", 3)]
           + [("unfold", 0)] * 2
           + [("conv_transpose1d", 1), ("conv_transpose2d", 2), ("conv_transpose2d", 2), ("conv_transpose3d", 3)])
    while len(cases) < 2400:
        op, d = r.choice(ops)
        dtype = r.choice(["f32", "f32", "f64", "f16", "bf16", "i64"])
        if op == "avg_pool3d" and dtype in ("f16", "bf16"):
            continue
        if op.startswith("adaptive") and dtype == "i64" and r.random() < 0.8:
            continue
        bad = r.random() < 0.125
        try:
            if op.startswith("conv_transpose"):
                c, x, params, call = conv_transpose_case(r, op, d, dtype, bad)
            elif op.startswith("conv"):
                c, x, params, call = conv_case(r, op, d, dtype, bad)
            elif op == "unfold":
                c, x, params, call = unfold_case(r, dtype, bad)
            else:
                c, x, params, call = pool_case(r, op, d, dtype, bad)
        except LeftOut:
            continue
        if DEBUG:
            print(json.dumps({k: v for k, v in c.items() if k != "x"})[:300], c["x"]["shape"], c["x"]["dtype"], flush=True)
        try:
            y = call(x, params)
            if isinstance(y, tuple):
                c["indices"] = [int(v) for v in y[1].flatten().tolist()]
                y = y[0]
            if y.numel() > 4000:
                continue
            c["result"] = m.tensor_record(y)
        except Exception as e:  # noqa: BLE001
            c["error"] = str(e).split("\n")[0][:200]
        if "result" in c and dtype in ("f32", "f64") and not (
                op.startswith("max") and has_empty_window(c["x"]["shape"], c["args"], d)):
            xg = x.clone().requires_grad_(True)
            pg = {k: v.clone().requires_grad_(True) for k, v in params.items()}
            y = call(xg, pg)
            y = y[0] if isinstance(y, tuple) else y
            try:
                y.backward(m.upstream(list(y.shape)).to(y.dtype))
            except RuntimeError:
                # PyTorch's own backward refuses it (an empty output of an
                # adaptive pooling): no gradient is recorded.
                pass
            else:
                c["grad_x"] = [fmt(float(v)) for v in xg.grad.double().flatten().tolist()]
                for k, v in pg.items():
                    c["grad_" + k] = [fmt(float(t)) for t in v.grad.double().flatten().tolist()]
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_conv_pool_s75.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors) -> %s" % (len(cases), sum("error" in c for c in cases), path))


if __name__ == "__main__":
    main()
