"""Transformer encoder-decoder translation training with token-budget bucketing and a schedule of optimizer changes,
bf16 autocast, 40 optimizer steps. Model: nn.TransformerEncoder and nn.TransformerDecoder (d 512, 8 heads, 6 + 6
pre-norm layers, feed-forward 2,048, dropout 0.1, batch first, final LayerNorms), a 32,000-token source embedding, a
32,000-token target embedding tied to the output projection, sinusoidal positions computed per batch. Data: sentence
pairs with source lengths 4 + an exponential of mean 40 (at most 256) and target lengths 0.8..1.3 times the source,
sorted into buckets by length (16, 32, 48, 64, 96, 128, 192, 256); a micro-batch is drawn from one bucket with as
many pairs as fit 4,096 target tokens (16 pairs of 256 up to 256 pairs of 16), padded to its longest rounded up to 8
(boolean key-padding masks and a boolean causal mask built per micro-batch). Each optimizer step plans micro-batches
until it holds 12,288 target tokens (4..6 of them with these seeds, of unrelated shapes), accumulates their gradients
(label-smoothed cross-entropy summed in float32, divided by the step's token count), clips to 1.0 and steps.
Schedule: steps 0..9 train with the encoder and source embedding frozen (requires_grad off, so no encoder activations
are kept) and AdamW (lr 5e-4) over the rest; at step 10 the encoder is unfrozen and added to the optimizer as a
second parameter group (lr 2.5e-4; its Adam state appears at that step); at step 25 the optimizer is thrown away and
a new AdamW (lr 3e-4, warm restart) is built over all parameters, so all moment buffers are freed and allocated again
at its first step. After steps 10, 20, 30 and 40 a no-grad eval of one micro-batch from the 256 bucket.
WL_DEVICE=cpu: d 64, 2 + 2 layers, 1,000 tokens, lengths at most 64 in buckets 16, 32, 64, 256 target tokens a
micro-batch and 512 a step, 6 steps (phases at 2 and 4, eval every 3)."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(84); rng = random.Random(84)
if small:
    D, H, L, FF, V, buckets, MICRO, STEP = 64, 4, 2, 256, 1000, (16, 32, 64), 256, 512
    steps, unfreeze, restart, every = 6, 2, 4, 3
else:
    D, H, L, FF, V, buckets, MICRO, STEP = 512, 8, 6, 2048, 32000, (16, 32, 48, 64, 96, 128, 192, 256), 4096, 12288
    steps, unfreeze, restart, every = 40, 10, 25, 10
kind, PAD = dev.split(":")[0], 0


class Seq2Seq(nn.Module):
    def __init__(s):
        super().__init__()
        s.src_emb, s.tgt_emb = nn.Embedding(V, D), nn.Embedding(V, D)
        layer = dict(d_model=D, nhead=H, dim_feedforward=FF, dropout=0.1, batch_first=True, norm_first=True)
        s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer), L, nn.LayerNorm(D), enable_nested_tensor=False)
        s.dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(**layer), L, nn.LayerNorm(D))

    @staticmethod
    def pos(t, device):
        inv = torch.exp(torch.arange(0, D, 2, device=device).float() * (-math.log(10000.0) / D))
        ang = torch.arange(t, device=device).float()[:, None] * inv
        return torch.stack([ang.sin(), ang.cos()], -1).view(t, D)

    def forward(s, src, tgt_in):
        x = s.src_emb(src) * D ** 0.5 + s.pos(src.shape[1], src.device)
        y = s.tgt_emb(tgt_in) * D ** 0.5 + s.pos(tgt_in.shape[1], src.device)
        t = tgt_in.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)      # True = not attended
        mem = s.enc(x, src_key_padding_mask=src == PAD)
        h = s.dec(y, mem, tgt_mask=causal, tgt_key_padding_mask=tgt_in == PAD, memory_key_padding_mask=src == PAD)
        return h @ s.tgt_emb.weight.T


def pair():
    n = min(int(4 + rng.expovariate(1 / 40)), buckets[-1])
    return n, max(2, min(buckets[-1], int(n * rng.uniform(0.8, 1.3))))


def micro_batch(bucket=None):
    if bucket is None:                                     # a bucket picked with weight ~ how often lengths fall in it
        n = max(pair())
        bucket = next(b for b in buckets if b >= n)
    b = max(1, MICRO // bucket)
    lens = []
    while len(lens) < b:
        sl, tl = pair()
        if max(sl, tl) <= bucket and (bucket == buckets[0] or max(sl, tl) > buckets[buckets.index(bucket) - 1]):
            lens.append((sl, tl))
    ts, tt = (max(l[0] for l in lens) + 7) // 8 * 8, (max(l[1] for l in lens) + 1 + 7) // 8 * 8
    src, tgt = torch.zeros(b, ts, dtype=torch.long), torch.zeros(b, tt, dtype=torch.long)
    for i, (sl, tl) in enumerate(lens):
        src[i, :sl] = torch.randint(3, V, (sl,))
        tgt[i, 0], tgt[i, 1:tl + 1] = 1, torch.randint(3, V, (tl,))      # BOS + tokens
    return src.to(dev), tgt.to(dev), sum(l[1] for l in lens)


def loss_sum(model, src, tgt):
    with torch.autocast(device_type=kind, dtype=torch.bfloat16):
        logits = model(src, tgt[:, :-1])
    return F.cross_entropy(logits.float().view(-1, V), tgt[:, 1:].reshape(-1), ignore_index=PAD,
                           label_smoothing=0.1, reduction="sum")


model = Seq2Seq().to(dev)
enc_params = list(model.src_emb.parameters()) + list(model.enc.parameters())
rest = [p for p in model.parameters() if all(p is not q for q in enc_params)]
for p in enc_params:
    p.requires_grad_(False)                                # phase 1: encoder frozen
opt = torch.optim.AdamW(rest, lr=5e-4, weight_decay=0.01)
for step in range(steps):
    if step == unfreeze:                                   # phase 2: encoder joins as a second parameter group
        for p in enc_params:
            p.requires_grad_(True)
        opt.add_param_group({"params": enc_params, "lr": 2.5e-4})
    if step == restart:                                    # phase 3: optimizer state thrown away, rebuilt lazily
        del opt
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    model.train()
    plan, tokens = [], 0
    while tokens < STEP:                                   # plan the step's micro-batches (shapes unrelated)
        plan.append(micro_batch())
        tokens += plan[-1][2]
    opt.zero_grad(set_to_none=True)
    for src, tgt, _ in plan:
        (loss_sum(model, src, tgt) / tokens).backward()
    del plan
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    opt.step()
    if (step + 1) % every == 0:
        model.eval()
        with torch.no_grad():
            src, tgt, n = micro_batch(buckets[-1])
            (loss_sum(model, src, tgt) / n).item()
if dev.startswith("cuda"):
    torch.cuda.synchronize()
