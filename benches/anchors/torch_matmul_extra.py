"""PyTorch's matrix-product figures that shared/anchors/torch_mission.py does not print,
with the same keys as its `matmul8192` lines and as strata's gpu_bench
(`cargo run --release -p strata-examples --example gpu_bench -- --only matmul8192,bmm_attn`).
Run it in the same device call as gpu_bench.

- matmul8192: 8192^3 in f32 (exact), tf32 (allow_tf32), bf16 and f16 (TFLOP/s);
- bmm_attn_qk: [96, 1024, 64] @ [96, 64, 1024]; bmm_attn_pv: [96, 1024, 1024] @ [96, 1024, 64];
  in bf16, f16 and f32.

Timing as gpu_bench: CUDA events around the calls (10 back-to-back calls for the batched
products, so that their launch latency is not measured), median of `iters` runs after 3 warm-ups.

    python3 benches/anchors/torch_matmul_extra.py [iters]
"""
import json
import statistics
import sys

import torch

dev = torch.device("cuda:0")
ITERS = int(sys.argv[1]) if len(sys.argv) > 1 else 20


def out(d):
    print(json.dumps(d), flush=True)


def event_time(fn, reps=1, iters=ITERS):
    """Seconds per call of fn, CUDA events around `reps` calls, median of `iters`."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3 / reps)
    return statistics.median(ts)


def line(bench, dtype, flops, secs):
    out(dict(bench=bench, impl="torch", dtype=dtype, tflops=round(flops / secs / 1e12, 1),
             ms=round(secs * 1e3, 4)))


def main():
    n = 8192
    for name, dt, tf32 in [("f32", torch.float32, False), ("tf32", torch.float32, True),
                           ("bf16", torch.bfloat16, False), ("f16", torch.float16, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(n, n, device=dev, dtype=dt)
        b = torch.randn(n, n, device=dev, dtype=dt)
        line("matmul8192", name, 2 * n ** 3, event_time(lambda: a @ b))
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False

    bs, l, d = 96, 1024, 64
    flops = 2 * bs * l * l * d
    for name, dt in [("bf16", torch.bfloat16), ("f16", torch.float16), ("f32", torch.float32)]:
        q = torch.randn(bs, l, d, device=dev, dtype=dt)
        kt = torch.randn(bs, d, l, device=dev, dtype=dt)
        p = torch.randn(bs, l, l, device=dev, dtype=dt)
        v = torch.randn(bs, l, d, device=dev, dtype=dt)
        line("bmm_attn_qk", name, flops, event_time(lambda: q @ kt, reps=10))
        line("bmm_attn_pv", name, flops, event_time(lambda: p @ v, reps=10))


if __name__ == "__main__":
    torch.cuda.init()
    main()
