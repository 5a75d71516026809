"""A small diffusion UNet in plain PyTorch (base width 64, levels 64/128/256 with two GroupNorm+SiLU residual
blocks each, a sinusoidal timestep embedding fed to every block, self-attention at the lowest level, skip
connections into the up path) trained as an epsilon-prediction denoiser: random timesteps of a cosine noise
schedule, resolutions cycling 64, 96, 128 with batch 16..32, AdamW, an EMA copy of the weights updated with
torch._foreach_lerp_ after every step, 12 steps, then one no-grad sampling step of the EMA model.
`--device cpu` (or DEVICE=cpu) and SMOKE=1 (batch 2 at 16/24/32, 3 steps) for a quick CPU check."""
import copy, math, os, random, sys, torch, torch.nn as nn, torch.nn.functional as F
dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else os.environ.get("DEVICE", "cuda")
smoke = os.environ.get("SMOKE") == "1"
torch.manual_seed(0); random.seed(0)
res, (blo, bhi), steps = ([16, 24, 32], (2, 2), 3) if smoke else ([64, 96, 128], (16, 32), 12)

class Res(nn.Module):
    def __init__(s, cin, cout, tdim):
        super().__init__()
        s.n1, s.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
        s.t, s.n2, s.c2 = nn.Linear(tdim, cout), nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
        s.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()
    def forward(s, x, t):
        h = s.c1(F.silu(s.n1(x))) + s.t(t)[:, :, None, None]
        return s.skip(x) + s.c2(F.dropout(F.silu(s.n2(h)), 0.1, s.training))

class Attn(nn.Module):
    def __init__(s, c):
        super().__init__(); s.n, s.qkv, s.o = nn.GroupNorm(32, c), nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)
    def forward(s, x):
        b, c, h, w = x.shape
        q, k, v = s.qkv(s.n(x)).reshape(b, 3, 4, c // 4, h * w).transpose(-1, -2).unbind(1)
        return x + s.o(F.scaled_dot_product_attention(q, k, v).transpose(-1, -2).reshape(b, c, h, w))

class UNet(nn.Module):
    def __init__(s, ch=(64, 128, 256), td=256):
        super().__init__()
        s.temb = nn.Sequential(nn.Linear(64, td), nn.SiLU(), nn.Linear(td, td))
        s.inp, s.down, s.up, s.pool, s.ups = nn.Conv2d(3, ch[0], 3, padding=1), nn.ModuleList(), nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        c = ch[0]
        for i, co in enumerate(ch):
            s.down.append(nn.ModuleList([Res(c, co, td), Res(co, co, td)])); c = co
            if i < len(ch) - 1: s.pool.append(nn.Conv2d(c, c, 3, stride=2, padding=1))
        s.mid1, s.attn, s.mid2 = Res(c, c, td), Attn(c), Res(c, c, td)
        for i, co in reversed(list(enumerate(ch))):
            s.up.append(nn.ModuleList([Res(c + co, co, td), Res(co + co, co, td)])); c = co
            if i > 0: s.ups.append(nn.Conv2d(c, c, 3, padding=1))
        s.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))
    def forward(s, x, t):
        f = torch.exp(-math.log(10000) * torch.arange(32, device=x.device) / 32)
        t = s.temb(torch.cat([torch.sin(t[:, None] * f), torch.cos(t[:, None] * f)], 1))
        h, skips = s.inp(x), []
        for i, blocks in enumerate(s.down):
            for b in blocks: h = b(h, t); skips.append(h)
            if i < len(s.pool): h = s.pool[i](h)
        h = s.mid2(s.attn(s.mid1(h, t)), t)
        for i, blocks in enumerate(s.up):
            for b in blocks: h = b(torch.cat([h, skips.pop()], 1), t)
            if i < len(s.ups): h = s.ups[i](F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return s.out(h)

model = UNet().to(dev)
ema = copy.deepcopy(model).requires_grad_(False)
opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.01)
alpha_bar = lambda t: torch.cos((t / 1000 + 0.008) / 1.008 * math.pi / 2) ** 2
for step in range(steps):
    r, b = res[step % len(res)], random.randint(blo, bhi)
    x0 = torch.randn(b, 3, r, r, device=dev).clamp_(-1, 1)
    t = torch.randint(0, 1000, (b,), device=dev).float()
    a = alpha_bar(t)[:, None, None, None]
    noise = torch.randn_like(x0)
    loss = F.mse_loss(model(a.sqrt() * x0 + (1 - a).sqrt() * noise, t), noise)
    opt.zero_grad(set_to_none=True); loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
    with torch.no_grad():
        torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1 - 0.999)
ema.eval()
with torch.no_grad():
    x = torch.randn(bhi, 3, res[-1], res[-1], device=dev)
    x = x - 0.1 * ema(x, torch.full((bhi,), 999.0, device=dev))
if dev.startswith("cuda"): torch.cuda.synchronize()
