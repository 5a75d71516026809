"""A T5 encoder-decoder (transformers T5ForConditionalGeneration from a T5Config: d_model 512, 6+6 layers, 8
heads, d_ff 2048, 32128-token vocabulary, random weights) trained in float32 with AdamW on random token batches
of 12 whose source and target lengths are both drawn from 32..512 every step (each row padded to the batch's
longest: attention mask and -100 labels), 15 steps, then a no-grad eval batch.
`--device cpu` (or DEVICE=cpu) and SMOKE=1 (2 layers, batch 2, lengths 8..32, 2 steps) for a quick CPU check."""
import os, random, sys, torch
from transformers import T5Config, T5ForConditionalGeneration
dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else os.environ.get("DEVICE", "cuda")
smoke = os.environ.get("SMOKE") == "1"
torch.manual_seed(0); random.seed(0)
L, B, lo, hi, steps = (2, 2, 8, 32, 2) if smoke else (6, 12, 32, 512, 15)
cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=L, num_decoder_layers=L, num_heads=8,
               dropout_rate=0.1, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
model = T5ForConditionalGeneration(cfg).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)

def batch(b):
    S, T = random.randint(lo, hi), random.randint(lo, hi)
    src, mask = torch.zeros(b, S, dtype=torch.long), torch.zeros(b, S, dtype=torch.long)
    labels = torch.full((b, T), -100, dtype=torch.long)
    for i in range(b):
        s, t = random.randint(lo // 2, S), random.randint(lo // 2, T)
        src[i, :s], mask[i, :s] = torch.randint(2, 32128, (s,)), 1
        labels[i, :t] = torch.randint(2, 32128, (t,))
    return src.to(dev), mask.to(dev), labels.to(dev)

for step in range(steps):
    src, mask, labels = batch(B)
    loss = model(input_ids=src, attention_mask=mask, labels=labels).loss
    opt.zero_grad(set_to_none=True); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
model.eval()
with torch.no_grad():
    src, mask, labels = batch(2 * B)
    model(input_ids=src, attention_mask=mask, labels=labels).loss.item()
if dev.startswith("cuda"): torch.cuda.synchronize()
