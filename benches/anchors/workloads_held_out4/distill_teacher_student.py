"""Knowledge distillation of a causal language model, 100 optimizer steps. Teacher: 12 pre-norm blocks (d 1024, 16
heads, GELU MLP of 4,096), float16 weights, frozen (requires_grad off, eval mode), run under torch.no_grad; student:
6 pre-norm blocks (d 512, 8 heads, MLP 2,048) with float32 weights trained under bf16 autocast with AdamW (gradient
clipping at 1.0). Both share a 32,000-token vocabulary and learned positions (up to 1,024), causal
scaled_dot_product_attention. Each step is one batch of right-padded sequences: the length of each sequence is 32 +
an exponential of mean 200 (at most 1,024), the batch holds as many as keep (count x longest, rounded up to 8) within
6,144 tokens, so batches run from 6 sequences of 1,024 to about 30 of 200. The teacher's logits at temperature 2 go
through float32 softmax; only the non-padding positions (a boolean mask, so a count that changes every step) are
selected from both models' logits by boolean indexing; loss = 0.7 x T^2 x KL(teacher || student) on the tempered
distributions + 0.3 x cross-entropy with the next tokens + 0.1 x MSE between the student's final hidden state
(projected 512 -> 1024 by a trained linear) and the teacher's. Every 25 steps a no-grad eval of the student alone on
one batch.
WL_DEVICE=cpu: teacher d 128 / 2 blocks, student d 64 / 1 block, 1,000 tokens, lengths at most 128, 1,024 tokens a
batch, 4 steps, eval every 2."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(92); rng = random.Random(92)
if small:
    TD, TL, TH, SD, SL, SH, V, MAXT, BUDGET, MEAN, steps, every = 128, 2, 4, 64, 1, 4, 1000, 128, 1024, 40, 4, 2
else:
    TD, TL, TH, SD, SL, SH, V, MAXT, BUDGET, MEAN, steps, every = 1024, 12, 16, 512, 6, 8, 32000, 1024, 6144, 200, 100, 25
kind, TEMP, PAD = dev.split(":")[0], 2.0, 0


class Block(nn.Module):
    def __init__(s, d, h):
        super().__init__()
        s.h, s.ln1, s.qkv, s.proj = h, nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.ln2, s.fc1, s.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(s, x):
        b, t, d = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(b, t, 3, s.h, d // s.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # right padding: causal keeps real rows clean
        x = x + s.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class LM(nn.Module):
    def __init__(s, d, n, h):
        super().__init__()
        s.tok, s.pos = nn.Embedding(V, d), nn.Embedding(MAXT, d)
        s.blocks, s.ln = nn.ModuleList(Block(d, h) for _ in range(n)), nn.LayerNorm(d)
        nn.init.normal_(s.tok.weight, std=0.02); nn.init.normal_(s.pos.weight, std=0.01)

    def forward(s, ids):
        x = s.tok(ids) + s.pos(torch.arange(ids.shape[1], device=ids.device))
        for blk in s.blocks:
            x = blk(x)
        h = s.ln(x)
        return h @ s.tok.weight.T, h


teacher = LM(TD, TL, TH).to(dev).half().eval().requires_grad_(False)
student = LM(SD, SL, SH).to(dev)
bridge = nn.Linear(SD, TD).to(dev)
params = list(student.parameters()) + list(bridge.parameters())
opt = torch.optim.AdamW(params, lr=5e-4, weight_decay=0.01)


def make_batch():
    lens = []
    while True:
        n = min(MAXT, int(32 + rng.expovariate(1 / MEAN)))
        t = -(-max(lens + [n]) // 8) * 8
        if lens and (len(lens) + 1) * t > BUDGET:
            break
        lens.append(n)
    t = -(-max(lens) // 8) * 8
    ids = torch.randint(1, V, (len(lens), t + 1), device=dev)
    valid = torch.arange(t + 1, device=dev)[None, :] < torch.tensor(lens, device=dev)[:, None]
    ids = ids.masked_fill(~valid, PAD)
    return ids[:, :-1], ids[:, 1:], valid[:, 1:] & valid[:, :-1]


for step in range(steps):
    ids, tgt, mask = make_batch()
    with torch.no_grad(), torch.autocast(device_type=kind, dtype=torch.float16):
        t_logits, t_hidden = teacher(ids)
        t_prob = F.softmax(t_logits[mask].float() / TEMP, -1)        # (n_valid, V) float32
        t_hidden = t_hidden[mask].float()
        del t_logits
    with torch.autocast(device_type=kind, dtype=torch.bfloat16):
        s_logits, s_hidden = student(ids)
        s_sel = s_logits[mask].float()                                # (n_valid, V)
        kl = F.kl_div(F.log_softmax(s_sel / TEMP, -1), t_prob, reduction="batchmean") * TEMP ** 2
        ce = F.cross_entropy(s_sel, tgt[mask])
        mse = F.mse_loss(bridge(s_hidden[mask]).float(), t_hidden)
        loss = 0.7 * kl + 0.3 * ce + 0.1 * mse
    del s_logits, s_sel, t_prob
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    if (step + 1) % every == 0:
        student.eval()
        with torch.no_grad(), torch.autocast(device_type=kind, dtype=torch.bfloat16):
            ids, tgt, mask = make_batch()
            ev = F.cross_entropy(student(ids)[0][mask].float(), tgt[mask]).item()
        student.train()
        print(f"step {step + 1}: batch {tuple(ids.shape)}, loss {loss.item():.3f} (kl {kl.item():.3f}), eval ce {ev:.3f}")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
