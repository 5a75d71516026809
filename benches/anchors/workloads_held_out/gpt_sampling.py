"""Autoregressive sampling from a small GPT (8 blocks, d 512, 8 heads) with a key/value cache grown by torch.cat:
6 rounds, each a batch of 8 prompts of one random length (32..256) extended by 96 sampled tokens, fp16."""
import math, random, torch, torch.nn as nn
torch.manual_seed(3); random.seed(3)
dev, D, Hh, L, V = "cuda", 512, 8, 8, 8192
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.qkv, s.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
    def forward(s, x, cache):
        b, t, _ = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(D, dim=2)
        q, k, v = (z.view(b, t, Hh, D // Hh).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        att = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        x = x + s.proj(att.transpose(1, 2).reshape(b, t, D))
        return x + s.ff(s.ln2(x)), (k, v)
emb, blocks, head = nn.Embedding(V, D), nn.ModuleList(Block() for _ in range(L)), nn.Linear(D, V)
model = nn.ModuleDict(dict(emb=emb, blocks=blocks, head=head)).to(dev).half().eval()
with torch.inference_mode():
    for _ in range(6):
        n = random.randint(32, 256)
        x = torch.randint(0, V, (8, n), device=dev)
        caches = [None] * L
        h = emb(x)
        for _ in range(96):
            for i, blk in enumerate(blocks):
                h, caches[i] = blk(h, caches[i])
            logits = head(h[:, -1]).float()
            nxt = torch.multinomial(torch.softmax(logits, -1), 1)
            h = emb(nxt)
        del caches, h
torch.cuda.synchronize()
