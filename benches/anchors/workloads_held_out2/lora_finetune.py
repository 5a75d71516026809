"""LoRA fine-tuning of a frozen llama-style decoder: 8 blocks, d 1024, 16 heads, RMSNorm, SwiGLU (2,816), 32,000-token
embedding tied to the output, every base weight bfloat16 with requires_grad off; LoRA adapters of rank 8 (alpha 16,
dropout 0.05, fp32, B zero-initialised) on the q and v projections of every block are the only trained parameters
(AdamW, lr 2e-4, gradient clipping). bf16 autocast; every other block (0, 2, 4, 6) runs under non-reentrant activation
checkpointing. 15 steps, each on a batch of 8 sequences whose lengths are drawn from 48..1024 (right-padded to the
longest rounded up to 8, padding labelled -100), so activations change size every step; loss in float32 over the
32,000-way logits. Every 5 steps a no-grad eval forward on 4 sequences of 1024. WL_DEVICE=cpu: d 64, 4 blocks, 1,000
tokens, 2 sequences of 8..64, 3 steps."""
import os, random, torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(61); rng = random.Random(61)
if small:
    D, H, L, FF, V, B, (lo, hi), steps = 64, 4, 4, 176, 1000, 2, (8, 64), 3
else:
    D, H, L, FF, V, B, (lo, hi), steps = 1024, 16, 8, 2816, 32000, 8, (48, 1024), 15
R, ALPHA, hd, kind = 8, 16, D // H, dev.split(":")[0]


class LoRALinear(nn.Module):
    def __init__(s, i, o):
        super().__init__()
        s.base = nn.Linear(i, o, bias=False)
        s.A, s.B = nn.Parameter(torch.randn(R, i) / i ** 0.5), nn.Parameter(torch.zeros(o, R))
        s.drop = nn.Dropout(0.05)

    def forward(s, x):
        return s.base(x) + (s.drop(x) @ s.A.T @ s.B.T) * (ALPHA / R)


def rope(x, cos, sin):
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.n2 = nn.RMSNorm(D, eps=1e-5), nn.RMSNorm(D, eps=1e-5)
        s.q, s.k, s.v, s.o = LoRALinear(D, D), nn.Linear(D, D, bias=False), LoRALinear(D, D), nn.Linear(D, D, bias=False)
        s.gate, s.up, s.down = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False), nn.Linear(FF, D, bias=False)

    def forward(s, x, cos, sin):
        b, t, _ = x.shape
        h = s.n1(x)
        q, k, v = (m(h).view(b, t, H, hd).transpose(1, 2) for m in (s.q, s.k, s.v))
        a = F.scaled_dot_product_attention(rope(q, cos, sin), rope(k, cos, sin), v, is_causal=True)
        x = x + s.o(a.transpose(1, 2).reshape(b, t, D))
        h = s.n2(x)
        return x + s.down(F.silu(s.gate(h)) * s.up(h))


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.blocks, s.norm = nn.Embedding(V, D), nn.ModuleList(Block() for _ in range(L)), nn.RMSNorm(D, eps=1e-5)

    def forward(s, ids):
        t = ids.shape[1]
        inv = 1.0 / 10000 ** (torch.arange(0, hd, 2, device=ids.device).float() / hd)
        f = torch.outer(torch.arange(t, device=ids.device).float(), inv)
        cos, sin = torch.cat([f.cos(), f.cos()], -1), torch.cat([f.sin(), f.sin()], -1)
        x = s.emb(ids)
        for i, b in enumerate(s.blocks):
            x = checkpoint(b, x, cos, sin, use_reentrant=False) if i % 2 == 0 and s.training else b(x, cos, sin)
        return s.norm(x) @ s.emb.weight.T


model = Model()
lora = []
for n, p in model.named_parameters():
    if n.endswith(".A") or n.endswith(".B"):
        lora.append(p)                      # adapters stay fp32 and trainable
    else:
        p.requires_grad_(False)
        p.data = p.data.to(torch.bfloat16)  # the frozen base model is held in bf16
model.to(dev)
opt = torch.optim.AdamW(lora, lr=2e-4, weight_decay=0.0)


def batch(n, fixed=None):
    lens = [fixed or rng.randint(lo, hi) for _ in range(n)]
    t = (max(lens) + 7) // 8 * 8
    ids = torch.zeros(n, t, dtype=torch.long)
    labels = torch.full((n, t), -100, dtype=torch.long)
    for i, l in enumerate(lens):
        ids[i, :l] = torch.randint(3, V, (l,))
        labels[i, :l - 1] = ids[i, 1:l]
    return ids.to(dev), labels.to(dev)


for step in range(steps):
    model.train()
    ids, labels = batch(B)
    with torch.autocast(device_type=kind, dtype=torch.bfloat16):
        logits = model(ids)
        loss = F.cross_entropy(logits.float().view(-1, V), labels.view(-1), ignore_index=-100)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(lora, 1.0)
    opt.step()
    del logits, loss
    if step % 5 == 4:
        model.eval()
        with torch.no_grad(), torch.autocast(device_type=kind, dtype=torch.bfloat16):
            ids, labels = batch(4, fixed=hi)
            F.cross_entropy(model(ids).float().view(-1, V), labels.view(-1), ignore_index=-100).item()
if dev.startswith("cuda"):
    torch.cuda.synchronize()
