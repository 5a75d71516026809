"""A ViT (patch 16, 224x224 images, width 384, 8 blocks, 6 heads) fine-tuned under bf16 autocast with gradient
accumulation over 4 micro-batches of 32, AdamW with gradient clipping, 12 optimizer steps; fixed shapes."""
import torch, torch.nn as nn
torch.manual_seed(23)
dev = "cuda"


class ViT(nn.Module):
    def __init__(self, d=384, depth=8, heads=6, classes=100):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, 197, d))
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


model = ViT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
for step in range(12):
    opt.zero_grad(set_to_none=True)
    for micro in range(4):
        x = torch.randn(32, 3, 224, 224, device=dev)
        y = torch.randint(0, 100, (32,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
        (loss / 4).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
torch.cuda.synchronize()
