"""PyTorch's times for the ops of examples/examples/transformer_ops.rs, at
the same GPT-2-small shapes, one JSON line per measurement with
"impl": "torch". Run in the same device call as the strata example:

    python benches/anchors/torch_transformer_ops.py [--iters N]

Forward: the functional op. Backward: torch.autograd.grad of the op's output
(with a fixed upstream gradient, retain_graph) with respect to the same
inputs strata differentiates. Median of CUDA-event timings after 3 warm-ups.

BENCHES below lists the ops, as strata's example does.
"""
import argparse
import json

import torch
import torch.nn.functional as F

B, T, D, V = 8, 1024, 768, 8192
DEV = "cuda"


def time_ms(iters, f):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return ts[len(ts) // 2]


def line(op, dtype, pass_, shape, ms):
    name = {torch.float32: "f32", torch.bfloat16: "bf16"}[dtype]
    print(json.dumps({"bench": "transformer_ops", "impl": "torch", "op": op, "dtype": name,
                      "pass": pass_, "shape": list(shape), "ms": ms}))


def layer_norm(dtype, iters):
    shape = (B * T, D)
    x = torch.randn(shape, dtype=dtype, device=DEV, requires_grad=True)
    w = torch.randn(D, dtype=dtype, device=DEV, requires_grad=True)
    b = torch.randn(D, dtype=dtype, device=DEV, requires_grad=True)
    with torch.no_grad():
        line("layer_norm", dtype, "fwd", shape, time_ms(iters, lambda: F.layer_norm(x, (D,), w, b, 1e-5)))
    y = F.layer_norm(x, (D,), w, b, 1e-5)
    dy = torch.randn_like(y)
    line("layer_norm", dtype, "bwd", shape,
         time_ms(iters, lambda: torch.autograd.grad(y, (x, w, b), dy, retain_graph=True)))


def cross_entropy(dtype, iters):
    shape = (B * T, V)
    x = torch.randn(shape, dtype=dtype, device=DEV, requires_grad=True)
    t = torch.randint(0, V, (B * T,), device=DEV)
    with torch.no_grad():
        line("cross_entropy", dtype, "fwd", shape, time_ms(iters, lambda: F.cross_entropy(x, t)))
    loss = F.cross_entropy(x, t)
    g = torch.ones_like(loss)
    line("cross_entropy", dtype, "bwd", shape,
         time_ms(iters, lambda: torch.autograd.grad(loss, (x,), g, retain_graph=True)))


def embedding(dtype, iters):
    w = torch.randn(V, D, dtype=dtype, device=DEV, requires_grad=True)
    idx = torch.randint(0, V, (B, T), device=DEV)
    with torch.no_grad():
        line("embedding", dtype, "fwd", (B, T, V, D), time_ms(iters, lambda: F.embedding(idx, w)))
    y = F.embedding(idx, w)
    g = torch.randn_like(y)
    line("embedding", dtype, "bwd", (B, T, V, D),
         time_ms(iters, lambda: torch.autograd.grad(y, (w,), g, retain_graph=True)))


def softmax(dtype, iters):
    shape = (B * 12 * T, T)
    x = torch.randn(shape, dtype=dtype, device=DEV, requires_grad=True)
    with torch.no_grad():
        line("softmax", dtype, "fwd", shape, time_ms(iters, lambda: torch.softmax(x, -1)))
    y = torch.softmax(x, -1)
    dy = torch.randn_like(y)
    line("softmax", dtype, "bwd", shape,
         time_ms(iters, lambda: torch.autograd.grad(y, (x,), dy, retain_graph=True)))


def gelu(dtype, iters):
    shape = (B * T, 4 * D)
    x = torch.randn(shape, dtype=dtype, device=DEV, requires_grad=True)
    with torch.no_grad():
        line("gelu_tanh", dtype, "fwd", shape, time_ms(iters, lambda: F.gelu(x, approximate="tanh")))
    y = F.gelu(x, approximate="tanh")
    dy = torch.randn_like(y)
    line("gelu_tanh", dtype, "bwd", shape,
         time_ms(iters, lambda: torch.autograd.grad(y, (x,), dy, retain_graph=True)))


BENCHES = [layer_norm, cross_entropy, embedding, softmax, gelu]

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    for dtype in (torch.float32, torch.bfloat16):
        for bench in BENCHES:
            bench(dtype, max(a.iters, 5))
