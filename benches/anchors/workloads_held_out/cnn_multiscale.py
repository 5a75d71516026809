"""Multi-scale CNN training: a 10-layer conv net (conv, batch norm, ReLU, stride-2 downsampling) trained with SGD and
momentum on batches of 32 images whose side is drawn from 160..320 in steps of 32 at every step, 30 steps."""
import random, torch, torch.nn as nn
torch.manual_seed(2); random.seed(2)
dev = "cuda"
def block(i, o, s):
    return nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
chans = [3, 32, 64, 64, 128, 128, 256, 256, 512, 512, 512]
net = nn.Sequential(*[block(chans[k], chans[k + 1], 2 if k in (0, 2, 4, 6, 8) else 1) for k in range(10)],
                    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 100)).to(dev)
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
for step in range(30):
    side = random.choice(range(160, 321, 32))
    x = torch.randn(32, 3, side, side, device=dev)
    y = torch.randint(0, 100, (32,), device=dev)
    loss = nn.functional.cross_entropy(net(x), y)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
torch.cuda.synchronize()
