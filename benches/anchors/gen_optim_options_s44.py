#!/usr/bin/env python3
"""PyTorch's answers for the optimizer options strata added in session 44,
replayed by crates/strata-autograd/tests/suite/optim_options_s44.rs (the
JSON fixture crates/strata-autograd/tests/data/optim_options_s44.json.gz).

* Adam and AdamW with amsgrad and maximize (each on and off), in f32, f64,
  f16 and bf16: PyTorch's fused CPU step (`fused=True`, the kernel strata's
  CPU kernel rounds as), 4 steps from the same parameter and gradients;
  the parameter and the state PyTorch keeps (`exp_avg`, `exp_avg_sq`,
  `max_exp_avg_sq`, `step`) after them, and the state's keys.
* SGD with momentum, dampening, nesterov, maximize and weight decay (the
  combinations PyTorch accepts), same dtypes: PyTorch's single-tensor step
  (`foreach=False`, its default on the CPU), the parameter and
  `momentum_buffer` after 4 steps.
* clip_grad_norm_ (max_norm 1) with norm_type 2, 1, inf, -inf, 0, 3, 0.5,
  -1 over gradients of one or mixed dtypes (8 elements each), with
  error_if_nonfinite on and off (an element inf or NaN): the total norm and
  its dtype, or the error, and the gradients after.
* clip_grad_value_ with several clip values, per dtype.

Every optimizer's tensor has 32 elements, so that PyTorch's vectorized loops (AVX2 and
AVX-512: up to 32 f16/bf16 elements a vector) take all of them and no scalar
tail rounds differently. One thread. Values are written as the exact
binary64 value of each element (repr); NaN and infinities as strings.

Usage:
    /tmp/tv/bin/python benches/anchors/gen_optim_options_s44.py \\
        --out crates/strata-autograd/tests/data/optim_options_s44.json.gz
"""

import argparse
import json
import math

import torch
from fixture_io import write_fixture

N = 32
STEPS = 4
# The gradients' scale at each step: large, then smaller, so that v decays
# below its maximum and AMSGrad's max_exp_avg_sq differs from exp_avg_sq.
SCALES = [3.0, 0.5, 1.0, 0.2]
DTYPES = {
    "f32": torch.float32,
    "f64": torch.float64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
}


def enc(v):
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def flat(t):
    return [enc(v) for v in t.detach().reshape(-1).tolist()]


def inputs(dtype, seed):
    g = torch.Generator().manual_seed(seed)
    p0 = torch.randn(N, generator=g, dtype=torch.float64).to(dtype)
    grads = [
        (torch.randn(N, generator=g, dtype=torch.float64) * s).to(dtype) for s in SCALES
    ]
    # A zero gradient element (maximize's -0, AMSGrad at v = 0).
    for gr in grads:
        gr[5] = 0.0
    return p0, grads


def run(make, p0, grads):
    p = torch.nn.Parameter(p0.clone())
    opt = make([p])
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p, opt


def adam_cases(inp):
    out = []
    for name in ["Adam", "AdamW"]:
        for amsgrad in [False, True]:
            for maximize in [False, True]:
                for dn, dt in DTYPES.items():
                    if name == "Adam":
                        kw = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8)
                    else:
                        # beta1 0.4: the lerp's other branch (weight >= 0.5).
                        kw = dict(lr=0.02, betas=(0.4, 0.99), eps=1e-6, weight_decay=0.1)
                    kw.update(amsgrad=amsgrad, maximize=maximize, fused=True)
                    cls = getattr(torch.optim, name)
                    p0, grads = inp[dn]
                    p, opt = run(lambda ps: cls(ps, **kw), p0, grads)
                    st = opt.state[p]
                    kw.pop("fused")
                    kw["betas"] = list(kw["betas"])
                    out.append(
                        {
                            "optimizer": name,
                            "dtype": dn,
                            "kw": kw,
                            "p": flat(p),
                            "state": {
                                k: (flat(v) if v.numel() > 1 else enc(v.item()))
                                for k, v in st.items()
                            },
                            "state_keys": sorted(st.keys()),
                            "flags": {
                                k: opt.param_groups[0][k] for k in ["amsgrad", "maximize"]
                            },
                        }
                    )
    return out


def sgd_cases(inp):
    out = []
    moms = [
        dict(momentum=0.0),
        dict(momentum=0.9),
        dict(momentum=0.9, dampening=0.3),
        dict(momentum=0.9, nesterov=True),
    ]
    for mom in moms:
        for maximize in [False, True]:
            for wd in [0.0, 0.1]:
                for dn, dt in DTYPES.items():
                    kw = dict(lr=0.1, weight_decay=wd, maximize=maximize, **mom)
                    p0, grads = inp[dn]
                    p, opt = run(
                        lambda ps: torch.optim.SGD(ps, foreach=False, **kw), p0, grads
                    )
                    buf = opt.state[p].get("momentum_buffer")
                    out.append(
                        {
                            "dtype": dn,
                            "kw": kw,
                            "p": flat(p),
                            "momentum_buffer": None if buf is None else flat(buf),
                        }
                    )
    return out


def clip_norm_cases():
    """One set of gradients per mix of dtypes (8 elements each), the first
    one's element 3 made inf or NaN in the non-finite variants; each case
    the total norm or the error, and the gradients after (not stored for an
    error: they must be unchanged)."""
    out = []
    g = torch.Generator().manual_seed(44)
    mixes = [["f32"], ["f64"], ["f16"], ["bf16"], ["f32", "f16"], ["bf16", "f16", "f64"]]
    for mix in mixes:
        base = [torch.randn(8, generator=g, dtype=torch.float64) * (i + 1) for i in range(len(mix))]
        # A zero element (the 0-"norm" counts it out; order -1 of it is 0).
        base[-1][6] = 0.0
        entry = {"dtypes": mix, "grads": [flat(t.to(DTYPES[dn])) for t, dn in zip(base, mix)], "cases": []}
        for special in [None, "inf", "nan"]:
            for nt in [2.0, 1.0, "inf", "-inf", 0.0, 3.0, 0.5, -1.0]:
                for err in [False, True]:
                    if special is None and err:
                        continue
                    ps = []
                    for i, (t, dn) in enumerate(zip(base, mix)):
                        t = t.clone()
                        if special is not None and i == 0:
                            t[3] = float(special)
                        p = torch.nn.Parameter(torch.zeros(8, dtype=DTYPES[dn]))
                        p.grad = t.to(DTYPES[dn])
                        ps.append(p)
                    case = {"special": special, "norm_type": enc(float(nt)), "error_if_nonfinite": err}
                    try:
                        total = torch.nn.utils.clip_grad_norm_(
                            ps, 1.0, norm_type=float(nt), error_if_nonfinite=err
                        )
                        case["total"] = enc(total.item())
                        case["total_dtype"] = str(total.dtype).replace("torch.", "")
                        case["after"] = [flat(p.grad) for p in ps]
                    except RuntimeError:
                        case["error"] = True
                    entry["cases"].append(case)
        out.append(entry)
    return out


def clip_value_cases():
    out = []
    g = torch.Generator().manual_seed(45)
    for dn, dt in DTYPES.items():
        for cv in [0.1, 1.0, 0.0, float("inf")]:
            t = (torch.randn(N, generator=g, dtype=torch.float64) * 2).to(dt)
            t[7] = float("nan")
            t[8] = float("-inf")
            p = torch.nn.Parameter(torch.zeros_like(t))
            p.grad = t.clone()
            torch.nn.utils.clip_grad_value_([p], cv)
            out.append({"dtype": dn, "clip_value": enc(cv), "grad": flat(t), "after": flat(p.grad)})
    return out



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    inp = {dn: inputs(dt, 4400 + i) for i, (dn, dt) in enumerate(DTYPES.items())}
    doc = {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "n": N,
        "inputs": {dn: {"p0": flat(p0), "grads": [flat(x) for x in gs]} for dn, (p0, gs) in inp.items()},
        "adam": adam_cases(inp),
        "sgd": sgd_cases(inp),
        "clip_norm": clip_norm_cases(),
        "clip_value": clip_value_cases(),
    }
    write_fixture(args.out, json.dumps(doc, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
