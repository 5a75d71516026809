"""A small mixture-of-experts transformer language model in plain PyTorch (4 pre-norm blocks, width 512, 8 heads
of causal scaled-dot-product attention; each feed-forward is 8 SwiGLU experts of width 1408 with top-2 routing:
the tokens routed to an expert are gathered with index_select, run through it and scattered back with index_add_,
so every expert's batch size changes every step; a load-balancing loss) trained under torch.autocast(bfloat16)
with AdamW on random tokens, batch 16 x 512, 15 steps.
`--device cpu` (or DEVICE=cpu) and SMOKE=1 (batch 2 x 64, 2 steps) for a quick CPU check."""
import os, random, sys, torch, torch.nn as nn, torch.nn.functional as F
dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else os.environ.get("DEVICE", "cuda")
kind = dev.split(":")[0]; smoke = os.environ.get("SMOKE") == "1"
torch.manual_seed(0); random.seed(0)
B, T, steps = (2, 64, 2) if smoke else (16, 512, 15)
V, D, NH, E, FF, K = 8192, 512, 8, 8, 1408, 2

class MoE(nn.Module):
    def __init__(s):
        super().__init__()
        s.router = nn.Linear(D, E, bias=False)
        s.w1, s.w3 = nn.Parameter(torch.randn(E, D, FF) * D ** -0.5), nn.Parameter(torch.randn(E, D, FF) * D ** -0.5)
        s.w2 = nn.Parameter(torch.randn(E, FF, D) * FF ** -0.5)
    def forward(s, x):
        probs = s.router(x).float().softmax(-1)
        w, idx = probs.topk(K, -1)
        w = (w / w.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        for e in range(E):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0: continue
            h = x.index_select(0, tok)
            h = (F.silu(h @ s.w1[e]) * (h @ s.w3[e])) @ s.w2[e]
            out.index_add_(0, tok, h * w[tok, slot, None])
        frac = F.one_hot(idx[:, 0], E).float().mean(0)
        return out, E * (frac * probs.mean(0)).sum()

class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.qkv, s.o, s.n2, s.moe = nn.RMSNorm(D), nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D, bias=False), nn.RMSNorm(D), MoE()
    def forward(s, x):
        b, t, _ = x.shape
        q, k, v = s.qkv(s.n1(x)).view(b, t, 3, NH, D // NH).permute(2, 0, 3, 1, 4)
        x = x + s.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D))
        h, aux = s.moe(s.n2(x).reshape(b * t, D))
        return x + h.view(b, t, D), aux

class LM(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.pos = nn.Embedding(V, D), nn.Embedding(1024, D)
        s.blocks, s.norm, s.head = nn.ModuleList([Block() for _ in range(4)]), nn.RMSNorm(D), nn.Linear(D, V, bias=False)
    def forward(s, ids):
        x, aux = s.emb(ids) + s.pos(torch.arange(ids.shape[1], device=ids.device)), 0.0
        for blk in s.blocks:
            x, a = blk(x); aux = aux + a
        return s.head(s.norm(x)), aux

model = LM().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, betas=(0.9, 0.95))
for step in range(steps):
    ids = torch.randint(0, V, (B, T + 1), device=dev)
    with torch.autocast(kind, dtype=torch.bfloat16):
        logits, aux = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, V), ids[:, 1:].reshape(-1)) + 0.01 * aux
    opt.zero_grad(set_to_none=True); loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
if dev.startswith("cuda"): torch.cuda.synchronize()
