"""A DCGAN-style generator and critic trained as a WGAN with gradient penalty, fp32, two Adam optimizers (lr 1e-4,
betas 0/0.9): 10 generator iterations, each after 5 critic iterations at batch 256 of 64x64 RGB images. Generator:
a 128-d noise through a Linear to 512x4x4 and four ConvTranspose2d (512-256-128-64-3) with batch norm, ReLU, tanh.
Critic: four stride-2 convolutions (3-64-128-256-512) with layer norm (GroupNorm of one group) and leaky ReLU, then a
Linear. Each critic iteration makes fakes with the generator and detaches them, scores real and fake batches, and
adds the gradient penalty: the critic on random interpolates, torch.autograd.grad of its output with create_graph=True,
((norm - 1)^2).mean() * 10, so the backward runs a double backward; the generator iteration freezes the critic
(requires_grad off), back-propagates -critic(G(z)) through it into the generator. Every 5 generator iterations a
no-grad sample of 64 fixed noises in eval mode. WL_DEVICE=cpu: 32x32 images, channels 128-64-32, 32-d noise,
batch 8, 2 generator iterations of 3 critic ones."""
import os, random, torch, torch.nn as nn
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(53); rng = random.Random(53)
if small:
    C, B, gsteps, ncrit, Z, ups = 32, 8, 2, 3, 32, 3          # 4 -> 32
else:
    C, B, gsteps, ncrit, Z, ups = 64, 256, 10, 5, 128, 4      # 4 -> 64
ch = [C * 2 ** i for i in reversed(range(ups))]                # 512, 256, 128, 64 at full size


class G(nn.Module):
    def __init__(s):
        super().__init__()
        s.fc, s.bn0 = nn.Linear(Z, ch[0] * 16), nn.BatchNorm2d(ch[0])
        layers = []
        for cin, c in zip(ch, ch[1:]):
            layers += [nn.ConvTranspose2d(cin, c, 4, 2, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(True)]
        s.body = nn.Sequential(*layers, nn.ConvTranspose2d(ch[-1], 3, 4, 2, 1), nn.Tanh())

    def forward(s, z):
        return s.body(torch.relu(s.bn0(s.fc(z).view(z.shape[0], ch[0], 4, 4))))


class D(nn.Module):
    def __init__(s):
        super().__init__()
        layers, cin = [], 3
        for i, c in enumerate(reversed(ch)):
            layers += [nn.Conv2d(cin, c, 4, 2, 1)] + ([nn.GroupNorm(1, c)] if i else []) + [nn.LeakyReLU(0.2)]
            cin = c
        s.body, s.fc = nn.Sequential(*layers), nn.Linear(cin * 16, 1)

    def forward(s, x):
        return s.fc(s.body(x).flatten(1))


gen, crit = G().to(dev), D().to(dev)
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-4, betas=(0.0, 0.9))
opt_d = torch.optim.Adam(crit.parameters(), lr=1e-4, betas=(0.0, 0.9))
fixed = torch.randn(64, Z, device=dev)
side = 4 * 2 ** ups


def gradient_penalty(real, fake):
    eps = torch.rand(real.shape[0], 1, 1, 1, device=dev)
    mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
    out = crit(mix)
    g, = torch.autograd.grad(out.sum(), mix, create_graph=True)
    return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


for it in range(gsteps):
    for p in crit.parameters():
        p.requires_grad_(True)
    for _ in range(ncrit):
        real = torch.rand(B, 3, side, side, device=dev) * 2 - 1
        fake = gen(torch.randn(B, Z, device=dev)).detach()
        loss_d = crit(fake).mean() - crit(real).mean() + 10 * gradient_penalty(real, fake)
        opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        opt_d.step()
    for p in crit.parameters():
        p.requires_grad_(False)
    loss_g = -crit(gen(torch.randn(B, Z, device=dev))).mean()
    opt_g.zero_grad(set_to_none=True)
    loss_g.backward()
    opt_g.step()
    if it % 5 == 4 or it == gsteps - 1:
        gen.eval()
        with torch.no_grad():
            samples = gen(fixed).add(1).mul(127.5).clamp(0, 255).to(torch.uint8)
        gen.train()
        del samples
if dev.startswith("cuda"):
    torch.cuda.synchronize()
