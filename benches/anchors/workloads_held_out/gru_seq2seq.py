"""A GRU encoder-decoder (2 layers, hidden 1024, embeddings 512, vocabularies of 16,000 and 12,000 tokens) trained
with teacher forcing and Adam on batches of 64 sentence pairs whose source and target lengths are drawn from
10..120 every step (padded to the batch's longest), 40 steps, fp32. Written in session 21 after the allocator's rules
were in place (held out from them)."""
import os
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(22)
dev = "cuda" if torch.cuda.is_available() else "cpu"
STEPS = int(os.environ.get("STEPS", 40))
SV, TV, E, HID, B = 16000, 12000, 512, 1024, 64
if dev == "cpu":
    SV, TV, E, HID, B = 300, 200, 16, 32, 4


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb = nn.Embedding(SV, E)
        self.tgt_emb = nn.Embedding(TV, E)
        self.enc = nn.GRU(E, HID, num_layers=2, batch_first=True)
        self.dec = nn.GRU(E, HID, num_layers=2, batch_first=True)
        self.out = nn.Linear(HID, TV)

    def forward(self, src, tgt_in):
        _, h = self.enc(self.src_emb(src))
        y, _ = self.dec(self.tgt_emb(tgt_in), h)
        return self.out(y)


model = Seq2Seq().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(5)
for step in range(STEPS):
    ls = int(torch.randint(10, 121, (1,), generator=g))
    lt = int(torch.randint(10, 121, (1,), generator=g))
    src = torch.randint(1, SV, (B, ls), device=dev)
    tgt = torch.randint(1, TV, (B, lt + 1), device=dev)
    logits = model(src, tgt[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, TV), tgt[:, 1:].reshape(-1), ignore_index=0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
if dev == "cuda":
    torch.cuda.synchronize()
