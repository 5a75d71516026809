"""PyTorch's side of `ddp_gpt`: the GPT of ../shared/anchors/torch_gpt.py (same model, sizes, initialisation,
data and AdamW step; see its docstring) trained with torch.nn.parallel.DistributedDataParallel over NCCL, one process
per GPU, each taking its share of the global batch (`--batch` is the global batch, as in `ddp_gpt`).

Run it beside `torch_gpt.py` on one GPU in the same device call to get PyTorch's own two-GPU speed-up, the figure
that `ddp_gpt --gpus 2` against `gpt` is compared with. Rank 0 prints one JSON object:
  {"bench": "ddp_gpt", "impl": "torch", "gpus": N, "config": {...}, "step_ms": median, "tokens_per_s": global
   tokens per second, "loss_first": x, "loss_last": y}
(the losses are the mean over the ranks, i.e. the loss of the global batch).

Usage: python3 torch_ddp_gpt.py --gpus 2 [--batch 8] [--precision f32|autocast-bf16] [--steps 10] [--warmup 3]
         [--layers 12] [--d-model 768] [--heads 12] [--seq 1024] [--vocab 8192] [--seed 0]
DDP settings: gradient_as_bucket_view=True (as strata's buckets), default bucket_cap_mb (25), NCCL_NVLS_ENABLE=0
unless set.
"""
import argparse, json, math, os, statistics, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--gpus", type=int, default=2)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--d-model", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--vocab", type=int, default=8192)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--precision", default="f32", choices=["f32", "autocast-bf16"])
p.add_argument("--seed", type=int, default=0)
p.add_argument("--port", type=int, default=29517)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.h)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        y = s.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.tok, self.pos = nn.Embedding(a.vocab, a.d_model), nn.Embedding(a.seq, a.d_model)
        self.blocks = nn.ModuleList([Block(a.d_model, a.heads) for _ in range(a.layers)])
        self.ln_f = nn.LayerNorm(a.d_model)
        self.head = nn.Linear(a.d_model, a.vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def run(rank, a):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank, world_size=a.gpus,
                            device_id=dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(a.seed)
    model = GPT(a).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[rank], gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    # Every rank draws the same global batches (torch_gpt.py's generator and recipe) and keeps its share.
    gen = torch.Generator(device=dev); gen.manual_seed(a.seed + 1)
    succ = torch.randint(0, a.vocab, (a.vocab,), device=dev, generator=gen)

    def batch():
        t = torch.empty(a.batch, a.seq + 1, dtype=torch.long, device=dev)
        t[:, 0] = torch.randint(0, a.vocab, (a.batch,), device=dev, generator=gen)
        keep = torch.rand(a.batch, a.seq, device=dev, generator=gen) < 0.9
        rnd = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev, generator=gen)
        for i in range(a.seq):
            t[:, i + 1] = torch.where(keep[:, i], succ[t[:, i]], rnd[:, i])
        share = a.batch // a.gpus
        t = t[rank * share:(rank + 1) * share]
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()

    data = [batch() for _ in range(4)]
    losses, times = [], []
    for i in range(a.warmup + a.steps):
        x, y = data[i % len(data)]
        torch.cuda.synchronize(); t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if a.precision == "autocast-bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = ddp(x)
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
        else:
            loss = F.cross_entropy(ddp(x).view(-1, a.vocab), y.view(-1))
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        losses.append(mean.item())
    step = statistics.median(times)
    if rank == 0:
        cfg = {k: v for k, v in vars(a).items() if k != "port"}
        print(json.dumps(dict(bench="ddp_gpt", impl="torch", gpus=a.gpus, config=cfg, step_ms=round(step * 1e3, 2),
                              tokens_per_s=round(a.batch * a.seq / step), loss_first=round(losses[0], 4),
                              loss_last=round(losses[-1], 4))), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    args = p.parse_args()
    if args.batch % args.gpus:
        raise SystemExit(f"--batch {args.batch} is not a multiple of --gpus {args.gpus}")
    mp.spawn(run, args=(args,), nprocs=args.gpus)
