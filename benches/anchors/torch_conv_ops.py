"""PyTorch's times and memory for the ops of examples/examples/conv_ops.rs,
at the same ResNet-50 shapes, one JSON line per measurement with
"impl": "torch" (cuDNN's convolutions). Run in the same device call as the
strata example:

    python benches/anchors/torch_conv_ops.py [--iters N] [--conv-tf32 on|off]

fwd: the functional op. fwd+bwd: the op on tensors that require grad and
the backward of (y * g).sum(). Median of CUDA-event timings after 3
warm-ups (host_ms: the median time the host spent in those calls);
peak_mib is torch.cuda.max_memory_allocated during one call above what was
allocated before it. --conv-tf32 sets torch.backends.cudnn.allow_tf32
(PyTorch's default: on); every line names it.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

DEV = "cuda"


def measure(iters, f):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts, hs = [], []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        t0 = time.perf_counter()
        f()
        hs.append((time.perf_counter() - t0) * 1e3)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    hs.sort()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    f()
    torch.cuda.synchronize()
    return ts[len(ts) // 2], (torch.cuda.max_memory_allocated() - before) / 2 ** 20, hs[len(hs) // 2]


def line(op, dtype, pass_, shape, m):
    name = {torch.float32: "f32", torch.bfloat16: "bf16"}[dtype]
    print(json.dumps({"bench": "conv_ops", "impl": "torch", "op": op, "dtype": name, "pass": pass_,
                      "shape": list(shape), "ms": m[0], "host_ms": m[2], "peak_mib": m[1],
                      "conv_tf32": torch.backends.cudnn.allow_tf32}), flush=True)


def bench(op, shape, f, dtype, iters, extra=()):
    x = torch.randn(shape, device=DEV, dtype=dtype)
    params = [torch.randn(s, device=DEV, dtype=dtype) for s in extra]
    with torch.no_grad():
        line(op, dtype, "fwd", shape, measure(iters, lambda: f(x, *params)))
        g = torch.randn_like(f(x, *params))

    def step():
        xs = [t.clone().requires_grad_(True) for t in [x, *params]]
        (f(*xs) * g).sum().backward()
    line(op, dtype, "fwd+bwd", shape, measure(iters, step))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--conv-tf32", choices=["on", "off"], default=None)
    a = ap.parse_args()
    if a.conv_tf32 is not None:
        torch.backends.cudnn.allow_tf32 = a.conv_tf32 == "on"
    torch.backends.cudnn.benchmark = False
    for dtype in (torch.float32, torch.bfloat16):
        bench("conv3x3", (32, 64, 56, 56), lambda x, w, b: F.conv2d(x, w, b, padding=1), dtype, a.iters,
              [(64, 64, 3, 3), (64,)])
        bench("conv1x1", (32, 256, 56, 56), lambda x, w, b: F.conv2d(x, w, b), dtype, a.iters,
              [(64, 256, 1, 1), (64,)])
        bench("conv3x3_s2", (32, 128, 56, 56), lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), dtype,
              a.iters, [(128, 128, 3, 3), (128,)])
        bench("conv_transpose2x2_s2", (32, 256, 28, 28),
              lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2), dtype, a.iters,
              [(256, 128, 2, 2), (128,)])
        bench("max_pool", (32, 64, 112, 112), lambda x: F.max_pool2d(x, 3, 2, 1), dtype, a.iters)
        bench("avg_pool", (32, 256, 56, 56), lambda x: F.avg_pool2d(x, 2), dtype, a.iters)
        bench("adaptive_avg_pool", (32, 2048, 7, 7), lambda x: F.adaptive_avg_pool2d(x, 1), dtype, a.iters)


if __name__ == "__main__":
    main()
