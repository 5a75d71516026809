#!/usr/bin/env python3
"""PyTorch 2.15's CPU optimizer steps on small tensors (the scalar tails of
its kernels), replayed by crates/strata-autograd/tests/suite/optim_tails_s53.rs
(the JSON fixture crates/strata-autograd/tests/data/optim_tails_s53.json.gz).

Which code runs on the CPU (PyTorch 2.15, `torch/optim/optimizer.py`'s
`_default_to_fused_or_foreach`): foreach kernels are the default only on
"cuda", "xpu", "mtia" and the private-use backend, and fused never by
default, so `SGD(...)`, `Adam(...)` and `AdamW(...)` on CPU tensors run the
single-tensor for-loop (`_single_tensor_sgd`, `_single_tensor_adam`): one
ATen op after another. Each elementwise CPU kernel (`cpu_kernel_vec`)
handles two vectors per iteration (16 floats or 32 f16/bf16 values on AVX2,
this build's CPU capability) and the last `numel % (2 * Vec::size())`
elements with its scalar functor, which may round differently.

* `sgd`: `SGD(foreach=False)` (the CPU default) on f16 and bf16 parameters
  of 1 to 70 elements, with and without momentum, dampening, Nesterov,
  maximize and weight decay, 4 steps: the parameter and `momentum_buffer`.
  `a.add(b, alpha=c)`'s scalar functor rounds `alpha * b` to the dtype
  before the sum (`c10::Half` arithmetic); its vectorized loop rounds once
  (`fmadd` in f32).
* `adam`: `Adam`/`AdamW(fused=True)` (`FusedAdamKernel.cpp`, which strata's
  CPU kernel follows) on f32, f64, f16 and bf16 parameters of 1 to 40
  elements, 3 steps, with AdamW's weight decay, AMSGrad, maximize and
  other betas: the
  parameter and the moments. Its scalar tail (the last `numel % 8` f32,
  `% 4` f64, `% 16` f16/bf16 elements) computes the second moment as
  `fma(v, beta2, ((1 - beta2) * g) * g)` where its vector loop computes
  `fma((1 - beta2) * g, g, v * beta2)` (the compiler contracts a different
  product; found by emulating both against this fixture).

One thread. Values are exact (f16/bf16/f32 values are f64 values; JSON
numbers are written with Python's round-trip repr).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_optim_tails_s53.py \\
        --out crates/strata-autograd/tests/data/optim_tails_s53.json.gz
"""

import argparse
import json

import torch
from fixture_io import write_fixture

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16}


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def draws(g, n, dt, steps):
    p0 = torch.randn(n, generator=g, dtype=torch.float64).to(dt)
    grads = [(torch.randn(n, generator=g, dtype=torch.float64) * s).to(dt)
             for s in [1.0, 0.3, 2.0, 0.7][:steps]]
    return p0, grads


def sgd_cases(inputs):
    out = []
    g = torch.Generator().manual_seed(53)
    moms = [dict(momentum=0.0), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3),
            dict(momentum=0.9, nesterov=True)]
    for n in [1, 5, 7, 17, 31, 32, 33, 40, 70]:
        for dn in ["f16", "bf16"]:
            p0, grads = draws(g, n, DTYPES[dn], 4)
            key = f"sgd_{dn}_{n}"
            inputs[key] = {"p0": flat(p0), "grads": [flat(x) for x in grads]}
            for mom in moms:
                for maximize in [False, True]:
                    for wd in [0.0, 0.1]:
                        kw = dict(lr=0.1, weight_decay=wd, maximize=maximize, **mom)
                        p = torch.nn.Parameter(p0.clone())
                        opt = torch.optim.SGD([p], foreach=False, **kw)
                        for gr in grads:
                            p.grad = gr.clone()
                            opt.step()
                        buf = opt.state[p].get("momentum_buffer")
                        out.append({"dtype": dn, "inputs": key, "kw": kw, "p": flat(p),
                                    "momentum_buffer": None if buf is None else flat(buf)})
    return out


def adam_cases(inputs):
    out = []
    g = torch.Generator().manual_seed(5353)
    # (strata's Adam has no L2 weight decay: AdamW's decoupled one instead.)
    opts = [("adam", dict()), ("adamw", dict(weight_decay=0.1)), ("adam", dict(amsgrad=True)),
            ("adamw", dict(maximize=True, weight_decay=0.01)), ("adam", dict(betas=(0.3, 0.99))),
            ("adamw", dict(amsgrad=True, weight_decay=0.01))]
    for n in [1, 3, 4, 7, 8, 9, 15, 16, 17, 40]:
        for dn in ["f32", "f64", "f16", "bf16"]:
            p0, grads = draws(g, n, DTYPES[dn], 3)
            key = f"adam_{dn}_{n}"
            inputs[key] = {"p0": flat(p0), "grads": [flat(x) for x in grads]}
            for name, extra in opts:
                kw = dict(lr=0.01, **extra)
                cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
                p = torch.nn.Parameter(p0.clone())
                opt = cls([p], fused=True, **kw)
                for gr in grads:
                    p.grad = gr.clone()
                    opt.step()
                st = opt.state[p]
                out.append({"opt": name, "dtype": dn, "inputs": key,
                            "kw": {k: list(v) if isinstance(v, tuple) else v
                                   for k, v in kw.items()},
                            "p": flat(p), "exp_avg": flat(st["exp_avg"]),
                            "exp_avg_sq": flat(st["exp_avg_sq"])})
    return out



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    doc = {"generator": "benches/anchors/gen_optim_tails_s53.py", "torch": torch.__version__,
           "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    doc["inputs"] = {}
    doc["sgd"] = sgd_cases(doc["inputs"])
    doc["adam"] = adam_cases(doc["inputs"])
    write_fixture(args.out, json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
