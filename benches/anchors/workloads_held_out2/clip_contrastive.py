"""CLIP-style contrastive training under bf16 autocast with AdamW (weight decay, cosine schedule, gradient clipping),
16 steps at batch 256: an image tower (a ViT: patch 16 on 128x128 images, 64 patches plus a class token, width 384,
6 pre-norm blocks of 6 heads, projection to 256) and a text tower (a causal transformer: 49,408-token embedding,
width 384, 4 blocks of 6 heads, the state at each caption's end token projected to 256) over captions of 4 plus an
exponential of mean 9 tokens (at most 77) padded to the longest of the batch (so the text length, about 40..77, changes
every step); both embeddings L2-normalised, the 256 x 256 similarity logits scaled by a learned temperature,
symmetric cross-entropy. Every 5 steps a no-grad retrieval eval of 512 pairs (text embedded in 2 chunks, the
512 x 512 similarity, top-1 accuracy both ways).
WL_DEVICE=cpu: widths 32, 2+2 blocks, 64x64 images, 1,000 tokens, batch 8, 3 steps."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(41); rng = random.Random(41)
if small:
    IMG, W, LI, LT, V, B, EB, steps, emb = 64, 32, 2, 2, 1000, 8, 16, 3, 16
else:
    IMG, W, LI, LT, V, B, EB, steps, emb = 128, 384, 6, 4, 49408, 256, 512, 16, 256
P, NH, CTX = 16, 6 if not small else 4, 77
kind = dev.split(":")[0]


class Block(nn.Module):
    def __init__(s, causal):
        super().__init__()
        s.causal = causal
        s.ln1, s.qkv, s.proj = nn.LayerNorm(W), nn.Linear(W, 3 * W), nn.Linear(W, W)
        s.ln2, s.mlp = nn.LayerNorm(W), nn.Sequential(nn.Linear(W, 4 * W), nn.GELU(), nn.Linear(4 * W, W))

    def forward(s, x):
        b, t, _ = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(b, t, 3, NH, W // NH).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=s.causal)
        x = x + s.proj(a.transpose(1, 2).reshape(b, t, W))
        return x + s.mlp(s.ln2(x))


class CLIP(nn.Module):
    def __init__(s):
        super().__init__()
        s.patch = nn.Conv2d(3, W, P, P)
        s.cls, s.ipos = nn.Parameter(torch.randn(1, 1, W) * 0.02), nn.Parameter(torch.randn(1, (IMG // P) ** 2 + 1, W) * 0.02)
        s.iblocks, s.iln, s.iproj = nn.ModuleList(Block(False) for _ in range(LI)), nn.LayerNorm(W), nn.Linear(W, emb, bias=False)
        s.tok, s.tpos = nn.Embedding(V, W), nn.Parameter(torch.randn(CTX, W) * 0.01)
        s.tblocks, s.tln, s.tproj = nn.ModuleList(Block(True) for _ in range(LT)), nn.LayerNorm(W), nn.Linear(W, emb, bias=False)
        s.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def image(s, x):
        x = s.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([s.cls.expand(x.shape[0], -1, -1), x], 1) + s.ipos
        for b in s.iblocks:
            x = b(x)
        return F.normalize(s.iproj(s.iln(x[:, 0])), dim=-1)

    def text(s, ids, ends):
        x = s.tok(ids) + s.tpos[:ids.shape[1]]
        for b in s.tblocks:
            x = b(x)
        x = s.tln(x)[torch.arange(ids.shape[0], device=ids.device), ends]
        return F.normalize(s.tproj(x), dim=-1)


def captions(n):
    lens = [min(CTX, 4 + int(rng.expovariate(1 / 9))) for _ in range(n)]   # mostly short captions, a long tail
    ids = torch.zeros(n, max(lens), dtype=torch.long)
    for i, l in enumerate(lens):
        ids[i, :l - 1] = torch.randint(1, V - 1, (l - 1,))
        ids[i, l - 1] = V - 1                       # end-of-text token, the largest id (as in CLIP)
    ids = ids.to(dev, non_blocking=True)
    return ids, ids.argmax(-1)


model = CLIP().to(dev)
decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "pos" not in n]
rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "pos" not in n)]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.2}, {"params": rest, "weight_decay": 0.0}],
                        lr=5e-4, betas=(0.9, 0.98), eps=1e-6)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3) * 0.5 * (1 + math.cos(math.pi * s / steps)))
for step in range(steps):
    imgs = torch.randn(B, 3, IMG, IMG, device=dev)
    ids, ends = captions(B)
    with torch.autocast(device_type=kind, dtype=torch.bfloat16):
        zi, zt = model.image(imgs), model.text(ids, ends)
        logits = model.logit_scale.exp().clamp(max=100) * zi @ zt.T
        labels = torch.arange(B, device=dev)
        loss = (F.cross_entropy(logits.float(), labels) + F.cross_entropy(logits.T.float(), labels)) / 2
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(); sched.step()
    with torch.no_grad():
        model.logit_scale.clamp_(0, math.log(100))
    if step % 5 == 4:
        model.eval()
        with torch.no_grad(), torch.autocast(device_type=kind, dtype=torch.bfloat16):
            zi = model.image(torch.randn(EB, 3, IMG, IMG, device=dev))
            zt = torch.cat([model.text(*captions(EB // 2)) for _ in range(2)])
            sim = zi.float() @ zt.float().T
            acc = ((sim.argmax(1) == torch.arange(EB, device=dev)).float().mean()
                   + (sim.argmax(0) == torch.arange(EB, device=dev)).float().mean()) / 2
            acc.item()
        model.train()
if dev.startswith("cuda"):
    torch.cuda.synchronize()
