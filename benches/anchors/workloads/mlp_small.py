"""A small MLP (8 x Linear(1024, 1024), ReLU) trained with SGD and momentum at batch sizes 64..512, then eval."""
import random, torch, torch.nn as nn
torch.manual_seed(0); random.seed(1)
dev = "cuda"
layers = []
for _ in range(8): layers += [nn.Linear(1024, 1024), nn.ReLU()]
model = nn.Sequential(*layers, nn.Linear(1024, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for step in range(30):
    b = random.choice([64, 128, 256, 512, 96, 384])
    x, y = torch.randn(b, 1024, device=dev), torch.randint(0, 10, (b,), device=dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
with torch.no_grad():
    for b in [1000, 200]:
        model(torch.randn(b, 1024, device=dev))
torch.cuda.synchronize()
