"""Video classification with a divided space-time attention transformer (TimeSformer-style) trained on a multigrid
schedule (Wu et al. 2020): the clip length, resolution and batch change together so that the tokens per step stay near
12,544, under bf16 autocast, AdamW (lr 5e-4, weight decay 0.05, 10 warmup steps then cosine, gradient clipping at
1.0), 180 steps.
Model: tubelet embedding by Conv3d(3 -> 384, kernel and stride (2, 16, 16)); a learned 14 x 14 spatial position table
resized by bicubic F.interpolate to each step's grid and a learned 8-entry temporal table resized linearly to its
length; 12 blocks of d 384 (6 heads), each a temporal attention over the T/2 time steps of every spatial location
(tokens permuted to (batch x locations, time, d) and back) through a zero-initialised temporal linear, then a spatial
attention over the locations of every time step, then a GELU MLP of 1,536; LayerNorm, mean pooling and a 400-way head.
31M parameters.
Data, made on the device each step: random uint8 'decoded' videos of twice the clip length at 1.15 x the crop size
(batch, 2T, 1.15 S, 1.15 S, 3), every second frame taken by index_select, one random crop of 0.6..1 of the side per
batch, permuted to (batch, 3, T, h, w), scaled to float, resized by trilinear F.interpolate to (T, S, S), normalised,
flipped on half of the steps; mixup with lambda ~ Beta(0.8, 0.8) against the batch reversed, label smoothing 0.1,
float32 cross-entropy on the soft targets.
Multigrid: a long cycle of 4 stages of 40 steps, (T, S) = (4, 112), (8, 160), (8, 224), (16, 224) with base batches
128, 31, 16, 8 (8 x 16 x 224^2 / (T S^2)), then 20 steps at the base shape (8 clips of 16 x 224); within each stage a
short cycle over the step index mod 3 of spatial sizes S / 2, S / sqrt 2 and S (rounded to multiples of 16, at least
64) with the batch scaled by (S / size)^2, 10 distinct (batch, T, size) in all: from 392 clips of 4 x 64 x 64 (2 x 16
tokens each) to 8 clips of 16 x 224 x 224 (8 x 196 tokens each).
Eval (no grad, eval mode) after steps 80 and 180: 8 videos of 64 frames at 256 x 340, each as 3 temporal x 3 spatial
views of 16 x 224 (72 clips) run in chunks of 24, the 9 views' softmax averaged.
Hand estimate of the peak at full size: saved activations about 60 bytes x 384 a token per block (float32 residual and
the permuted copies, bf16 LayerNorm outputs, qkv, attention outputs, MLP) x 12,544 tokens x 12 blocks = 3.5 GB, the
input pipeline 0.2 GB, parameters, gradients and AdamW 0.5 GB: about 4.3 GB; an eval chunk of 24 clips (37,632 tokens)
about 1 GB. GPU time about 10 s.
What it adds: one model stepping through clip shapes whose batch, time and space sizes all change at once (3 short
shapes per stage, 10 distinct ones in all) while the token count holds, so the same activation volume comes in
differently shaped blocks; per-step permute-and-copy between the temporal and spatial layouts in every block; 3-D
convolution, trilinear and bicubic resizing of uint8-sourced clips on the device; and a multi-view eval of a larger
batch of long clips.
WL_DEVICE=cpu: d 32, 2 heads, 2 blocks, patches of 8, stages (2, 32), (4, 32), (4, 48) of 3 steps then 2 at the base
(1 clip of 4 x 48), short-cycle sizes at least 16, 10 classes, eval after steps 6 and 11 on 2 videos of 16 frames at
56 x 72 (chunks of 6 clips)."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(122); rng = random.Random(122)
if small:
    D, H, NB, P, NCLS, STAGES, BASE, STAGE_STEPS, FINAL, MINS, EV_AT, EV_VID, EV_SHAPE, EV_CHUNK = \
        32, 2, 2, 8, 10, ((2, 32), (4, 32), (4, 48)), (1, 4, 48), 3, 2, 16, (6, 11), 2, (16, 56, 72), 6
else:
    D, H, NB, P, NCLS, STAGES, BASE, STAGE_STEPS, FINAL, MINS, EV_AT, EV_VID, EV_SHAPE, EV_CHUNK = \
        384, 6, 12, 16, 400, ((4, 112), (8, 160), (8, 224), (16, 224)), (8, 16, 224), 40, 20, 64, (80, 180), 8, \
        (64, 256, 340), 24
PT, GRID0, TPOS0 = 2, BASE[2] // P, BASE[1] // 2
kind, AMP = dev.split(":")[0], torch.bfloat16
MEAN = torch.tensor([0.45, 0.45, 0.45], device=dev).view(1, 3, 1, 1, 1)
STD = torch.tensor([0.225, 0.225, 0.225], device=dev).view(1, 3, 1, 1, 1)


class Attn(nn.Module):
    def __init__(s):
        super().__init__()
        s.qkv, s.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(s, x):                               # (batch, length, D)
        b, n, _ = x.shape
        q, k, v = s.qkv(x).view(b, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
        return s.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, D))


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln_t, s.ln_s, s.ln_m = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
        s.attn_t, s.attn_s = Attn(), Attn()
        s.temporal_fc = nn.Linear(D, D)
        nn.init.zeros_(s.temporal_fc.weight); nn.init.zeros_(s.temporal_fc.bias)
        s.fc1, s.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x):                               # (B, T, N, D)
        b, t, n, d = x.shape
        xt = x.permute(0, 2, 1, 3).reshape(b * n, t, d)
        xt = xt + s.temporal_fc(s.attn_t(s.ln_t(xt)))
        xs = xt.view(b, n, t, d).permute(0, 2, 1, 3).reshape(b * t, n, d)
        xs = xs + s.attn_s(s.ln_s(xs))
        xs = xs + s.fc2(F.gelu(s.fc1(s.ln_m(xs))))
        return xs.view(b, t, n, d)


class VideoTransformer(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed = nn.Conv3d(3, D, (PT, P, P), (PT, P, P))
        s.pos_s = nn.Parameter(torch.randn(1, D, GRID0, GRID0) * 0.02)
        s.pos_t = nn.Parameter(torch.randn(1, D, TPOS0) * 0.02)
        s.blocks = nn.ModuleList(Block() for _ in range(NB))
        s.norm, s.head = nn.LayerNorm(D), nn.Linear(D, NCLS)

    def forward(s, clip):                            # (B, 3, T, S, S) float
        x = s.embed(clip)                            # (B, D, T/2, S/P, S/P)
        b, _, t, gh, gw = x.shape
        ps = F.interpolate(s.pos_s, size=(gh, gw), mode="bicubic", align_corners=False).flatten(2)     # (1, D, N)
        pt = F.interpolate(s.pos_t, size=t, mode="linear", align_corners=False)                      # (1, D, T)
        x = (x.flatten(3) + ps[:, :, None] + pt[..., None]).permute(0, 2, 3, 1)                        # (B, T, N, D)
        for blk in s.blocks:
            x = blk(x)
        return s.head(s.norm(x.mean((1, 2))))


def make_clips(b, t, size, src_t, src_h, src_w, crop_frac, flip, t0=0, y0=None, x0=None):
    """Random uint8 videos (b, src_t, src_h, src_w, 3) -> normalised float clips (b, 3, t, size, size)."""
    raw = torch.randint(0, 256, (b, src_t, src_h, src_w, 3), dtype=torch.uint8, device=dev)
    stride = max(1, (src_t - t0) // t)
    frames = raw.index_select(1, torch.arange(t0, t0 + stride * t, stride, device=dev))
    ch = int(min(src_h, src_w) * crop_frac)
    y0 = rng.randint(0, src_h - ch) if y0 is None else y0
    x0 = rng.randint(0, src_w - ch) if x0 is None else x0
    x = frames[:, :, y0:y0 + ch, x0:x0 + ch].permute(0, 4, 1, 2, 3).float().div_(255)
    x = F.interpolate(x, size=(t, size, size), mode="trilinear", align_corners=False)
    x = (x - MEAN) / STD
    return x.flip(-1) if flip else x


def schedule():                                      # [(batch, T, S)] per step: long cycle, short cycle, final
    out = []
    for t, s in STAGES:
        base_b = BASE[0] * BASE[1] * BASE[2] ** 2 / (t * s * s)
        shapes = []
        for f in (0.5, 1 / math.sqrt(2), 1.0):
            sz = max(MINS, int(round(s * f / P)) * P)
            shapes.append((max(1, round(base_b * (s / sz) ** 2)), t, sz))
        out += [shapes[i % 3] for i in range(STAGE_STEPS)]
    return out + [BASE] * FINAL


@torch.no_grad()
def evaluate():
    model.eval()
    ev_t, ev_h, ev_w = EV_SHAPE
    t, size = BASE[1], BASE[2]
    correct = 0
    labels = torch.randint(0, NCLS, (EV_VID,), device=dev)
    videos = torch.randint(0, 256, (EV_VID, ev_t, ev_h, ev_w, 3), dtype=torch.uint8, device=dev)
    views = []                                       # (video, t0, y0, x0): 3 temporal x 3 spatial
    for v in range(EV_VID):
        for t0 in (0, (ev_t - 2 * t) // 2, ev_t - 2 * t):
            for x0 in (0, (ev_w - ev_h) // 2, ev_w - ev_h):
                views.append((v, t0, x0))
    probs = torch.zeros(EV_VID, NCLS, device=dev)
    for a in range(0, len(views), EV_CHUNK):
        chunk = views[a:a + EV_CHUNK]
        clips = []
        for v, t0, x0 in chunk:
            fr = videos[v, t0:t0 + 2 * t:2, :, x0:x0 + ev_h].permute(3, 0, 1, 2)[None].float().div_(255)
            clips.append(F.interpolate(fr, size=(t, size, size), mode="trilinear", align_corners=False))
        x = (torch.cat(clips) - MEAN) / STD
        del clips
        with torch.autocast(device_type=kind, dtype=AMP):
            p = model(x).float().softmax(-1)
        probs.index_add_(0, torch.tensor([c[0] for c in chunk], device=dev), p)
    model.train()
    return (probs.argmax(1) == labels).float().mean().item()


model = VideoTransformer().to(dev)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "pos" not in n]
no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "pos" not in n)]
opt = torch.optim.AdamW([dict(params=decay, weight_decay=0.05), dict(params=no_decay, weight_decay=0.0)], lr=5e-4)
plan = schedule()
total = len(plan)
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda i: min(1.0, (i + 1) / 10) * 0.5 * (1 + math.cos(math.pi * min(i, total) / total)))
losses, evals, shapes = [], [], set()
for step, (b, t, size) in enumerate(plan):
    shapes.add((b, t, size))
    src = int(round(size * 1.15))
    x = make_clips(b, t, size, 2 * t, src, src, rng.uniform(0.6, 1.0), rng.random() < 0.5)
    y = torch.randint(0, NCLS, (b,), device=dev)
    lam = rng.betavariate(0.8, 0.8)
    x = lam * x + (1 - lam) * x.flip(0)
    soft = F.one_hot(y, NCLS).float() * 0.9 + 0.1 / NCLS
    soft = lam * soft + (1 - lam) * soft.flip(0)
    with torch.autocast(device_type=kind, dtype=AMP):
        logits = model(x)
    loss = F.cross_entropy(logits.float(), soft)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    losses.append(loss.item())
    del x, logits, loss
    if step + 1 in EV_AT:
        evals.append(evaluate())
print(f"{total} steps over {len(shapes)} clip shapes (batch, frames, size: {' '.join(map(str, sorted(shapes)))}): "
      f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, multi-view eval accuracy " + " ".join(f"{e:.3f}" for e in evals))
if dev.startswith("cuda"):
    torch.cuda.synchronize()
