#!/usr/bin/env python3
"""PyTorch's answers for SGD on f32 and f64 parameters, replayed by
crates/strata-autograd/tests/suite/sgd_fused_add_s45.rs (the JSON fixture
crates/strata-autograd/tests/data/sgd_fused_add_s45.json).

PyTorch's single-tensor SGD step (`foreach=False`, its default on the CPU)
is a chain of `a.add(b, alpha=c)` (`grad.add(param, alpha=weight_decay)`,
`buf.add_(grad, alpha=1 - dampening)`, `grad.add(buf, alpha=momentum)`,
`param.add_(grad, alpha=-lr)`); for f32 and f64 tensors each rounds
`a + alpha * b` once (a fused multiply-add, `alpha` in the tensor's dtype)
in the vectorized loop and in the scalar loop of the last few elements
alike. The fixture holds:

* `steps` (from `inputs`): SGD with and without momentum, dampening, nesterov, maximize and
  weight decay, in f32 and f64, on parameters of 1, 6, 7, 9 and 33
  elements (scalar tails and vector bodies), after 4 steps from random
  parameters and gradients: the parameter and `momentum_buffer`.
* `tie`: gradient-oracle program 196:1272 reduced: an f64 parameter read
  as f32 and an f32 parameter, both [-2, 0.25, 2] at first, through
  `minimum` (a tie gives each half the gradient) and `std` (correction 1),
  SGD (lr 0.1, momentum 0.9, weight decay 0.5) over 3 iterations with the
  gradients kept (no zero_grad): each iteration's output, and the
  parameters and gradients at the end. Whether the third iteration sees
  the tie at -1.615 depends on the f32 parameter's last bit.

One thread. Values are written as the exact binary64 value of each element
(repr).

Usage:
    /tmp/tv/bin/python benches/anchors/gen_sgd_fused_add_s45.py \\
        --out crates/strata-autograd/tests/data/sgd_fused_add_s45.json
"""

import argparse
import json

import torch

SIZES = [1, 6, 7, 9, 33]
STEPS = 4
DTYPES = {"f32": torch.float32, "f64": torch.float64}


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def steps_cases():
    inputs, out = {}, []
    g = torch.Generator().manual_seed(45)
    moms = [
        dict(momentum=0.0),
        dict(momentum=0.9),
        dict(momentum=0.9, dampening=0.3),
        dict(momentum=0.9, nesterov=True),
    ]
    for n in SIZES:
        for dn, dt in DTYPES.items():
            p0 = torch.randn(n, generator=g, dtype=torch.float64).to(dt)
            grads = [(torch.randn(n, generator=g, dtype=torch.float64) * s).to(dt)
                     for s in [1.0, 0.3, 2.0, 0.7]]
            key = f"{dn}_{n}"
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
    return inputs, out


def tie_case():
    init = [-2.0, 0.25, 2.0]
    x0 = torch.tensor(init, dtype=torch.float64).reshape(3, 1).requires_grad_()
    x1 = torch.tensor(init, dtype=torch.float32).reshape(3, 1).requires_grad_()
    kw = dict(lr=0.1, momentum=0.9, weight_decay=0.5)
    opt = torch.optim.SGD([x0, x1], foreach=False, **kw)
    outs = []
    for _ in range(3):
        y = torch.minimum(x0.to(torch.float32), x1).std(dim=0, correction=1)
        outs.append(flat(y))
        y.sum().backward()
        opt.step()
    return {"init": init, "kw": kw, "iters": 3, "outs": outs,
            "x0": flat(x0), "x1": flat(x1), "g0": flat(x0.grad), "g1": flat(x1.grad)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    doc = {"generator": "benches/anchors/gen_sgd_fused_add_s45.py",
           "torch": torch.__version__}
    doc["inputs"], doc["steps"] = steps_cases()
    doc["tie"] = tie_case()
    with open(args.out, "w") as f:
        json.dump(doc, f)
        f.write("\n")


if __name__ == "__main__":
    main()
