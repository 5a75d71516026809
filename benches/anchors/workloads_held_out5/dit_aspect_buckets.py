"""Diffusion transformer (DiT-B/2 style, adaLN-zero) trained on 4-channel latents with aspect-ratio bucketing under
bf16 autocast, AdamW (lr 1e-4, weight decay 0, gradient clipping at 1.0), 100 optimizer steps, and an EMA copy of
the weights (decay 0.999) updated after every step with torch._foreach_lerp_. Model: patch 2 (Conv2d 4 -> 768), a 2-D
sin-cos position embedding built on the device for each latent shape, 12 blocks of d 768 (12 heads, GELU-tanh MLP
of 3,072, LayerNorms without affine), each block modulated by shift/scale/gate from a zero-initialised Linear of the
conditioning vector (sinusoidal timestep embedding through a 256 -> 768 -> 768 MLP, plus a 1,001-entry class
embedding whose last entry is the null class; labels dropped to null with probability 0.1), a final adaLN layer and a
zero-initialised Linear to 2 x 2 x 4 per token. Objective: v-prediction MSE in float32 under a cosine schedule (t
uniform in [0, 1], alpha = cos(pi t / 2), sigma = sin(pi t / 2)) on random latents. Buckets: base (h, w) latents 32 x
32, 28 x 36, 36 x 28, 24 x 40, 40 x 24, 20 x 48 and 48 x 20 (240..256 tokens, 20 or 21 latents a micro-batch, about
5,120 tokens), and from step 50 on, with probability 0.35 per step, a high-resolution stage with 48 x 48, 40 x 56,
56 x 40, 36 x 64 and 64 x 36 (560..576 tokens, 8 or 9 latents a micro-batch); every micro-batch draws its own bucket
from the step's stage. High-resolution steps and a quarter of the base steps accumulate 2 micro-batches (gradients
kept across micro-batches of different shapes). After steps 40, 80 and 100 a no-grad classifier-free-guidance
sample with the EMA model: 8 latents at a base bucket and 4 at a high-resolution one, 10 DDIM steps each (v
-> x0 / eps), the conditional and null-class halves joined by torch.cat into one doubled batch, guidance scale 4.
WL_DEVICE=cpu: d 64, 4 heads, 2 blocks, 10 classes, base buckets 8 x 8, 6 x 10, 10 x 6, 4 x 16 (64 tokens a
micro-batch), high-resolution 12 x 12, 8 x 18, 18 x 8 from step 2, 6 steps, samples of 2 and 1 latents with 3 DDIM
steps after steps 3 and 6."""
import copy, math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(103); rng = random.Random(103)
if small:
    D, H, L, NCLS, TOK, steps, hi_from, sample_at, N_SAMPLE, DDIM = 64, 4, 2, 10, 64, 6, 2, (3, 6), 2, 3
    BASE = [(8, 8), (6, 10), (10, 6), (4, 16)]
    HIGH = [(12, 12), (8, 18), (18, 8)]
else:
    D, H, L, NCLS, TOK, steps, hi_from, sample_at, N_SAMPLE, DDIM = 768, 12, 12, 1000, 5120, 100, 50, (40, 80, 100), 8, 10
    BASE = [(32, 32), (28, 36), (36, 28), (24, 40), (40, 24), (20, 48), (48, 20)]
    HIGH = [(48, 48), (40, 56), (56, 40), (36, 64), (64, 36)]
kind, AMP, C, P, FREQ, EMA_DECAY, CFG = dev.split(":")[0], torch.bfloat16, 4, 2, 256, 0.999, 4.0


def sincos_2d(gh, gw):                                # (gh * gw, D) float32, half the channels per axis
    q = D // 4
    omega = 1.0 / 10000 ** (torch.arange(q, device=dev).float() / q)
    ys, xs = torch.meshgrid(torch.arange(gh, device=dev).float(), torch.arange(gw, device=dev).float(), indexing="ij")
    ay, ax = ys.reshape(-1, 1) * omega, xs.reshape(-1, 1) * omega
    return torch.cat([ay.sin(), ay.cos(), ax.sin(), ax.cos()], 1)


def t_embed(t):                                       # t in [0, 1] -> (B, FREQ) sinusoidal features of 1000 t
    half = FREQ // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=dev).float() / half)
    ang = 1000.0 * t[:, None].float() * freqs
    return torch.cat([ang.cos(), ang.sin()], 1)


def modulate(x, shift, scale):
    return x * (1 + scale) + shift


class DiTBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.n2 = nn.LayerNorm(D, elementwise_affine=False, eps=1e-6), nn.LayerNorm(D, elementwise_affine=False, eps=1e-6)
        s.qkv, s.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.fc1, s.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        s.ada = nn.Linear(D, 6 * D)
        nn.init.zeros_(s.ada.weight); nn.init.zeros_(s.ada.bias)

    def forward(s, x, c):                             # x (B, N, D), c (B, D)
        sh1, sc1, g1, sh2, sc2, g2 = s.ada(F.silu(c))[:, None].chunk(6, -1)
        b, n, _ = x.shape
        q, k, v = s.qkv(modulate(s.n1(x), sh1, sc1)).view(b, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, D)
        x = x + g1 * s.proj(a)
        return x + g2 * s.fc2(F.gelu(s.fc1(modulate(s.n2(x), sh2, sc2)), approximate="tanh"))


class DiT(nn.Module):
    def __init__(s):
        super().__init__()
        s.patch = nn.Conv2d(C, D, P, P)
        s.t_mlp = nn.Sequential(nn.Linear(FREQ, D), nn.SiLU(), nn.Linear(D, D))
        s.y_emb = nn.Embedding(NCLS + 1, D)
        s.blocks = nn.ModuleList(DiTBlock() for _ in range(L))
        s.n_out = nn.LayerNorm(D, elementwise_affine=False, eps=1e-6)
        s.ada_out, s.out = nn.Linear(D, 2 * D), nn.Linear(D, P * P * C)
        for m in (s.ada_out, s.out):
            nn.init.zeros_(m.weight); nn.init.zeros_(m.bias)

    def forward(s, x, t, y):                          # x (B, 4, h, w) -> v prediction of the same shape
        b, _, h, w = x.shape
        gh, gw = h // P, w // P
        x = s.patch(x).flatten(2).transpose(1, 2) + sincos_2d(gh, gw)
        c = s.t_mlp(t_embed(t)) + s.y_emb(y)
        for blk in s.blocks:
            x = blk(x, c)
        shift, scale = s.ada_out(F.silu(c))[:, None].chunk(2, -1)
        x = s.out(modulate(s.n_out(x), shift, scale))                 # (B, N, P * P * C)
        x = x.view(b, gh, gw, P, P, C).permute(0, 5, 1, 3, 2, 4)
        return x.reshape(b, C, h, w)


def schedule(t):
    return torch.cos(t * math.pi / 2), torch.sin(t * math.pi / 2)


model = DiT().to(dev)
ema = copy.deepcopy(model).requires_grad_(False).eval()
params, ema_params = list(model.parameters()), list(ema.parameters())
opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)


def micro_step(bucket, n_acc):
    h, w = bucket
    n = TOK // (h * w // (P * P))
    x0 = torch.randn(n, C, h, w, device=dev)
    y = torch.randint(0, NCLS, (n,), device=dev)
    y = torch.where(torch.rand(n, device=dev) < 0.1, torch.full_like(y, NCLS), y)
    t = torch.rand(n, device=dev)
    noise = torch.randn_like(x0)
    a, s_ = (z[:, None, None, None] for z in schedule(t))
    xt, v = a * x0 + s_ * noise, a * noise - s_ * x0
    with torch.autocast(device_type=kind, dtype=AMP):
        pred = model(xt, t, y)
    loss = F.mse_loss(pred.float(), v) / n_acc
    loss.backward()
    return loss.item() * n_acc, n


@torch.no_grad()
def sample(bucket, n):                                # DDIM with classifier-free guidance, EMA weights
    h, w = bucket
    x = torch.randn(n, C, h, w, device=dev)
    y = torch.randint(0, NCLS, (n,), device=dev)
    y_in = torch.cat([y, torch.full_like(y, NCLS)])
    ts = torch.linspace(1.0, 0.0, DDIM + 1, device=dev)
    with torch.autocast(device_type=kind, dtype=AMP):
        for i in range(DDIM):
            t = ts[i].expand(2 * n)
            v_c, v_u = ema(torch.cat([x, x]), t, y_in).float().chunk(2)
            v = v_u + CFG * (v_c - v_u)
            a, s_ = schedule(ts[i])
            x0, eps = a * x - s_ * v, s_ * x + a * v
            a2, s2 = schedule(ts[i + 1])
            x = a2 * x0 + s2 * eps
    return x


for step in range(steps):
    stage = HIGH if step >= hi_from and rng.random() < 0.35 else BASE
    n_acc = 2 if stage is HIGH or rng.random() < 0.25 else 1
    opt.zero_grad(set_to_none=True)
    shapes, tot = [], 0.0
    for _ in range(n_acc):
        bucket = rng.choice(stage)
        l, n = micro_step(bucket, n_acc)
        tot += l / n_acc; shapes.append(f"{n}x{bucket[0]}x{bucket[1]}")
    nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    with torch.no_grad():
        torch._foreach_lerp_(ema_params, params, 1.0 - EMA_DECAY)
    if step + 1 in sample_at:
        xb = sample(rng.choice(BASE), N_SAMPLE)
        xh = sample(rng.choice(HIGH), max(1, N_SAMPLE // 2))
        print(f"step {step + 1}: loss {tot:.4f} ({' + '.join(shapes)}), samples {tuple(xb.shape)} std "
              f"{xb.std().item():.3f}, {tuple(xh.shape)} std {xh.std().item():.3f}")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
