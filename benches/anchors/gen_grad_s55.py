#!/usr/bin/env python3
"""PyTorch 2.15's answers (CPU, one thread) for session 55's oracle sweep of
strata-autograd, replayed by crates/strata-autograd/tests/suite/oracle_s55.rs
(fixture crates/strata-autograd/tests/data/grad_s55.json):

- compositions the gradient fuzzer's session-55 families draw
  (fuzz_grad.py, seeds >= 331), pinned on fixed inputs: a keepdim
  reduction over several dims broadcast back against its input, two
  overlapping views of one leaf combined, a tied-embedding model
  (embedding, broadcast positional leaf, layer_norm, linear with the table
  itself, cross_entropy), an in-place op on a view of a non-leaf with an
  f64 / bf16 operand, and a bf16 autocast region around a checkpoint;
- hostile inputs of the public API: layer_norm of f16/bf16 inputs with f32
  weight and bias (PyTorch's CPU "mixed type") and the mixes it refuses,
  mse_loss of operands of two dtypes, checkpoints of functions returning
  integers or detached values or capturing every parameter, GradScaler.scale
  of non-scalar, integer, f64 and bf16 values, requires_grad_(False) on a
  non-leaf and post-accumulate-grad hooks on non-leaves, SGD momentum over
  a step without a gradient, optimizer options at and past PyTorch's
  bounds.

Each case records values as JSON numbers (exact f64 round trip; "nan",
"inf", "-inf" as strings), dtype names, and `error: true` where PyTorch
raised (the message in `msg`).

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_grad_s55.py
"""

import json
import math
import os

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from fixture_io import write_fixture

torch.set_num_threads(1)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "crates", "strata-autograd", "tests", "data", "grad_s55.json")
NAME = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
        torch.float16: "f16", torch.int64: "i64", torch.bool: "bool"}
DT = {v: k for k, v in NAME.items()}


def enc(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def tj(t):
    if t is None:
        return None
    t = t.detach()
    return {"dtype": NAME[t.dtype], "shape": list(t.shape),
            "data": [enc(v) for v in t.reshape(-1).double().tolist()]}


def leaf(v, shape, dt=torch.float32, grad=True):
    return torch.tensor(v, dtype=torch.float64).reshape(shape).to(dt).requires_grad_(grad)


def attempt(f):
    try:
        return f()
    except (RuntimeError, ValueError) as e:
        return {"error": True, "msg": str(e).split("\n")[0]}


CASES = {}


def case(name):
    def reg(f):
        CASES[name] = attempt(f)
        return f
    return reg


X23 = [1.0, 2.0, 4.0, 0.5, -1.0, 3.0]
X234 = [0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 3.0, 1.0, -2.0, 0.75, 0.0, 2.5,
        -1.5, 1.25, 0.5, -0.25, 2.0, -3.0, 1.0, 0.5, -1.0, 1.75, 0.25, -0.75]
UP234 = [((3 * i) % 7 - 3) / 4 for i in range(24)]

# ---------------------------------------------------------------- compositions


def keepdim(red, dims, op, corr=None):
    x = leaf(X234, [2, 3, 4])
    kw = {"dim": dims, "keepdim": True}
    if red in ("std", "var"):
        r = getattr(torch, red)(x, correction=corr, **kw)
    elif red == "logsumexp":
        r = torch.logsumexp(x, dims, keepdim=True)
    elif red == "norm":
        r = torch.linalg.vector_norm(x, 2, **kw)
    else:
        r = getattr(torch, red)(x, **kw)
    y = {"sub": x - r, "div": x / r, "mul": x * r}[op]
    y.backward(torch.tensor(UP234).reshape(2, 3, 4))
    return {"out": tj(y), "grad": tj(x.grad)}


for red, dims, op, corr in [("mean", [-1, 0], "sub", None), ("std", [2, -2], "div", 1.0),
                            ("var", [0, 1, 2], "div", 0.0), ("amax", [1, -1], "sub", None),
                            ("amin", [0, 2], "mul", None), ("logsumexp", [-1, 1], "sub", None),
                            ("norm", [0, -1], "div", None), ("sum", [1], "mul", None)]:
    CASES[f"keepdim_{red}_{op}"] = attempt(lambda: keepdim(red, dims, op, corr))
    CASES[f"keepdim_{red}_{op}"]["args"] = {"red": red, "dims": dims, "op": op, "corr": corr}


@case("two_views_overlap")
def _():
    # x[:, 0:3] * x[:, 1:4] + x.t()-free: overlapping narrows of one leaf,
    # and the leaf against a narrow of size 1 of itself (broadcast).
    x = leaf(X234[:12], [3, 4])
    a = x.narrow(1, 0, 3) * x.narrow(1, 1, 3)
    b = x / x.narrow(0, 2, 1)
    (a.sum() + (b * torch.tensor(UP234[:12]).reshape(3, 4)).sum()).backward()
    return {"a": tj(a), "b": tj(b), "grad": tj(x.grad)}


@case("two_views_transpose_outer")
def _():
    x = leaf(X234[:9], [3, 3])
    v = leaf([0.5, -1.0, 2.0, 1.5], [4])
    y = torch.maximum(x, x.t())
    z = v.unsqueeze(0) - v.unsqueeze(1)
    ((y * torch.tensor(UP234[:9]).reshape(3, 3)).sum() + (z * z).sum()).backward()
    return {"y": tj(y), "z": tj(z), "grad_x": tj(x.grad), "grad_v": tj(v.grad)}


def tied(ls, red, pad):
    table = leaf([0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0, 1.0, -2.0, 0.75, 1.0, 2.5,
                  -1.5, 1.25, 0.5, -0.25], [4, 4])
    pos = leaf([0.25, -0.5, 1.0, 0.0, 0.5, 0.75, -0.25, 1.5, 0.0, 0.5, -1.0, 0.25], [3, 4])
    w = leaf([1.0, 0.5, 2.0, 1.5], [4])
    b = leaf([0.0, 0.25, -0.5, 1.0], [4])
    idx = torch.tensor([[0, 2, 3], [1, 1, 0]])
    h = F.embedding(idx, table, padding_idx=pad) + pos
    h = F.layer_norm(h, [4], w, b, 1e-5)
    logits = F.linear(h, table)
    tgt = torch.tensor([1, 3, 0, 2, -100, 1])
    loss = F.cross_entropy(logits.reshape(-1, 4), tgt, reduction=red, label_smoothing=ls)
    loss.backward(torch.ones_like(loss) if red == "none" else None)
    return {"loss": tj(loss), "table": tj(table.grad), "pos": tj(pos.grad), "w": tj(w.grad),
            "b": tj(b.grad)}


for ls, red, pad in [(0.0, "mean", None), (0.1, "sum", 0), (0.0, "none", -1)]:
    CASES[f"tied_{red}"] = attempt(lambda: tied(ls, red, pad))
    CASES[f"tied_{red}"]["args"] = {"ls": ls, "red": red, "pad": pad}


def inplace_mixed(dt, op):
    x = leaf(X234[:12], [3, 4])
    o = leaf([0.5, -1.5, 2.0], [3, 1], dt)
    y = x * 1.5
    v = y.t().narrow(0, 1, 2)  # [2, 3] view of y's columns 1..2
    getattr(v, op)(o.reshape(1, 3))
    (y * torch.tensor(UP234[:12]).reshape(3, 4)).sum().backward()
    return {"y": tj(y), "grad_x": tj(x.grad), "grad_o": tj(o.grad)}


for dt in (torch.float64, torch.bfloat16):
    for op in ("add_", "mul_", "div_"):
        CASES[f"inplace_{NAME[dt]}_{op}"] = attempt(lambda: inplace_mixed(dt, op))


@case("autocast_ckpt")
def _():
    x = leaf(X234[:12], [3, 4])
    w = leaf([0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0, 1.0], [4, 2])

    def f(t):
        return torch.softmax(torch.matmul(t, w), -1) * t.sum(-1, keepdim=True)

    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = checkpoint(f, x, use_reentrant=False)
    dt = NAME[y.dtype]
    (y.float() * torch.tensor(UP234[:6]).reshape(3, 2)).sum().backward()
    return {"dtype": dt, "y": tj(y), "grad_x": tj(x.grad), "grad_w": tj(w.grad)}

# ---------------------------------------------------------------- hostile


def layer_norm(xd, wd, bd):
    x = leaf(X23, [2, 3], DT[xd])
    w = leaf([2.0, 3.0, 4.0], [3], DT[wd]) if wd else None
    b = leaf([0.5, -1.0, 0.0], [3], DT[bd]) if bd else None
    y = F.layer_norm(x, [3], w, b, 1e-5)
    (y.float() * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    return {"out": tj(y), "grad_x": tj(x.grad), "grad_w": tj(None if w is None else w.grad),
            "grad_b": tj(None if b is None else b.grad)}


for xd, wd, bd in [("bf16", "f32", "f32"), ("f16", "f32", "f32"), ("bf16", "f32", None),
                   ("f32", "bf16", "bf16"), ("f32", "f64", "f64"), ("f64", "f32", "f32"),
                   ("bf16", "f16", "f16")]:
    CASES[f"layer_norm_{xd}_{wd}_{bd}"] = attempt(lambda: layer_norm(xd, wd, bd))
    CASES[f"layer_norm_{xd}_{wd}_{bd}"]["args"] = [xd, wd, bd]


def mse(xd, td, red):
    x = leaf([1.0, 2.0, 4.0], [3], DT[xd])
    t = leaf([0.5, 2.5, 1.0], [3], DT[td])
    y = F.mse_loss(x, t, reduction=red)
    y.backward(torch.ones_like(y) if red == "none" else None)
    return {"out": tj(y), "grad_x": tj(x.grad), "grad_t": tj(t.grad)}


for xd, td, red in [("bf16", "f32", "mean"), ("f32", "f64", "sum"), ("f32", "bf16", "none"),
                    ("f16", "bf16", "mean")]:
    CASES[f"mse_{xd}_{td}_{red}"] = attempt(lambda: mse(xd, td, red))
    CASES[f"mse_{xd}_{td}_{red}"]["args"] = [xd, td, red]


@case("ckpt_int_output")
def _():
    x = leaf([1.5, 2.5], [2])
    y = checkpoint(lambda t: (t * 2).to(torch.int64), x, use_reentrant=False)
    return {"out": tj(y), "requires_grad": y.requires_grad}


@case("ckpt_detached_output")
def _():
    x = leaf([1.5, 2.5], [2])
    y = checkpoint(lambda t: t.detach() * 2, x, use_reentrant=False)
    return {"out": tj(y), "requires_grad": y.requires_grad}


@case("ckpt_no_inputs")
def _():
    w = leaf([1.5, 2.5], [2])
    y = checkpoint(lambda: (w * w).sum(), use_reentrant=False)
    y.backward()
    return {"out": tj(y), "grad_w": tj(w.grad)}


@case("ckpt_int_input")
def _():
    w = leaf([1.5, 2.5], [2])
    y = checkpoint(lambda t: (t * w).sum(), torch.tensor([1, 2]), use_reentrant=False)
    y.backward()
    return {"out": tj(y), "grad_w": tj(w.grad)}


def scale(what):
    sc = torch.amp.GradScaler("cpu", init_scale=4.0)
    v = {"nonscalar": lambda: leaf([1.5, 2.5], [2]) * 2,
         "int": lambda: torch.tensor([3, 4]),
         "no_grad": lambda: torch.tensor([3.0, 4.0]),
         "f64": lambda: leaf([3.0, 4.0], [2], torch.float64),
         "bf16": lambda: leaf([3.0, 4.0], [2], torch.bfloat16),
         "bf16_0d": lambda: leaf([3.0], [], torch.bfloat16)}[what]()
    y = sc.scale(v)
    return {"out": tj(y), "requires_grad": y.requires_grad}


for w_ in ("nonscalar", "int", "no_grad", "f64", "bf16", "bf16_0d"):
    CASES[f"scale_{w_}"] = attempt(lambda: scale(w_))


@case("requires_grad_false_non_leaf")
def _():
    (leaf([1.0, 2.0], [2]) * 2).requires_grad_(False)
    return {}


@case("post_hook_non_leaf")
def _():
    (leaf([1.0, 2.0], [2]) * 2).register_post_accumulate_grad_hook(lambda t: None)
    return {}


@case("post_hook_leaf_without_grad")
def _():
    torch.ones(2).register_post_accumulate_grad_hook(lambda t: None)
    return {}


@case("sgd_momentum_skipped_step")
def _():
    x = leaf([1.0, -2.0], [2])
    o = torch.optim.SGD([x], lr=0.1, momentum=0.9, dampening=0.25)
    x.grad = torch.tensor([1.0, 0.5])
    o.step()
    x.grad = None
    o.step()
    x.grad = torch.tensor([1.0, -1.0])
    o.step()
    return {"p": tj(x), "buf": tj(o.state[x]["momentum_buffer"])}


def opt(name, **kw):
    x = leaf([1.0, -2.0], [2])
    o = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    o = o([x], **kw)
    x.grad = torch.tensor([0.5, -1.0])
    o.step()
    o.step()
    return {"p": tj(x)}


OPTS = [("sgd", {"lr": 0.1, "momentum": 1.5}), ("sgd", {"lr": 0.1, "momentum": 0.5, "dampening": -1.0}),
        ("sgd", {"lr": -0.1}), ("sgd", {"lr": 0.1, "momentum": -0.5}),
        ("sgd", {"lr": 0.1, "weight_decay": -0.1}),
        ("adam", {"lr": 0.1, "eps": 0.0}), ("adam", {"lr": 0.1, "betas": (0.9, 1.0)}),
        ("adam", {"lr": 0.1, "betas": (-0.1, 0.9)}), ("adam", {"lr": 0.1, "eps": -1e-8}),
        ("adam", {"lr": 0.1, "betas": (0.0, 0.0)}),
        ("adamw", {"lr": 0.1, "weight_decay": -0.1}), ("adamw", {"lr": 0.1, "weight_decay": 0.0})]
CASES["optimizers"] = []
for name, kw in OPTS:
    r = attempt(lambda: opt(name, **kw))
    r["name"] = name
    r["kw"] = {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}
    CASES["optimizers"].append(r)

if __name__ == "__main__":
    write_fixture(OUT, json.dumps({"generator": "benches/anchors/gen_grad_s55.py",
                                   "torch": torch.__version__, "cases": CASES}, indent=None,
                                  separators=(",", ":")))
    print(f"{len(CASES)} cases -> {OUT}")
