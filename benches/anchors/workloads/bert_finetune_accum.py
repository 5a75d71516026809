"""A BERT-base-sized classifier (transformers BertForSequenceClassification from a BertConfig: 12 layers, 768
wide, 3 labels, random weights) fine-tuned in float32 with gradient accumulation: each of 8 AdamW steps (linear
warmup and decay) sums the gradients of 4 micro-batches of 16 sequences whose lengths are drawn from 32..512 and
padded to a multiple of 8 (attention mask), clips, steps; every 3 optimizer steps a no-grad eval pass over 3
batches of 64. `--device cpu` (or DEVICE=cpu) and SMOKE=1 (2 layers, micro-batch 2, lengths 8..64, 2 steps)."""
import os, random, sys, torch
from transformers import BertConfig, BertForSequenceClassification
dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else os.environ.get("DEVICE", "cuda")
smoke = os.environ.get("SMOKE") == "1"
torch.manual_seed(0); random.seed(0)
L, B, lo, hi, steps, accum = (2, 2, 8, 64, 2, 4) if smoke else (12, 16, 32, 512, 8, 4)
model = BertForSequenceClassification(BertConfig(num_hidden_layers=L, num_labels=3)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / 2, (steps - s) / steps))

def batch(b):
    lens = [random.randint(lo, hi) for _ in range(b)]
    S = (max(lens) + 7) // 8 * 8
    ids, mask = torch.zeros(b, S, dtype=torch.long), torch.zeros(b, S, dtype=torch.long)
    for i, l in enumerate(lens):
        ids[i, 0], ids[i, 1:l], mask[i, :l] = 101, torch.randint(1000, 30522, (l - 1,)), 1
    return ids.to(dev), mask.to(dev), torch.randint(0, 3, (b,)).to(dev)

for step in range(steps):
    model.train()
    for micro in range(accum):
        ids, mask, y = batch(B)
        (model(input_ids=ids, attention_mask=mask, labels=y).loss / accum).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(); sched.step(); opt.zero_grad(set_to_none=True)
    if step % 3 == 2 or step == steps - 1:
        model.eval(); correct = 0
        with torch.no_grad():
            for _ in range(3):
                ids, mask, y = batch(4 * B)
                correct += (model(input_ids=ids, attention_mask=mask).logits.argmax(-1) == y).sum().item()
if dev.startswith("cuda"): torch.cuda.synchronize()
