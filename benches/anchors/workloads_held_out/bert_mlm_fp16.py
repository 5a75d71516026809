"""BERT-style masked-language-model pretraining: an 8-layer `nn.TransformerEncoder` (d 768, 12 heads, GELU, pre-norm)
over a 30,522-token vocabulary, batches of 32 sequences whose padded length is drawn from 64..384 every step with a
key-padding mask, 15% of the tokens predicted (only those rows go through the output layer), fp16 autocast with a
GradScaler, AdamW, 30 steps. Written in session 21 after the allocator's rules were in place (held out from them)."""
import os
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(23)
dev = "cuda" if torch.cuda.is_available() else "cpu"
STEPS = int(os.environ.get("STEPS", 30))
V, D, H, L, B = 30522, 768, 12, 8, 32
if dev == "cpu":
    V, D, H, L, B = 500, 32, 4, 2, 4


class MLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.pos = nn.Embedding(512, D)
        layer = nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.head = nn.Linear(D, V)

    def forward(self, idx, pad, picked):
        x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        x = self.enc(x, src_key_padding_mask=pad)
        return self.head(x[picked])


model = MLM().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler(dev, enabled=dev == "cuda")
g = torch.Generator().manual_seed(7)
for step in range(STEPS):
    t = int(torch.randint(64, 385, (1,), generator=g)) if dev == "cuda" else 16
    idx = torch.randint(5, V, (B, t), device=dev)
    lens = torch.randint(t // 2, t + 1, (B,), device=dev)
    pad = torch.arange(t, device=dev)[None, :] >= lens[:, None]
    picked = (torch.rand(B, t, device=dev) < 0.15) & ~pad
    labels = idx[picked]
    with torch.autocast(dev, dtype=torch.float16, enabled=dev == "cuda"):
        logits = model(idx, pad, picked)
        loss = F.cross_entropy(logits.float(), labels)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
if dev == "cuda":
    torch.cuda.synchronize()
