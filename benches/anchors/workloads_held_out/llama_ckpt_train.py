"""A llama-style decoder (8 blocks, d 768, 12 heads, RMSNorm, SwiGLU MLP, tied embeddings over a 32,000-token
vocabulary) trained under bf16 autocast with every block checkpointed (`use_reentrant=False`), AdamW and gradient
clipping: batches of 8 sequences of 512 tokens, 12 optimizer steps. Written in session 21 after the allocator's rules
were in place (held out from them)."""
import os
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
torch.manual_seed(21)
dev = "cuda" if torch.cuda.is_available() else "cpu"
STEPS = int(os.environ.get("STEPS", 12))
D, H, L, V, T, B = 768, 12, 8, 32000, 512, 8
if dev == "cpu":
    D, H, L, V, T, B = 64, 4, 2, 500, 32, 2


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * self.w


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.up = nn.Linear(D, 2 * (8 * D // 3), bias=False)
        self.down = nn.Linear(8 * D // 3, D, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D)
        x = x + self.o(a)
        g, u = self.up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.norm = RMSNorm(D)

    def forward(self, idx):
        x = self.emb(idx)
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False)
        return self.norm(x) @ self.emb.weight.t()


model = Model().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
for step in range(STEPS):
    idx = torch.randint(0, V, (B, T + 1), device=dev)
    with torch.autocast(dev, dtype=torch.bfloat16):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, V), idx[:, 1:].reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
if dev == "cuda":
    torch.cuda.synchronize()
