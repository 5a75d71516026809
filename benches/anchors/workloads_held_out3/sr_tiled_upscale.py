"""x4 single-image super-resolution (an EDSR-baseline-shaped net: a 3x3 head conv to 64 channels, 16 residual blocks
of conv-ReLU-conv without normalisation, a body conv with the global skip, then two conv 64 -> 256 + PixelShuffle(2)
upsampling stages and a 3x3 conv to RGB) in channels_last, trained under bf16 autocast with Adam (betas 0.9/0.99,
lr halved at step 40) on an L1 loss, 60 steps. Every step draws a low-resolution crop side from 24, 32, ..., 64 and
a batch of 98,304 / side^2 clamped to 24..96 (96 crops of 24, 24 crops of 64): random 4x-size high-resolution crops
are made on the device (smooth noise from an x8 bilinear upsample plus fine noise), randomly flipped and rotated by
90 degrees as a batch, and downscaled by bicubic interpolation with antialiasing to make the inputs. After steps
15, 30 and 45 a no-grad validation upscales one 3x320x320 image and after step 60 one 3x480x480 image by tiled
inference (in eval mode, bf16 autocast): tiles of 96 x 96 low-resolution pixels with an overlap of 8, clipped at
the right and bottom edges (so edge tiles are smaller), each tile's x4 output added into a float32 output buffer of
the full size and a coverage count, then divided, clamped and scored by PSNR against a bicubic reference.
WL_DEVICE=cpu: 8 channels, 2 blocks, sides 8..16, batch budget 512 clamped to 2..8, 3 steps, tiles of 24 on
one 40x40 image after the last step."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(86); rng = random.Random(86)
if small:
    C, NB, sides, budget, (blo, bhi), steps, evals, (tile, overlap) = 8, 2, (8, 12, 16), 512, (2, 8), 3, {3: 40}, (24, 4)
else:
    C, NB, sides, budget, (blo, bhi), steps, evals, (tile, overlap) = (
        64, 16, (24, 32, 40, 48, 56, 64), 98304, (24, 96), 60, {15: 320, 30: 320, 45: 320, 60: 480}, (96, 8))
kind, CL = dev.split(":")[0], torch.channels_last


class ResBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1, s.c2 = nn.Conv2d(C, C, 3, 1, 1), nn.Conv2d(C, C, 3, 1, 1)

    def forward(s, x):
        return x + s.c2(F.relu(s.c1(x)))


class EDSR(nn.Module):
    def __init__(s):
        super().__init__()
        s.head = nn.Conv2d(3, C, 3, 1, 1)
        s.body, s.body_out = nn.Sequential(*[ResBlock() for _ in range(NB)]), nn.Conv2d(C, C, 3, 1, 1)
        s.up = nn.Sequential(nn.Conv2d(C, 4 * C, 3, 1, 1), nn.PixelShuffle(2), nn.Conv2d(C, 4 * C, 3, 1, 1),
                             nn.PixelShuffle(2), nn.Conv2d(C, 3, 3, 1, 1))

    def forward(s, x):
        h = s.head(x - 0.5)
        return s.up(h + s.body_out(s.body(h))) + 0.5


def hr_batch(b, side):                                   # smooth + fine noise, flipped / rotated as a batch
    hr = F.interpolate(torch.rand(b, 3, side // 8, side // 8, device=dev), scale_factor=8, mode="bilinear")
    hr = (0.8 * hr + 0.2 * torch.rand_like(hr)).clamp(0, 1)
    if rng.random() < 0.5:
        hr = hr.flip(-1)
    return torch.rot90(hr, rng.randint(0, 3), (2, 3))


def downscale(hr):
    return F.interpolate(hr, scale_factor=0.25, mode="bicubic", antialias=True).clamp(0, 1)


def tiled_upscale(model, lr):
    _, _, h, w = lr.shape
    out = torch.zeros(1, 3, 4 * h, 4 * w, device=dev)
    count = torch.zeros(1, 1, 4 * h, 4 * w, device=dev)
    for y in range(0, h, tile - overlap):
        y1 = min(y + tile, h)
        for x in range(0, w, tile - overlap):
            x1 = min(x + tile, w)
            patch = lr[:, :, y:y1, x:x1].contiguous(memory_format=CL)
            with torch.autocast(device_type=kind, dtype=torch.bfloat16):
                sr = model(patch)
            out[:, :, 4 * y:4 * y1, 4 * x:4 * x1] += sr.float()
            count[:, :, 4 * y:4 * y1, 4 * x:4 * x1] += 1
            del sr
            if x1 == w:
                break
        if y1 == h:
            break
    return (out / count).clamp(0, 1)


model = EDSR().to(dev, memory_format=CL)
opt = torch.optim.Adam(model.parameters(), lr=2e-4, betas=(0.9, 0.99))
sched = torch.optim.lr_scheduler.MultiStepLR(opt, [40], 0.5)
for step in range(1, steps + 1):
    side = rng.choice(sides)
    b = max(blo, min(bhi, budget // side ** 2))
    hr = hr_batch(b, 4 * side)
    lr = downscale(hr).contiguous(memory_format=CL)
    with torch.autocast(device_type=kind, dtype=torch.bfloat16):
        sr = model(lr)
    loss = F.l1_loss(sr.float(), hr)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step(); sched.step()
    del hr, lr, sr, loss
    if step in evals:
        model.eval()
        with torch.no_grad():
            hr = hr_batch(1, 4 * evals[step])
            lr = downscale(hr)
            sr = tiled_upscale(model, lr)
            ref = F.interpolate(lr, scale_factor=4, mode="bicubic").clamp(0, 1)
            psnr = (10 * torch.log10(1 / F.mse_loss(sr, hr)) - 10 * torch.log10(1 / F.mse_loss(ref, hr))).item()
            del hr, lr, sr, ref
        model.train()
if dev.startswith("cuda"):
    torch.cuda.synchronize()
