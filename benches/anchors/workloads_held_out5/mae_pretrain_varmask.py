"""Masked-autoencoder pretraining of a ViT under bf16 autocast, AdamW (betas 0.9/0.95, weight decay 0.05 on matrices,
lr 1.5e-4 with a 10-step linear warmup then cosine decay to 1e-6, gradient clipping at 1.0), 90 steps of 64 images.
Encoder: ViT-B/16 (patch embedding by a stride-16 conv, 12 pre-norm blocks of width 768, 12 heads, GELU MLP of
3,072, scaled_dot_product_attention, a class token, fixed 2-D sin-cos position embeddings for both grid sizes).
Decoder: a linear map to width 512, 4 blocks of width 512 (16 heads, MLP 2,048), a linear head to the 768 pixel
values of a patch. Each step draws the image size (224 or 256: 196 or 256 patches) and a mask ratio from U[0.5,
0.9], so the number of visible tokens the encoder sees changes every step (19..128 per image plus the class token).
Images are random smooth fields (bilinear upsampling of 1/8-resolution noise plus fine noise). Per step: a
per-sample shuffle by argsort of uniform noise, the visible patch tokens taken with torch.gather, the binary mask
unshuffled by gather with the inverse permutation (the argsort of the shuffle); in the decoder a learned mask token
appended for the hidden patches (torch.cat) and the full sequence unshuffled with torch.gather; loss: float32 MSE
against per-patch normalised pixels (mean/variance over each patch's 768 values), averaged over masked patches
only. Every 30 steps a no-grad linear-probe-style pass: a fixed set of 256 images at 224 (kept on the device since
the start) through the encoder without masking in batches of 128, mean-pooled final-norm features, and a ridge
regression onto 10 random classes solved in float32 (torch.linalg.solve on the 768 x 768 normal equations).
WL_DEVICE=cpu: images 64 or 80, width 64 (4 heads, MLP 256), 2 encoder blocks, 1 decoder block of width 32, batch 4,
6 steps, a probe of 16 images every 3 steps."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(113); rng = random.Random(113)
P = 16
if small:
    SIZES, D, H, DEPTH, DD, DH, DDEPTH, B, steps, every, NPROBE, PB = (64, 80), 64, 4, 2, 32, 4, 1, 4, 6, 3, 16, 8
else:
    SIZES, D, H, DEPTH, DD, DH, DDEPTH, B, steps, every, NPROBE, PB = (224, 256), 768, 12, 12, 512, 16, 4, 64, 90, 30, 256, 128
kind, AMP = dev.split(":")[0], torch.bfloat16
warm, LR, LR_MIN = 10, 1.5e-4, 1e-6


def sincos_2d(g, d):                                 # (1 + g*g, d) fixed position embedding, zeros for the class token
    half = d // 2
    omega = 1.0 / 10000 ** (torch.arange(half // 2, dtype=torch.float64) / (half // 2))
    ys, xs = torch.meshgrid(torch.arange(g, dtype=torch.float64), torch.arange(g, dtype=torch.float64), indexing="ij")
    parts = [torch.cat([(c.reshape(-1, 1) * omega).sin(), (c.reshape(-1, 1) * omega).cos()], 1) for c in (ys, xs)]
    return torch.cat([torch.zeros(1, d, dtype=torch.float64), torch.cat(parts, 1)]).float()[None]


class Block(nn.Module):
    def __init__(s, d, h):
        super().__init__()
        s.h, s.ln1, s.qkv, s.proj = h, nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.ln2, s.fc1, s.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(s, x):
        b, t, d = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(b, t, 3, s.h, d // s.h).permute(2, 0, 3, 1, 4)
        x = x + s.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class MAE(nn.Module):
    def __init__(s):
        super().__init__()
        s.patch = nn.Conv2d(3, D, P, P)
        s.cls, s.mask_token = nn.Parameter(torch.randn(1, 1, D) * 0.02), nn.Parameter(torch.randn(1, 1, DD) * 0.02)
        s.blocks, s.norm = nn.ModuleList(Block(D, H) for _ in range(DEPTH)), nn.LayerNorm(D)
        s.dec_embed = nn.Linear(D, DD)
        s.dec_blocks, s.dec_norm = nn.ModuleList(Block(DD, DH) for _ in range(DDEPTH)), nn.LayerNorm(DD)
        s.pred = nn.Linear(DD, P * P * 3)
        for size in SIZES:                           # fixed position embeddings per grid size
            s.register_buffer(f"pos_e{size}", sincos_2d(size // P, D), persistent=False)
            s.register_buffer(f"pos_d{size}", sincos_2d(size // P, DD), persistent=False)

    def encode(s, imgs, n_keep=None):
        size = imgs.shape[-1]
        pos = getattr(s, f"pos_e{size}")
        x = s.patch(imgs).flatten(2).transpose(1, 2) + pos[:, 1:]
        b, n, _ = x.shape
        mask = restore = None
        if n_keep is not None:                       # per-sample random shuffle, keep the first n_keep
            shuffle = torch.rand(b, n, device=x.device).argsort(1)
            restore = shuffle.argsort(1)
            x = torch.gather(x, 1, shuffle[:, :n_keep, None].expand(-1, -1, D))
            mask = torch.ones(b, n, device=x.device)
            mask[:, :n_keep] = 0
            mask = torch.gather(mask, 1, restore)    # 1 = hidden, in the original patch order
        x = torch.cat([(s.cls + pos[:, :1]).expand(b, -1, -1).to(x.dtype), x], 1)
        for blk in s.blocks:
            x = blk(x)
        return s.norm(x), mask, restore

    def decode(s, x, restore):
        y = s.dec_embed(x)
        b, n = restore.shape
        hidden = s.mask_token.to(y.dtype).expand(b, n + 1 - y.shape[1], -1)
        z = torch.gather(torch.cat([y[:, 1:], hidden], 1), 1, restore[..., None].expand(-1, -1, DD))
        y = torch.cat([y[:, :1], z], 1) + getattr(s, f"pos_d{int(math.isqrt(n)) * P}")
        for blk in s.dec_blocks:
            y = blk(y)
        return s.pred(s.dec_norm(y))[:, 1:]


def patchify(imgs):                                  # (B, 3, S, S) -> (B, N, P*P*3)
    b, c, h, w = imgs.shape
    x = imgs.view(b, c, h // P, P, w // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, (h // P) * (w // P), P * P * c)


def images(n, size, gen=None):
    low = torch.randn(n, 3, size // 8, size // 8, device=dev, generator=gen)
    x = F.interpolate(low, size=(size, size), mode="bilinear", align_corners=False)
    return x + 0.1 * torch.randn(n, 3, size, size, device=dev, generator=gen)


model = MAE().to(dev)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and n not in ("cls", "mask_token")]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 or n in ("cls", "mask_token")]
opt = torch.optim.AdamW([dict(params=decay, weight_decay=0.05), dict(params=no_decay, weight_decay=0.0)],
                        lr=LR, betas=(0.9, 0.95))
probe_gen = torch.Generator(device=dev).manual_seed(7)
probe_imgs = images(NPROBE, SIZES[0], probe_gen)      # fixed probe set, long-lived
probe_y = F.one_hot(torch.randint(0, 10, (NPROBE,), device=dev, generator=probe_gen), 10).float()


def lr_at(i):
    if i < warm:
        return LR * (i + 1) / warm
    return LR_MIN + 0.5 * (LR - LR_MIN) * (1 + math.cos(math.pi * (i - warm) / max(1, steps - warm)))


def probe():
    model.eval()
    with torch.no_grad():
        with torch.autocast(device_type=kind, dtype=AMP):
            feats = torch.cat([model.encode(x)[0][:, 1:].float().mean(1) for x in probe_imgs.split(PB)])
        feats = (feats - feats.mean(0)) / (feats.std(0) + 1e-6)
        gram = feats.T @ feats + 1e-1 * NPROBE * torch.eye(D, device=dev)
        w = torch.linalg.solve(gram, feats.T @ probe_y)
        acc = ((feats @ w).argmax(1) == probe_y.argmax(1)).float().mean().item()
    model.train()
    return acc


for step in range(steps):
    for g in opt.param_groups:
        g["lr"] = lr_at(step)
    size, ratio = rng.choice(SIZES), rng.uniform(0.5, 0.9)
    n = (size // P) ** 2
    n_keep = max(1, int(n * (1 - ratio)))
    imgs = images(B, size)
    with torch.autocast(device_type=kind, dtype=AMP):
        latent, mask, restore = model.encode(imgs, n_keep)
        pred = model.decode(latent, restore)
    target = patchify(imgs)
    target = (target - target.mean(-1, keepdim=True)) / (target.var(-1, keepdim=True) + 1e-6).sqrt()
    loss = ((pred.float() - target) ** 2).mean(-1)
    loss = (loss * mask).sum() / mask.sum()
    del latent, pred, target
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if (step + 1) % every == 0:
        print(f"step {step + 1}: size {size}, {n_keep}/{n} visible, loss {loss.item():.4f}, probe acc {probe():.3f}")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
