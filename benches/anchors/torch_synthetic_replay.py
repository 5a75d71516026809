"""PyTorch's figures for the synthetic workloads of crates/strata-alloc/tests/traces.rs.

Usage (on a GPU machine; PYTORCH_CUDA_ALLOC_CONF decides the mode):
    python3 torch_synthetic_replay.py FROM TO OUTJSON [PASSES]

The three generators below are line-for-line ports of `varying_batch_training`, `prefetch_training` and
`variable_length_serving` (and their `Lcg`) in crates/strata-alloc/tests/traces.rs; keep them in step. Each
workload of seeds FROM..=TO is replayed PASSES times (default 3) through PyTorch's own caching allocator from a
fresh state: every allocation a `torch.empty` of that many bytes on the stream the workload names (stream 0 the
default stream, stream 1 a side stream), every free dropping the tensor; what is still live at the end of a pass
is freed, as the Rust replay does. Reported per workload: peak allocated and peak reserved after the first pass and
after all passes, and `num_device_alloc` after the first pass.
"""
import json
import sys

import torch

MASK = (1 << 64) - 1


class Lcg:
    def __init__(self, seed):
        self.s = seed & MASK

    def below(self, n):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) & MASK
        return (self.s >> 33) % n


class Builder:
    def __init__(self):
        self.ops, self.vacant, self.slots, self.streams = [], [], 0, 1

    def alloc(self, size, stream):
        if self.vacant:
            slot = self.vacant.pop()
        else:
            slot = self.slots
            self.slots += 1
        self.streams = max(self.streams, stream + 1)
        self.ops.append((0, slot, size, stream))
        return slot

    def free(self, slot):
        self.vacant.append(slot)
        self.ops.append((1, slot, 0, 0))


def varying_batch_training(seed):
    r, b = Lcg(seed), Builder()
    widths = [256 << r.below(4) for _ in range(16)]
    params = [b.alloc(w * w * 4 + 1000, 0) for w in widths]
    for step in range(12):
        batch = 8 + 8 * ((step * 3 + r.below(5)) % 9)
        acts = []
        for w in widths:
            t = b.alloc(batch * w * 4 * 64, 0)
            acts.append(b.alloc(batch * w * 4 * 64 + r.below(4096), 0))
            b.free(t)
        for i in reversed(range(len(widths))):
            w = widths[i]
            g = b.alloc(w * w * 4, 0)
            gi = b.alloc(batch * w * 4 * 64, 0)
            b.free(acts[i])
            b.free(gi)
            b.free(g)
    for p in params:
        b.free(p)
    return b


def prefetch_training(seed):
    r, b = Lcg(seed), Builder()

    def inp():
        return (32 + r.below(4) * 16) * 3 * 224 * 224 * 4

    nxt = b.alloc(inp(), 1)
    for _ in range(10):
        cur = nxt
        nxt = b.alloc(inp(), 1)
        acts = [b.alloc((64 << (l % 4)) * 56 * 56 * 4 * 8, 0) for l in range(12)]
        b.free(cur)
        while acts:
            a = acts.pop()
            g = b.alloc(3 << 20, 0)
            b.free(a)
            b.free(g)
    b.free(nxt)
    return b


def variable_length_serving(seed):
    r, b = Lcg(seed), Builder()
    weights = [b.alloc(7 << 20, 0) for _ in range(12)]
    for _ in range(30):
        batch = 1 + r.below(32)
        length = 16 + r.below(497)
        hidden = batch * length * 768 * 4
        x = b.alloc(hidden, 0)
        for _ in range(12):
            qkv = b.alloc(3 * hidden, 0)
            scores = b.alloc(batch * 12 * length * length * 4, 0)
            probs = b.alloc(batch * 12 * length * length * 4, 0)
            b.free(scores)
            ctx = b.alloc(hidden, 0)
            b.free(probs)
            b.free(qkv)
            ff = b.alloc(4 * hidden, 0)
            y = b.alloc(hidden, 0)
            b.free(ff)
            b.free(ctx)
            b.free(x)
            x = y
        b.free(x)
    for w in weights:
        b.free(w)
    return b


def replay(b, passes):
    dev = torch.device("cuda")
    streams = [torch.cuda.default_stream()] + [torch.cuda.Stream() for _ in range(b.streams - 1)]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    live = [None] * b.slots
    first = None
    for _ in range(passes):
        for kind, slot, size, stream in b.ops:
            if kind == 0:
                with torch.cuda.stream(streams[stream]):
                    live[slot] = torch.empty(size, dtype=torch.uint8, device=dev)
            else:
                live[slot] = None
        for i in range(len(live)):
            live[i] = None
        if first is None:
            s = torch.cuda.memory_stats()
            first = (s["allocated_bytes.all.peak"], s["reserved_bytes.all.peak"], s.get("num_device_alloc"))
    s = torch.cuda.memory_stats()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return dict(first_peak_allocated=first[0], first_peak_reserved=first[1], first_device_allocs=first[2],
                all_peak_reserved=s["reserved_bytes.all.peak"])


def main():
    lo, hi, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    passes = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    torch.cuda.init()
    res = {}
    for seed in range(lo, hi + 1):
        for name, gen in (("varying_batch_training", varying_batch_training),
                          ("prefetch_training", prefetch_training),
                          ("variable_length_serving", variable_length_serving)):
            res[f"{name}/{seed}"] = replay(gen(seed), passes)
    json.dump(dict(torch=torch.__version__, passes=passes, workloads=res), open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
