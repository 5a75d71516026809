"""torchvision ResNet-34 (random weights) in channels_last trained on random 224x224 images at a fixed batch of
64 with torch.autocast(float16) and torch.amp.GradScaler (scaled loss, unscale with its inf check, step, scale
update every step), SGD with momentum and weight decay, 8 steps, then a no-grad eval batch of 128.
`--device cpu` (or DEVICE=cpu) and SMOKE=1 (batch 4 at 64x64, 2 steps) for a quick CPU check."""
import os, random, sys, torch, torch.nn as nn, torchvision
dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else os.environ.get("DEVICE", "cuda")
kind = dev.split(":")[0]; smoke = os.environ.get("SMOKE") == "1"
torch.manual_seed(0); random.seed(0)
B, R, steps = (4, 64, 2) if smoke else (64, 224, 8)
model = torchvision.models.resnet34(weights=None).to(dev, memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
scaler = torch.amp.GradScaler(kind)
for step in range(steps):
    x = torch.randn(B, 3, R, R, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (B,), device=dev)
    with torch.autocast(kind, dtype=torch.float16):
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
model.eval()
with torch.no_grad(), torch.autocast(kind, dtype=torch.float16):
    model(torch.randn(2 * B, 3, R, R, device=dev).contiguous(memory_format=torch.channels_last)).softmax(-1)
if dev.startswith("cuda"): torch.cuda.synchronize()
