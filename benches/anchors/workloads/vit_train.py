"""A ViT-S/16 (timm vit_small_patch16_224, random weights) trained on random 224x224 images at a fixed batch of
128 under torch.autocast(bfloat16), AdamW with weight decay and gradient clipping, 8 steps, then one no-grad
eval batch of 256. `--device cpu` (or DEVICE=cpu) and SMOKE=1 (batch 4, 2 steps) for a quick CPU check."""
import os, random, sys, torch, torch.nn as nn, timm
dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else os.environ.get("DEVICE", "cuda")
kind = dev.split(":")[0]; smoke = os.environ.get("SMOKE") == "1"
torch.manual_seed(0); random.seed(0)
B, steps = (4, 2) if smoke else (128, 8)
model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=1000).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
for step in range(steps):
    x, y = torch.randn(B, 3, 224, 224, device=dev), torch.randint(0, 1000, (B,), device=dev)
    with torch.autocast(kind, dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
    opt.zero_grad(set_to_none=True); loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
model.eval()
with torch.no_grad(), torch.autocast(kind, dtype=torch.bfloat16):
    model(torch.randn(2 * B, 3, 224, 224, device=dev)).argmax(-1)
if dev.startswith("cuda"): torch.cuda.synchronize()
