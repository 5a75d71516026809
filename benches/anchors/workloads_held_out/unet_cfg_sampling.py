"""Sampling from a small text-conditioned UNet (channels 128-256-512, a residual block per level, self- and
cross-attention at the two lowest resolutions) with classifier-free guidance (conditional and unconditional halves in
one batch), 25 denoising steps for each of 6 requests: batches of 1, 2 or 4 images at 64x64 or 96x96 latents,
fp16, inference mode. Written in session 21 after the allocator's rules were in place (held out from them)."""
import os
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(24)
dev = "cuda" if torch.cuda.is_available() else "cpu"
STEPS = int(os.environ.get("STEPS", 25))
C, CTX, TOK = (128, 256, 512), 768, 77
dtype = torch.float16 if dev == "cuda" else torch.float32
if dev == "cpu":
    C, CTX, TOK = (8, 16, 32), 16, 5


class Res(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(8, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.n2, self.c2 = nn.GroupNorm(8, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.t = nn.Linear(CTX, cout)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x))) + self.t(temb)[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class Attn(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n = nn.GroupNorm(8, c)
        self.self_attn = nn.MultiheadAttention(c, 8, batch_first=True)
        self.cross = nn.MultiheadAttention(c, 8, kdim=CTX, vdim=CTX, batch_first=True)

    def forward(self, x, ctx):
        b, c, h, w = x.shape
        s = self.n(x).flatten(2).transpose(1, 2)
        s = s + self.self_attn(s, s, s, need_weights=False)[0]
        s = s + self.cross(s, ctx, ctx, need_weights=False)[0]
        return x + s.transpose(1, 2).reshape(b, c, h, w)


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Conv2d(4, C[0], 3, padding=1)
        self.d0, self.d1, self.d2 = Res(C[0], C[0]), Res(C[0], C[1]), Res(C[1], C[2])
        self.a1, self.a2 = Attn(C[1]), Attn(C[2])
        self.mid = Res(C[2], C[2])
        self.u2, self.u1, self.u0 = Res(2 * C[2], C[1]), Res(2 * C[1], C[0]), Res(2 * C[0], C[0])
        self.ua1 = Attn(C[0])
        self.out = nn.Conv2d(C[0], 4, 3, padding=1)

    def forward(self, x, temb, ctx):
        h0 = self.d0(self.inp(x), temb)
        h1 = self.a1(self.d1(F.avg_pool2d(h0, 2), temb), ctx)
        h2 = self.a2(self.d2(F.avg_pool2d(h1, 2), temb), ctx)
        m = self.mid(h2, temb)
        u = self.u2(torch.cat([m, h2], 1), temb)
        u = self.ua1(self.u1(torch.cat([F.interpolate(u, scale_factor=2.0), h1], 1), temb), ctx)
        u = self.u0(torch.cat([F.interpolate(u, scale_factor=2.0), h0], 1), temb)
        return self.out(u)


model = UNet().to(dev, dtype).eval()
g = torch.Generator().manual_seed(9)
with torch.inference_mode():
    for req in range(6):
        n = [1, 2, 4][int(torch.randint(0, 3, (1,), generator=g))]
        side = [64, 96][int(torch.randint(0, 2, (1,), generator=g))] if dev == "cuda" else 8
        x = torch.randn(n, 4, side, side, device=dev, dtype=dtype)
        ctx = torch.randn(2 * n, TOK, CTX, device=dev, dtype=dtype)
        for t in range(STEPS):
            temb = torch.randn(2 * n, CTX, device=dev, dtype=dtype)
            eps = model(torch.cat([x, x]), temb, ctx)
            cond, uncond = eps.chunk(2)
            x = x - 0.02 * (uncond + 7.5 * (cond - uncond))
        x = x.float().clamp(-1, 1).to(dtype)
if dev == "cuda":
    torch.cuda.synchronize()
