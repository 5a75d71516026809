"""torch_gpt.py's model and training step, started from strata's state: checks `examples/gpt.rs`
step by step against PyTorch on the same weights and the same batches.

    STRATA_GPT_DUMP=/tmp/g gpt --precision P [sizes...]      # writes /tmp/g_init and /tmp/g_grads
    python3 gpt_same_init.py --prefix /tmp/g --precision P [same sizes...] [--strata-json LINE_FILE]

Loads PREFIX_init.safetensors (the parameters under PyTorch's names, the four batches as
data.K.x / data.K.y), runs the first step's forward and backward, compares every gradient with
PREFIX_grads.safetensors (strata's, before its first update): one JSON line per parameter whose
relative error ||g_strata - g_torch|| / ||g_torch|| exceeds --tol, then a summary line with the
worst parameter and the loss of every step (same schedule as torch_gpt.py: warmup + steps steps
over the four batches in turn). --perturb EPS multiplies every initial parameter by
(1 + EPS * N(0, 1)) first: how much the losses move when only the state's last bits do. With --strata-json, the losses of strata's run (the `losses`
field of its JSON line) are printed beside PyTorch's.
"""
import argparse, json, math

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file
from torch.utils.checkpoint import checkpoint

p = argparse.ArgumentParser()
p.add_argument("--prefix", required=True)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--d-model", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--vocab", type=int, default=8192)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--precision", default="f32", choices=["f32", "bf16", "autocast-bf16"])
p.add_argument("--checkpoint", default="none")
p.add_argument("--device", default="cuda")
p.add_argument("--batch", type=int, default=8, help="taken from the dumped batches")
p.add_argument("--seed", type=int, default=0, help="unused: the state comes from strata")
p.add_argument("--attn", default="naive", choices=["naive"])
p.add_argument("--tol", type=float, default=0.02)
p.add_argument("--strata-json", default=None)
p.add_argument("--linear-unfused", action="store_true",
               help="Linear as a product then a bias add in the product's dtype (two roundings under "
                    "autocast) instead of addmm's one")
p.add_argument("--no-reduced-precision-reduction", action="store_true",
               help="torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False")
p.add_argument("--perturb", type=float, default=0.0,
               help="multiply every initial parameter by (1 + PERTURB * N(0, 1)) (a fixed generator): "
                    "how far a perturbation of the state's last bits moves the losses")
a = p.parse_args()
dev = torch.device(a.device)
if a.no_reduced_precision_reduction:
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
if a.linear_unfused:
    def _linear_unfused(self, x):
        y = F.linear(x, self.weight)
        return y if self.bias is None else y + self.bias.to(y.dtype)
    nn.Linear.forward = _linear_unfused
if dev.type == "cuda":
    torch.backends.cuda.matmul.allow_tf32 = False


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def attn(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.h)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        y = s.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(a.vocab, a.d_model), nn.Embedding(a.seq, a.d_model)
        self.blocks = nn.ModuleList([Block(a.d_model, a.heads) for _ in range(a.layers)])
        self.ln_f = nn.LayerNorm(a.d_model)
        self.head = nn.Linear(a.d_model, a.vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        every = 0 if a.checkpoint == "none" else 1 if a.checkpoint == "every" else int(a.checkpoint.split(":")[1])
        for i, blk in enumerate(self.blocks):
            x = checkpoint(blk, x, use_reentrant=False) if every and i % every == 0 else blk(x)
        return self.head(self.ln_f(x))


init = load_file(a.prefix + "_init.safetensors", device=str(dev))
model = GPT().to(dev)
if a.precision == "bf16":
    model = model.to(torch.bfloat16)
names = {n for n, _ in model.named_parameters()}
missing = names - set(init)
if missing:
    raise SystemExit(f"strata's dump lacks {sorted(missing)[:5]}")
with torch.no_grad():
    for n, q in model.named_parameters():
        if init[n].shape != q.shape:
            raise SystemExit(f"{n}: strata {tuple(init[n].shape)}, torch {tuple(q.shape)}")
        q.copy_(init[n])
    if a.perturb:
        g = torch.Generator(device=dev).manual_seed(1234)
        for q in model.parameters():
            q.mul_(1 + a.perturb * torch.randn(q.shape, device=dev, generator=g, dtype=torch.float32).to(q.dtype))
data = [(init[f"data.{k}.x"].long(), init[f"data.{k}.y"].long()) for k in range(4)]
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def loss_of(x, y):
    if a.precision == "autocast-bf16":
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            logits = model(x)
        return F.cross_entropy(logits.float().view(-1, a.vocab), y.view(-1))
    return F.cross_entropy(model(x).view(-1, a.vocab), y.view(-1))


grads = load_file(a.prefix + "_grads.safetensors", device=str(dev))
losses, worst = [], (0.0, None)
for i in range(a.warmup + a.steps):
    x, y = data[i % 4]
    opt.zero_grad(set_to_none=True)
    loss = loss_of(x, y)
    loss.backward()
    if i == 0:
        for n, q in model.named_parameters():
            if n not in grads:
                print(json.dumps(dict(param=n, error="strata has no gradient")), flush=True)
                continue
            gt, gs = q.grad.double(), grads[n].double()
            rel = ((gs - gt).norm() / gt.norm().clamp_min(1e-30)).item()
            if rel > worst[0]:
                worst = (rel, n)
            if rel > a.tol:
                print(json.dumps(dict(param=n, rel_err=rel, norm_torch=gt.norm().item(),
                                      norm_strata=gs.norm().item(),
                                      cos=(F.cosine_similarity(gs.flatten(), gt.flatten(), dim=0)).item())),
                      flush=True)
    opt.step()
    losses.append(round(loss.item(), 4))
out = dict(bench="gpt_same_init", precision=a.precision, perturb=a.perturb, linear_unfused=a.linear_unfused,
           no_reduced_precision_reduction=a.no_reduced_precision_reduction, worst_grad_rel_err=worst[0], worst_param=worst[1],
           torch_losses=losses)
if a.strata_json:
    with open(a.strata_json) as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("impl") == "strata":
                out["strata_losses"] = rec.get("losses")
print(json.dumps(out), flush=True)
