"""A small vision-language model trained LLaVA-style under bf16 autocast with gradient accumulation, AdamW (gradient
clipping at 1.0), 24 optimizer steps of 4 micro-batches. Vision encoder: a ViT (patch 14 on 224 x 224 images: 256
patches, width 768, 12 pre-norm blocks of 12 heads, no class token) with bfloat16 weights, frozen and run under
torch.no_grad; projector: 2 x 2 patch merging (256 -> 64 tokens of 3,072) and a 3,072 -> 1,024 -> 1,024 GELU MLP;
decoder: 8 pre-norm blocks (d 1,024, 16 heads, RMSNorm, SwiGLU 2,816, rotary positions) over a 32,000-token
vocabulary tied to the output, float32 weights. A micro-batch holds 6 samples; each has 0..4 images (drawn with
weights 3:3:2:1:1) and 32..384 text tokens, and its sequence is the text with 64 placeholder tokens per image
inserted at random places, right-padded to the longest sequence of the micro-batch (rounded up to 8). All of a
micro-batch's images (0..24) go through the ViT as one batch, the projector maps them, and the resulting image
tokens are spliced into the token embeddings with masked_scatter at the placeholder positions (a micro-batch without
images skips the ViT). Loss: cross-entropy in float32 on the text tokens only (placeholders and padding labelled
-100), divided by 4. So the ViT batch, the number of image tokens and the sequence length all change with every
micro-batch. After steps 12 and 24 a no-grad eval micro-batch.
WL_DEVICE=cpu: ViT width 64 / 2 blocks on 56 x 56 images (16 patches -> 4 tokens), decoder d 64 / 2 blocks, 1,000
tokens, 2 samples a micro-batch with texts of 8..32 tokens, 2 steps of 2 micro-batches, eval after each step."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(95); rng = random.Random(95)
if small:
    VW, VL, VH, IMG, D, L, H, FF, V = 64, 2, 4, 56, 64, 2, 4, 176, 1000
    MB, TXT, ACC, steps, eval_at = 2, (8, 32), 2, 2, (1, 2)
else:
    VW, VL, VH, IMG, D, L, H, FF, V = 768, 12, 12, 224, 1024, 8, 16, 2816, 32000
    MB, TXT, ACC, steps, eval_at = 6, (32, 384), 4, 24, (12, 24)
kind, PATCH, IMG_TOK, PAD = dev.split(":")[0], 14, 0, 1
NP = (IMG // PATCH) ** 2                              # patches per image
TPI = NP // 4                                         # image tokens per image after 2 x 2 merging


class ViTBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.qkv, s.proj = nn.LayerNorm(VW), nn.Linear(VW, 3 * VW), nn.Linear(VW, VW)
        s.ln2, s.fc1, s.fc2 = nn.LayerNorm(VW), nn.Linear(VW, 4 * VW), nn.Linear(4 * VW, VW)

    def forward(s, x):
        b, t, _ = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(b, t, 3, VH, VW // VH).permute(2, 0, 3, 1, 4)
        x = x + s.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, VW))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class ViT(nn.Module):
    def __init__(s):
        super().__init__()
        s.patch = nn.Conv2d(3, VW, PATCH, PATCH)
        s.pos = nn.Parameter(torch.randn(1, NP, VW) * 0.02)
        s.blocks, s.ln = nn.ModuleList(ViTBlock() for _ in range(VL)), nn.LayerNorm(VW)

    def forward(s, img):
        x = s.patch(img).flatten(2).transpose(1, 2) + s.pos
        for blk in s.blocks:
            x = blk(x)
        return s.ln(x)


class Projector(nn.Module):
    def __init__(s):
        super().__init__()
        s.fc1, s.fc2 = nn.Linear(4 * VW, D), nn.Linear(D, D)

    def forward(s, f):                                # (n, NP, VW) -> (n, NP / 4, D): 2 x 2 patch merging
        n, g = f.shape[0], int(NP ** 0.5)
        f = f.view(n, g // 2, 2, g // 2, 2, VW).permute(0, 1, 3, 2, 4, 5).reshape(n, TPI, 4 * VW)
        return s.fc2(F.gelu(s.fc1(f)))


def rope(t, hd):
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=dev).float() / hd))
    ang = torch.arange(t, device=dev).float()[:, None] * inv
    return ang.cos(), ang.sin()


def rot(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


class DecBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.qkv, s.o = nn.RMSNorm(D), nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D, bias=False)
        s.n2, s.gu, s.down = nn.RMSNorm(D), nn.Linear(D, 2 * FF, bias=False), nn.Linear(FF, D, bias=False)

    def forward(s, x, cos, sin):
        b, t, _ = x.shape
        q, k, v = s.qkv(s.n1(x)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k = rot(q, cos, sin).to(v.dtype), rot(k, cos, sin).to(v.dtype)
        x = x + s.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, D))
        g, u = s.gu(s.n2(x)).chunk(2, -1)
        return x + s.down(F.silu(g) * u)


class Decoder(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.blocks, s.norm = nn.Embedding(V, D), nn.ModuleList(DecBlock() for _ in range(L)), nn.RMSNorm(D)
        nn.init.normal_(s.emb.weight, std=0.02)

    def forward(s, x):
        cos, sin = rope(x.shape[1], D // H)
        for blk in s.blocks:
            x = blk(x, cos, sin)
        return s.norm(x) @ s.emb.weight.T


vit = ViT().to(dev).to(torch.bfloat16).eval().requires_grad_(False)
proj, lm = Projector().to(dev), Decoder().to(dev)
params = list(proj.parameters()) + list(lm.parameters())
opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.0)


def micro_batch():
    seqs, n_img = [], []
    for _ in range(MB):
        k = rng.choices(range(5), weights=(3, 3, 2, 1, 1))[0]
        text = torch.randint(2, V, (rng.randint(*TXT),)).tolist()
        for _ in range(k):                            # image placeholders at random places in the text
            at = rng.randint(0, len(text))
            text[at:at] = [IMG_TOK] * TPI
        seqs.append(text); n_img.append(k)
    t = -(-max(len(x) for x in seqs) // 8) * 8
    ids = torch.full((MB, t + 1), PAD, dtype=torch.long)
    for i, x in enumerate(seqs):
        ids[i, :len(x)] = torch.tensor(x)
    ids = ids.to(dev)
    images = torch.randn(sum(n_img), 3, IMG, IMG, device=dev)
    labels = ids[:, 1:].masked_fill((ids[:, 1:] == IMG_TOK) | (ids[:, 1:] == PAD), -100)
    return ids[:, :-1], labels, images


def forward(ids, labels, images):
    with torch.autocast(device_type=kind, dtype=torch.bfloat16):
        x = lm.emb(ids)
        if images.shape[0]:
            with torch.no_grad():
                feats = vit(images.to(torch.bfloat16))
            tok = proj(feats).to(x.dtype)             # (n_images, TPI, D)
            x = x.masked_scatter((ids == IMG_TOK)[..., None], tok)
        logits = lm(x)
        return F.cross_entropy(logits.float().view(-1, V), labels.reshape(-1), ignore_index=-100)


for step in range(steps):
    opt.zero_grad(set_to_none=True)
    for _ in range(ACC):
        ids, labels, images = micro_batch()
        loss = forward(ids, labels, images) / ACC
        loss.backward()
        del ids, labels, images
    nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    if step + 1 in eval_at:
        lm.eval(); proj.eval()
        with torch.no_grad():
            ids, labels, images = micro_batch()
            ev = forward(ids, labels, images).item()
        lm.train(); proj.train()
        print(f"step {step + 1}: loss {loss.item() * ACC:.3f}, eval {ev:.3f} (seq {ids.shape[1]}, {images.shape[0]} images)")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
