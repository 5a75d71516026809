#!/usr/bin/env python3
"""Session 53's second hostile sweep, replayed by
crates/strata-autograd/tests/suite/hostile_sweep_s53b.rs (the JSON fixture
crates/strata-autograd/tests/data/hostile_sweep_s53b.json.gz):

* `sgd`: PyTorch 2.15's CPU SGD step (the default single-tensor loop) on
  f16 and bf16 parameters and gradients that are not contiguous.
* `norm`: `torch.linalg.vector_norm`'s gradient for upstream gradients
  holding inf, NaN, 0 and -0 (at zero norms, ties and infinite entries),
  in the format of `gen_norm_edges_s53.py`'s cases.
* `partial`: what a backward pass that fails part-way leaves in the leaves'
  `.grad` (a tensor hook raising on an intermediate or on a leaf, a
  post-accumulate-grad hook raising, on leaves with and without a `.grad`
  already) and whether a second backward through the same graph then
  runs: PyTorch keeps the gradients accumulated before the failure, and
  the nodes that ran before it are released.

Session 53 gave strata's SGD PyTorch's scalar tail (`a.add(b, alpha)`'s
scalar functor rounds `alpha * b` to the dtype before the sum; the
vectorized loop rounds once) for contiguous tensors only. Which elements
take the scalar functor depends on TensorIterator's layout: it orders the
dims by the operands' strides and coalesces them, then runs the inner dim
with the vectorized loop (two vectors of 16 f16/bf16 values on AVX2, the
last `size % 32` of each inner row with the scalar functor) when every
operand is contiguous along it, and with the scalar functor alone
(`basic_loop`) when one is not.

Layouts (`layout`): "t" (parameter and gradient both transposed), "pt_gc"
(transposed parameter, contiguous gradient), "pc_gt" (the reverse),
"rows" (the first `c` columns of a wider parameter: rows with gaps, a
contiguous gradient), "rows_both" (both such slices), "step2" (every other
element of a 1-d tensor, both), "gexp" (a contiguous parameter, a gradient
that is one value expanded: strides 0), plus 0-element and 1-element
contiguous tensors. Options: plain, momentum, dampening, Nesterov, maximize,
weight decay, in six combinations; 3 steps.

Values are exact (f16/bf16 values are f64 values; JSON numbers are written
with Python's round-trip repr). One thread.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_hostile_sweep_s53b.py \\
        --out crates/strata-autograd/tests/data/hostile_sweep_s53b.json.gz
"""

import argparse
import json
import math
import struct

import torch
from fixture_io import write_fixture

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def flat(t):
    """Values in logical (row-major) order."""
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def make(layout, which, vals, shape):
    """The tensor of logical values `vals` (shape `shape`) in `layout`."""
    r, c = shape
    v = vals.reshape(r, c)
    if layout == "t" or (layout == "pt_gc" and which == "p") or (layout == "pc_gt" and which == "g"):
        return v.t().contiguous().t()
    if layout == "rows" and which == "p" or layout == "rows_both":
        wide = torch.zeros(r, c + 3, dtype=v.dtype)
        wide[:, :c] = v
        return wide[:, :c]
    if layout == "gexp" and which == "g":
        return v[0, 0].expand(r, c)
    if layout == "step2":
        wide = torch.zeros(r * c * 2, dtype=v.dtype)
        wide[::2] = v.reshape(-1)
        return wide[::2].reshape(r, c) if r == 1 else wide[::2]
    return v.clone()


INF, NAN = float("inf"), float("nan")


def bits(t):
    return [struct.unpack("<Q", struct.pack("<d", v))[0] for v in t.double().flatten().tolist()]


def norm_cases():
    """vector_norm's gradient for upstream gradients inf, -inf, NaN, 0, -0
    (gen_norm_edges_s53.py's format: values as the u64 bits of their f64)."""
    out = []
    vectors = [[0.0, 0.0, 0.0], [3.0, 0.0, -4.0], [INF, 1.0, -2.0], [3.0, -3.0, 1.0],
               [NAN, 1.0, 0.0], [0.0, -0.0]]
    for vals in vectors:
        for p in [2.0, 1.0, 0.0, INF, -INF, 3.0, 0.5, -1.0]:
            for gv in [INF, -INF, NAN, 0.0, -0.0]:
                for dt, tdt in [("f32", torch.float32), ("f64", torch.float64)]:
                    x = torch.tensor(vals, dtype=torch.float64).to(tdt).requires_grad_()
                    c = {"dtype": dt, "shape": [len(vals)], "x": bits(x.detach()),
                         "p": p if math.isfinite(p) else str(p), "dims": None,
                         "keepdim": False}
                    o = torch.linalg.vector_norm(x, p)
                    g = torch.tensor(gv, dtype=tdt)
                    o.backward(g)
                    c.update({"out_shape": [], "out": bits(o.detach()), "g": bits(g),
                              "grad": None if x.grad is None else bits(x.grad)})
                    out.append(c)
    return out


def partial_cases():
    """Backward passes that fail part-way (see the module docs). Each case
    names its program; the replay builds the same one."""
    def boom(_):
        raise RuntimeError("boom")

    def grads(*ts):
        return [None if t.grad is None else flat(t.grad) for t in ts]

    out = []
    for pre in [False, True]:
        def leaves():
            a = torch.tensor([1.0, 2.0], requires_grad=True)
            b = torch.tensor([3.0, 4.0], requires_grad=True)
            if pre:  # a first pass gives both a .grad of ones
                (a.sum() + b.sum()).backward()
            return a, b

        # "mid_hook": y = (b * 2) * 3 + a, a hook raising on b * 2.
        a, b = leaves()
        x = b * 2
        x.register_hook(boom)
        err = None
        try:
            (x * 3 + a).sum().backward()
        except RuntimeError as e:
            err = str(e)
        out.append({"program": "mid_hook", "pre": pre, "error": err is not None,
                    "grads": grads(a, b)})
        # "leaf_hook": y = a * 2 + b, a hook raising on the leaf a.
        a, b = leaves()
        a.register_hook(boom)
        err = None
        try:
            (a * 2 + b).sum().backward()
        except RuntimeError as e:
            err = str(e)
        out.append({"program": "leaf_hook", "pre": pre, "error": err is not None,
                    "grads": grads(a, b)})
        # "post_hook": y = a * 3 + b * 2, a post-accumulate-grad hook
        # raising on a.
        a, b = leaves()
        a.register_post_accumulate_grad_hook(boom)
        err = None
        try:
            (a * 3 + b * 2).sum().backward()
        except RuntimeError as e:
            err = str(e)
        out.append({"program": "post_hook", "pre": pre, "error": err is not None,
                    "grads": grads(a, b)})
        # "second_pass": y = exp(b) * a, a hook raising once on exp(b); then
        # a second backward with the hook quiet: MulBackward ran (and was
        # released) before the failure, so it fails.
        a, b = leaves()
        x = b.exp()
        state = {"raise": True}

        def once(_):
            if state["raise"]:
                raise RuntimeError("once")

        x.register_hook(once)
        y = (x * a).sum()
        try:
            y.backward()
        except RuntimeError:
            pass
        first = grads(a, b)
        state["raise"] = False
        try:
            y.backward()
            second = "ok"
        except RuntimeError as e:
            second = "graph_released" if "second time" in str(e) else str(e)
        out.append({"program": "second_pass", "pre": pre, "error": True, "grads": first,
                    "second": second, "grads_after": grads(a, b)})
    return out



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(5302)
    opts = [dict(), dict(maximize=True, weight_decay=0.1), dict(momentum=0.9),
            dict(momentum=0.9, dampening=0.3, weight_decay=0.1),
            dict(momentum=0.9, nesterov=True, maximize=True),
            dict(momentum=0.9, nesterov=True, weight_decay=0.1)]
    layouts = ["t", "pt_gc", "pc_gt", "rows", "rows_both", "step2", "gexp", "contig"]
    shapes = {"t": [(5, 7), (2, 35)], "pt_gc": [(5, 7), (2, 35)],
              "pc_gt": [(5, 7), (2, 35)], "rows": [(5, 7), (2, 37)],
              "rows_both": [(5, 7), (2, 37)], "step2": [(1, 7), (1, 45)], "gexp": [(3, 11)],
              "contig": [(0, 3), (1, 1), (0, 0)]}
    cases, inputs = [], {}
    for dn, dt in DTYPES.items():
        for layout in layouts:
            for shape in shapes[layout]:
                n = shape[0] * shape[1]
                p0 = torch.randn(n, generator=gen, dtype=torch.float64).to(dt)
                grads = [(torch.randn(n, generator=gen, dtype=torch.float64) * s).to(dt)
                         for s in [1.0, 0.3, 2.0]]
                key = f"{dn}_{layout}_{shape[0]}x{shape[1]}"
                inputs[key] = {"p0": flat(p0),
                               "grads": [flat(make(layout, "g", x, shape)) for x in grads]}
                for extra in opts:
                    kw = dict(lr=0.1, **extra)
                    p = torch.nn.Parameter(make(layout, "p", p0, shape))
                    opt = torch.optim.SGD([p], foreach=False, **kw)
                    for gr in grads:
                        p.grad = make(layout, "g", gr, shape)
                        opt.step()
                    buf = opt.state[p].get("momentum_buffer")
                    cases.append({"dtype": dn, "layout": layout, "shape": list(shape),
                                  "inputs": key, "kw": kw, "p": flat(p),
                                  "momentum_buffer": None if buf is None else flat(buf)})
    doc = {"generator": "benches/anchors/gen_sgd_layouts_s53b.py", "torch": torch.__version__,
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "inputs": inputs, "sgd": cases, "norm": norm_cases(),
           "partial": partial_cases()}
    write_fixture(args.out, json.dumps(doc, separators=(",", ":")))
    print(f"{len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
