"""A small decoder (6 blocks, d 512, 8 heads, 32,000 tokens) serving 40 requests with continuous batching: at most 8
requests in flight, each prefilled alone (prompt of 32..512 tokens) into its own key/value cache, preallocated for
its prompt plus its 16..128 new tokens, then decoded one token per step together with the others; a finished
request's cache is freed and the next request admitted. fp16, inference mode."""
import math, torch, torch.nn as nn
torch.manual_seed(23)
dev = "cuda"
V, D, H, L = 32000, 512, 8, 6
hd = D // H


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x, cache, pos):
        # x: (1, T, D); cache: (2, H, cap, hd), filled up to pos
        T = x.shape[1]
        q, k, v = self.qkv(self.ln1(x)).view(1, T, 3, H, hd).permute(2, 0, 3, 1, 4)
        cache[0, :, pos:pos + T] = k[0]
        cache[1, :, pos:pos + T] = v[0]
        kk, vv = cache[0:1, :, :pos + T], cache[1:2, :, :pos + T]
        a = nn.functional.scaled_dot_product_attention(q, kk, vv, is_causal=T > 1)
        x = x + self.proj(a.transpose(1, 2).reshape(1, T, D))
        return x + self.mlp(self.ln2(x))


emb = nn.Embedding(V, D).to(dev).half()
blocks = nn.ModuleList(Block() for _ in range(L)).to(dev).half()
lnf = nn.LayerNorm(D).to(dev).half()


def step(tokens, caches, pos):
    x = emb(tokens)[None]
    for b, c in zip(blocks, caches):
        x = b(x, c, pos)
    return (lnf(x[:, -1]) @ emb.weight.T).argmax(-1)


queue = [(int(torch.randint(32, 513, ())), int(torch.randint(16, 129, ()))) for _ in range(40)]
live = []
with torch.inference_mode():
    while queue or live:
        while queue and len(live) < 8:
            p, n = queue.pop(0)
            caches = [torch.empty(2, H, p + n, hd, device=dev, dtype=torch.half) for _ in range(L)]
            tok = step(torch.randint(0, V, (p,), device=dev), caches, 0)
            live.append([caches, p, n, tok])
        for r in live:
            caches, pos, left, tok = r
            r[3] = step(tok.view(1), caches, pos)
            r[1], r[2] = pos + 1, left - 1
        live = [r for r in live if r[2] > 0]
torch.cuda.synchronize()
