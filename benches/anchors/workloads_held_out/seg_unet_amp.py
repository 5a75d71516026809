"""A 4-level segmentation UNet (32..256 channels, batch norm) trained with fp16 autocast and a GradScaler, SGD with
momentum, channels-last batches of 8 random crops whose side changes every 4 steps (256, 320 or 384), 21 classes,
24 steps."""
import torch, torch.nn as nn
torch.manual_seed(23)
dev = "cuda"


def conv(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
                         nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, c=(32, 64, 128, 256), classes=21):
        super().__init__()
        self.down = nn.ModuleList([conv(3, c[0])] + [conv(c[i], c[i + 1]) for i in range(3)])
        self.up = nn.ModuleList(nn.ConvTranspose2d(c[i + 1], c[i], 2, 2) for i in reversed(range(3)))
        self.dec = nn.ModuleList(conv(2 * c[i], c[i]) for i in reversed(range(3)))
        self.out = nn.Conv2d(c[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else nn.functional.max_pool2d(x, 2))
            skips.append(x)
        for u, d, s in zip(self.up, self.dec, reversed(skips[:-1])):
            x = d(torch.cat([u(x), s], dim=1))
        return self.out(x)


model = UNet().to(dev).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
scaler = torch.amp.GradScaler("cuda")
sides = [256, 320, 384]
for step in range(24):
    if step % 4 == 0:
        s = sides[int(torch.randint(0, 3, ()))]
    x = torch.randn(8, 3, s, s, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 21, (8, s, s), device=dev)
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
torch.cuda.synchronize()
