"""A 2-D Fourier neural operator trained on autoregressive rollouts at several grid resolutions, float32, Adam (lr
1e-3, halved every 50 steps), 150 steps, then zero-shot super-resolution rollouts. Data, all made on the device:
initial fields are Gaussian random fields (a random complex spectrum scaled by (|k|^2 + 9)^-1.25, irfft2 to the
grid), and the target dynamics is a fixed operator applied step by step under no_grad (in Fourier space a damped,
advected spectrum: multiply by exp(-0.002 |k|^2) and a phase shift, irfft2, then u + 0.3 tanh(u) pointwise).
Model: lifting by a 1x1 conv from (u, x, y) to width 64; 4 Fourier layers, each torch.fft.rfft2 of the (batch, 64, H,
W) activations, the lowest 16 x 16 modes of the top and bottom frequency rows multiplied by complex weights (stored
as real (64, 64, 16, 16, 2) tensors and viewed as complex) with torch.einsum into an out_ft buffer of zeros (batch,
64, H, W/2 + 1) complex64, torch.fft.irfft2 back, plus a 1x1 conv, GELU (none after the last); projection 64 -> 128
-> 1. Each step draws a resolution and batch from (64 x 64, 64), (128 x 128, 16), (256 x 256, 4) and a rollout
length of 1..5: the model is applied to its own output that many times with the graph kept through the whole
rollout (so the saved activations grow with the rollout length), relative L2 loss summed over the rollout steps.
After every 50 steps a no-grad evaluation: 2 fields at 512 x 512, a rollout of 5 steps. The cuFFT plans and work
areas differ per resolution and the complex spectra are as large as the real activations.
WL_DEVICE=cpu: width 16, 8 x 8 modes, resolutions 16, 32 and 64 with batches 16, 4, 1, rollouts 1..3, 6 steps,
eval after steps 3 and 6 at 128 x 128."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(96); rng = random.Random(96)
if small:
    W, M, RES, KMAX, steps, every, EVAL_RES = 16, 8, ((16, 16), (32, 4), (64, 1)), 3, 6, 3, 128
else:
    W, M, RES, KMAX, steps, every, EVAL_RES = 64, 16, ((64, 64), (128, 16), (256, 4)), 5, 150, 50, 512


def wavenumbers(n):                                  # |k|^2 on the rfft2 grid (n, n // 2 + 1)
    ky = torch.fft.fftfreq(n, 1.0 / n, device=dev)
    kx = torch.fft.rfftfreq(n, 1.0 / n, device=dev)
    return ky[:, None] ** 2 + kx[None, :] ** 2, kx[None, :]


def random_fields(b, n):
    k2, _ = wavenumbers(n)
    spec = torch.randn(b, 1, n, n // 2 + 1, dtype=torch.complex64, device=dev) * (k2 + 9.0) ** -1.25
    u = torch.fft.irfft2(spec * n * n, s=(n, n))
    return u / u.std(dim=(-2, -1), keepdim=True)


def true_step(u):
    n = u.shape[-1]
    k2, kx = wavenumbers(n)
    spec = torch.fft.rfft2(u) * torch.exp(-0.002 * k2) * torch.exp(1j * 0.05 * kx)
    u = torch.fft.irfft2(spec, s=(n, n))
    return u + 0.3 * torch.tanh(u)


class SpectralConv(nn.Module):
    def __init__(s):
        super().__init__()
        scale = 1.0 / (W * W)
        s.w1 = nn.Parameter(scale * torch.rand(W, W, M, M, 2))
        s.w2 = nn.Parameter(scale * torch.rand(W, W, M, M, 2))

    def forward(s, x):
        b, _, h, w = x.shape
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(b, W, h, w // 2 + 1, dtype=torch.complex64, device=x.device)
        out_ft[:, :, :M, :M] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :M, :M], torch.view_as_complex(s.w1))
        out_ft[:, :, -M:, :M] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -M:, :M], torch.view_as_complex(s.w2))
        return torch.fft.irfft2(out_ft, s=(h, w))


class FNO(nn.Module):
    def __init__(s):
        super().__init__()
        s.lift = nn.Conv2d(3, W, 1)
        s.spec = nn.ModuleList(SpectralConv() for _ in range(4))
        s.pw = nn.ModuleList(nn.Conv2d(W, W, 1) for _ in range(4))
        s.p1, s.p2 = nn.Conv2d(W, 128, 1), nn.Conv2d(128, 1, 1)

    def forward(s, u):
        b, _, h, w = u.shape
        gy = torch.linspace(0, 1, h, device=u.device)[None, None, :, None].expand(b, 1, h, w)
        gx = torch.linspace(0, 1, w, device=u.device)[None, None, None, :].expand(b, 1, h, w)
        x = s.lift(torch.cat([u, gx, gy], 1))
        for i, (sp, pw) in enumerate(zip(s.spec, s.pw)):
            x = sp(x) + pw(x)
            if i < 3:
                x = F.gelu(x)
        return s.p2(F.gelu(s.p1(x)))


model = FNO().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, 50 if not small else 3, 0.5)


def rel_l2(pred, tgt):
    return ((pred - tgt).flatten(1).norm(dim=1) / tgt.flatten(1).norm(dim=1)).mean()


for step in range(steps):
    n, b = rng.choice(RES)
    K = rng.randint(1, KMAX)
    with torch.no_grad():
        u0 = random_fields(b, n)
        targets, u = [], u0
        for _ in range(K):
            u = true_step(u)
            targets.append(u)
    u, loss = u0, 0.0
    for k in range(K):                               # autoregressive rollout, graph kept throughout
        u = model(u)
        loss = loss + rel_l2(u, targets[k])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    del u, targets, u0
    if (step + 1) % every == 0:
        with torch.no_grad():
            u = v = random_fields(2, EVAL_RES)
            err = 0.0
            for _ in range(5):
                u, v = model(u), true_step(v)
                err += rel_l2(u, v).item()
        print(f"step {step + 1}: train {n}x{n} x {b}, rollout {K}, loss {loss.item() / K:.4f}; "
              f"eval {EVAL_RES}x{EVAL_RES} rollout error {err / 5:.4f}")
        del u, v
if dev.startswith("cuda"):
    torch.cuda.synchronize()
