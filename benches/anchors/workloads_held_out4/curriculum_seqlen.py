"""GPT-style language model trained with a sequence-length curriculum under bf16 autocast, AdamW (weight decay 0.1,
linear warmup then cosine decay, gradient clipping at 1.0), 40 optimizer steps. Model: 8 pre-norm blocks (d 640, 10
heads of 64, GELU MLP of 2,560, no biases in the attention), a 32,000-token embedding tied to the output, no position
embedding: ALiBi instead, as a materialised additive attention bias. The curriculum keeps 8,192 tokens per step and
doubles the sequence length every 8 steps while halving the batch: 32 x 256, 16 x 512, 8 x 1,024, 4 x 2,048, 2 x
4,096. At each stage change the bias of the new length is built once and cached (its float32 (heads, T, T) slope x
distance product with the causal -inf, then cast to bfloat16: 1.6 MiB at 256, 320 MiB at 4,096, the previous one
freed), and scaled_dot_product_attention gets it broadcast over the batch (so the memory-efficient kernel runs, not
flash). Loss: cross-entropy over the full logits in float32. At the end of every stage a no-grad eval of 2 batches at
that stage's shape. So the activation blocks change shape at every stage while their total stays put, and the bias
block and its build-time temporaries grow fourfold per stage.
WL_DEVICE=cpu: d 64, 4 heads, 2 blocks, 1,000 tokens, 512 tokens a step, lengths 32, 64, 128, 2 steps a stage."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(91); rng = random.Random(91)
if small:
    D, H, L, V, TOK, lens, per_stage = 64, 4, 2, 1000, 512, (32, 64, 128), 2
else:
    D, H, L, V, TOK, lens, per_stage = 640, 10, 8, 32000, 8192, (256, 512, 1024, 2048, 4096), 8
kind, AMP = dev.split(":")[0], torch.bfloat16
steps, warm = per_stage * len(lens), max(2, per_stage // 2)
slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device=dev)


def alibi(t):                                        # (1, H, t, t) additive bias: -slope * distance, -inf above diagonal
    pos = torch.arange(t, device=dev)
    dist = (pos[:, None] - pos[None, :]).float()     # query minus key: >= 0 where attended
    bias = -slopes[:, None, None] * dist              # float32 (H, t, t)
    bias = bias.masked_fill(dist < 0, float("-inf"))
    return bias.to(AMP)[None]


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.qkv, s.proj = nn.LayerNorm(D), nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D, bias=False)
        s.ln2, s.fc1, s.fc2 = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x, bias):
        b, t, _ = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.expand(b, -1, -1, -1))
        x = x + s.proj(a.transpose(1, 2).reshape(b, t, D))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.blocks, s.ln = nn.Embedding(V, D), nn.ModuleList(Block() for _ in range(L)), nn.LayerNorm(D)
        nn.init.normal_(s.emb.weight, std=0.02)

    def forward(s, ids, bias):
        x = s.emb(ids)
        for blk in s.blocks:
            x = blk(x, bias)
        return s.ln(x) @ s.emb.weight.T


model = GPT().to(dev)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
opt = torch.optim.AdamW([dict(params=decay, weight_decay=0.1), dict(params=no_decay, weight_decay=0.0)],
                        lr=6e-4, betas=(0.9, 0.95))


def lr_at(i):
    if i < warm:
        return 6e-4 * (i + 1) / warm
    return 6e-5 + 0.5 * (6e-4 - 6e-5) * (1 + math.cos(math.pi * (i - warm) / max(1, steps - warm)))


def batch(t):                                        # random token streams: inputs and next-token targets
    seq = torch.randint(0, V, (TOK // t, t + 1), device=dev)
    return seq[:, :-1], seq[:, 1:]


bias, step = None, 0
for t in lens:
    with torch.no_grad():
        bias = None                                  # drop the previous stage's bias before building the next
        bias = alibi(t)
    for _ in range(per_stage):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        ids, tgt = batch(t)
        with torch.autocast(device_type=kind, dtype=AMP):
            logits = model(ids, bias)
            loss = F.cross_entropy(logits.float().view(-1, V), tgt.reshape(-1))
        del logits
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
    model.eval()
    with torch.no_grad(), torch.autocast(device_type=kind, dtype=AMP):
        ev = 0.0
        for _ in range(2):
            ids, tgt = batch(t)
            ev += F.cross_entropy(model(ids, bias).float().view(-1, V), tgt.reshape(-1)).item()
    model.train()
    print(f"stage T={t}: train loss {loss.item():.3f}, eval {ev / 2:.3f}")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
