#!/usr/bin/env python3
"""PyTorch's fused Adam/AdamW driven by a GradScaler whose scale is not a
power of two, replayed by
crates/strata-autograd/tests/suite/grad_scaler_fused_s45.rs (the JSON
fixture crates/strata-autograd/tests/data/grad_scaler_fused_s45.json).

`GradScaler.step` hands a fused optimizer (`fused=True`) the scale instead
of unscaling the gradients: it checks them as they are, and the fused CPU
kernel divides each gradient by the scale in its compute type (f32 for
f16/bf16/f32, `grad / double(scale)` for f64), steps with the quotient
(unrounded for f16/bf16) and stores it, rounded, as `.grad`; a skipped
step leaves `.grad` scaled. Each case: one parameter of 32 elements (all
in PyTorch's vectorized loops) in f32, f64, f16 or bf16; Adam (amsgrad and
maximize on and off) or AdamW (weight decay 0.1); a GradScaler with
init_scale 3, growth_factor 1.5, backoff_factor 0.5, growth_interval 1;
4 iterations, each setting `.grad` to that iteration's gradient times the
current scale (rounded to the dtype), the third with an inf element (the
step is skipped, the scale backs off). After each iteration: the scale,
whether the step ran, the parameter and `.grad`; at the end the state.

`unscale`: GradScaler.unscale_ on f32, f64 and bf16 gradients (8
elements) with init_scale 3, 0.1 and 1e30 (neither exact in f32),
growth_factor 1.1, growth_interval 1: the scale PyTorch keeps (an f32
value), the gradients after unscale_ (multiplied by the reciprocal
rounded to f32, f64 gradients too), and the scale after one step (SGD,
lr 0) and update (the product rounded to f32).

Values are written as the exact binary64 value of each element (repr);
NaN and infinities as strings. One thread.

Usage:
    /tmp/tv/bin/python benches/anchors/gen_grad_scaler_fused_s45.py \\
        --out crates/strata-autograd/tests/data/grad_scaler_fused_s45.json
"""

import argparse
import json
import math

import torch

N = 32
DTYPES = {"f32": torch.float32, "f64": torch.float64,
          "f16": torch.float16, "bf16": torch.bfloat16}
SCALER = dict(init_scale=3.0, growth_factor=1.5, backoff_factor=0.5, growth_interval=1)
ITERS = 4
SKIP = 2


def enc(v):
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def flat(t):
    return [enc(v) for v in t.detach().to(torch.float64).reshape(-1).tolist()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(45)
    inputs = {}
    for dn, dt in DTYPES.items():
        p0 = torch.randn(N, generator=gen, dtype=torch.float64).to(dt)
        grads = [torch.randn(N, generator=gen, dtype=torch.float64) * s for s in [1.0, 0.3, 2.0, 0.7]]
        grads[SKIP][4] = math.inf
        inputs[dn] = {"p0": flat(p0), "grads": [flat(g) for g in grads]}
    opts = [("Adam", dict(lr=0.01, amsgrad=a, maximize=m)) for a in [False, True] for m in [False, True]]
    opts.append(("AdamW", dict(lr=0.02, betas=(0.4, 0.99), eps=1e-6, weight_decay=0.1)))
    cases = []
    for name, kw in opts:
        for dn, dt in DTYPES.items():
            p0 = torch.tensor(inputs[dn]["p0"], dtype=torch.float64).to(dt)
            p = torch.nn.Parameter(p0.clone())
            opt = getattr(torch.optim, name)([p], fused=True, **kw)
            scaler = torch.amp.GradScaler("cpu", **SCALER)
            log = []
            for it in range(ITERS):
                scaler.scale(torch.ones((), dtype=torch.float32))
                g = torch.tensor([float(x) for x in inputs[dn]["grads"][it]], dtype=torch.float64)
                p.grad = (g * scaler.get_scale()).to(dt)
                scaler.step(opt)
                found = sum(v.item() for v in
                            scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values())
                scaler.update()
                log.append({"stepped": found == 0, "scale": scaler.get_scale(),
                            "p": flat(p), "grad": flat(p.grad)})
            st = opt.state[p]
            kw_out = dict(kw)
            if "betas" in kw_out:
                kw_out["betas"] = list(kw_out["betas"])
            cases.append({"optimizer": name, "dtype": dn, "kw": kw_out, "log": log,
                          "state": {k: flat(v) for k, v in st.items() if k != "step"}})
    unscale = []
    ug = torch.Generator().manual_seed(46)
    for dn in ["f32", "f64", "bf16"]:
        for init in [3.0, 0.1, 1e30]:
            p = torch.nn.Parameter(torch.zeros(8, dtype=DTYPES[dn]))
            opt = torch.optim.SGD([p], lr=0.0)
            scaler = torch.amp.GradScaler("cpu", init_scale=init, growth_factor=1.1,
                                          backoff_factor=0.5, growth_interval=1)
            scaler.scale(torch.ones((), dtype=torch.float32))
            scale0 = scaler.get_scale()
            g = (torch.randn(8, generator=ug, dtype=torch.float64) * scale0).to(DTYPES[dn])
            p.grad = g.clone()
            scaler.unscale_(opt)
            after = flat(p.grad)
            scaler.step(opt)
            scaler.update()
            unscale.append({"dtype": dn, "init_scale": init, "scale": scale0, "grad": flat(g),
                            "unscaled": after, "scale_after": scaler.get_scale()})
    with open(args.out, "w") as f:
        json.dump({"generator": "benches/anchors/gen_grad_scaler_fused_s45.py",
                   "torch": torch.__version__, "scaler": SCALER, "inputs": inputs,
                   "cases": cases, "unscale": unscale}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
