"""Conformer-CTC speech recognition training under bf16 autocast, AdamW (weight decay 1e-3, 25 warm-up steps then
inverse-square-root decay, gradient clipping at 5.0), 120 optimizer steps. Input: 80-bin log-mel frames at 100 a
second (random values). Front end: two 3 x 3 stride-2 Conv2d + ReLU (1 -> 256 -> 256 channels), so time shrinks by
4 and the 80 bins to 19, then a Linear of 256 x 19 -> 256. Encoder: 12 Conformer blocks of d 256, each a half-step
feed-forward (SiLU, 1,024), multi-head self-attention (4 heads of 64, rotary positions, a boolean key-padding mask
(B, 1, 1, T'), dropout 0.1), a convolution module (LayerNorm, pointwise Linear 256 -> 512, GLU, padding frames zeroed,
depthwise Conv1d of kernel 31, BatchNorm1d, SiLU, pointwise Linear), a second half-step feed-forward and a final
LayerNorm; then a Linear to a 1,000-token vocabulary (blank 0). Loss: F.ctc_loss on float32 log-probs (T', B, V)
with random targets of 2..4 tokens a second (concatenated, lengths per utterance). Data: a pool of utterances of 1..20
s (a gamma of mean 6 s, clamped), sorted by length and cut into batches of at most 40,000 padded frames and at most
256 utterances (256 x 1 s up to 20 x 20 s), the batches shuffled, so batch size and padded length change at every
step; SpecAugment on the device per step (2 frequency masks of up to 27 bins, 4 time masks of up to 5% of each
utterance's length). Every 40 steps a no-grad greedy-decode eval (BatchNorm in eval mode) of 2 fixed batches: argmax,
repeats and blanks dropped by a mask, hypotheses packed with boolean indexing.
WL_DEVICE=cpu: d 64, 2 blocks, 16 front-end channels, kernel 15, 100 tokens, utterances of 1..6 s, batches of at
most 3,000 frames and 64 utterances, 4 steps, eval every 2."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(101); rng = random.Random(101)
if small:
    D, H, L, V, SUBC, K, BUDGET, MAXB, MAXS, MEANS, steps, every = 64, 4, 2, 100, 16, 15, 3000, 64, 6.0, 2.5, 4, 2
else:
    D, H, L, V, SUBC, K, BUDGET, MAXB, MAXS, MEANS, steps, every = 256, 4, 12, 1000, 256, 31, 40000, 256, 20.0, 6.0, 120, 40
kind, AMP, MEL, FPS, WARM = dev.split(":")[0], torch.bfloat16, 80, 100, 25


def sub_len(n):                                       # frames after the two unpadded stride-2 3 x 3 convolutions
    return ((n - 3) // 2 + 1 - 3) // 2 + 1


def rope(t):
    hd = D // H
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=dev).float() / hd))
    ang = torch.arange(t, device=dev).float()[:, None] * inv
    return ang.cos(), ang.sin()                       # (t, hd / 2) each


def rotate(x, cos, sin):                              # rotate-half rotary embedding on (B, H, T, hd)
    a, b = x.chunk(2, -1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


class FeedForward(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln, s.fc1, s.fc2, s.drop = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D), nn.Dropout(0.1)

    def forward(s, x):
        return s.drop(s.fc2(s.drop(F.silu(s.fc1(s.ln(x))))))


class SelfAttention(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln, s.qkv, s.out, s.drop = nn.LayerNorm(D), nn.Linear(D, 3 * D), nn.Linear(D, D), nn.Dropout(0.1)

    def forward(s, x, keep, cos, sin):                # keep: (B, 1, 1, T) bool, True at real frames
        b, t, _ = x.shape
        q, k, v = s.qkv(s.ln(x)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin).to(v.dtype), rotate(k, cos, sin).to(v.dtype)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=0.1 if s.training else 0.0)
        return s.drop(s.out(a.transpose(1, 2).reshape(b, t, D)))


class ConvModule(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln, s.pw1, s.pw2 = nn.LayerNorm(D), nn.Linear(D, 2 * D), nn.Linear(D, D)
        s.dw, s.bn, s.drop = nn.Conv1d(D, D, K, padding=K // 2, groups=D), nn.BatchNorm1d(D), nn.Dropout(0.1)

    def forward(s, x, pad):                           # pad: (B, T, 1) bool, True at padding frames
        y = F.glu(s.pw1(s.ln(x)), dim=-1).masked_fill(pad, 0.0)
        y = F.silu(s.bn(s.dw(y.transpose(1, 2)))).transpose(1, 2)
        return s.drop(s.pw2(y))


class ConformerBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.ff1, s.att, s.conv, s.ff2, s.ln = FeedForward(), SelfAttention(), ConvModule(), FeedForward(), nn.LayerNorm(D)

    def forward(s, x, keep, pad, cos, sin):
        x = x + 0.5 * s.ff1(x)
        x = x + s.att(x, keep, cos, sin)
        x = x + s.conv(x, pad)
        x = x + 0.5 * s.ff2(x)
        return s.ln(x)


class ConformerCTC(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1, s.conv2 = nn.Conv2d(1, SUBC, 3, 2), nn.Conv2d(SUBC, SUBC, 3, 2)
        s.proj, s.drop = nn.Linear(SUBC * sub_len(MEL), D), nn.Dropout(0.1)
        s.blocks, s.head = nn.ModuleList(ConformerBlock() for _ in range(L)), nn.Linear(D, V)

    def forward(s, feats, lens):                      # feats (B, T, 80), lens (B,) frames
        x = F.relu(s.conv2(F.relu(s.conv1(feats[:, None]))))          # (B, C, T', 19)
        b, c, t, f = x.shape
        x = s.drop(s.proj(x.transpose(1, 2).reshape(b, t, c * f)))
        olens = sub_len(lens)
        real = torch.arange(t, device=dev)[None] < olens[:, None]    # (B, T')
        keep, pad = real[:, None, None, :], ~real[..., None]
        cos, sin = rope(t)
        for blk in s.blocks:
            x = blk(x, keep, pad, cos, sin)
        return s.head(x), olens


def batches(n_utt):                                   # sort a pool of utterances by length, cut by the frame budget
    utts = []
    for _ in range(n_utt):
        sec = min(MAXS, max(1.0, rng.gammavariate(2.0, MEANS / 2)))
        f = int(sec * FPS)
        utts.append((f, rng.randint(max(1, f // 50), max(1, f // 25))))
    utts.sort()
    out, cur = [], []
    for u in utts:
        if cur and ((len(cur) + 1) * u[0] > BUDGET or len(cur) == MAXB):
            out.append(cur); cur = []
        cur.append(u)
    out.append(cur)
    rng.shuffle(out)
    return out


def make_batch(utts):
    lens = torch.tensor([f for f, _ in utts], device=dev)
    tlens = torch.tensor([n for _, n in utts], device=dev)
    t = max(f for f, _ in utts)
    feats = torch.randn(len(utts), t, MEL, device=dev)
    feats = feats.masked_fill((torch.arange(t, device=dev)[None] >= lens[:, None])[..., None], 0.0)
    targets = torch.randint(1, V, (sum(n for _, n in utts),), device=dev)
    return feats, lens, targets, tlens


def spec_augment(x, lens):                            # masks drawn on the device, per utterance
    b, t, nf = x.shape
    fr, tr = torch.arange(nf, device=dev), torch.arange(t, device=dev)
    f0 = torch.randint(0, nf, (b, 2, 1), device=dev)
    fw = torch.randint(0, 28, (b, 2, 1), device=dev)
    fmask = ((fr >= f0) & (fr < f0 + fw)).any(1)                      # (B, 80)
    t0 = (torch.rand(b, 4, 1, device=dev) * lens[:, None, None]).long()
    tw = (torch.rand(b, 4, 1, device=dev) * 0.05 * lens[:, None, None]).long()
    tmask = ((tr >= t0) & (tr < t0 + tw)).any(1)                      # (B, T)
    return x.masked_fill(fmask[:, None, :] | tmask[:, :, None], 0.0)


model = ConformerCTC().to(dev)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
opt = torch.optim.AdamW([dict(params=decay, weight_decay=1e-3), dict(params=no_decay, weight_decay=0.0)],
                        lr=1e-3, betas=(0.9, 0.98))
pool = batches(int(1.4 * steps * BUDGET / (MEANS * FPS)))
train = [pool[i % len(pool)] for i in range(steps)]
evals = rng.sample(batches(int(4 * BUDGET / (MEANS * FPS))), 2)


def lr_at(i):
    return 1e-3 * min((i + 1) / WARM, math.sqrt(WARM / (i + 1)))


def evaluate():
    model.eval()
    err = ref = hyp_tok = 0
    with torch.no_grad(), torch.autocast(device_type=kind, dtype=AMP):
        for utts in evals:
            feats, lens, targets, tlens = make_batch(utts)
            logits, olens = model(feats, lens)
            pred = logits.argmax(-1)                                  # (B, T')
            real = torch.arange(pred.shape[1], device=dev)[None] < olens[:, None]
            new = torch.ones_like(real)
            new[:, 1:] = pred[:, 1:] != pred[:, :-1]
            keep = real & new & (pred != 0)
            hyp = pred[keep]                                          # all hypotheses packed
            err += (keep.sum(1) - tlens).abs().sum().item(); ref += tlens.sum().item(); hyp_tok += hyp.numel()
    model.train()
    return err / ref, hyp_tok


for step, utts in enumerate(train):
    for g in opt.param_groups:
        g["lr"] = lr_at(step)
    feats, lens, targets, tlens = make_batch(utts)
    feats = spec_augment(feats, lens)
    with torch.autocast(device_type=kind, dtype=AMP):
        logits, olens = model(feats, lens)
        logp = logits.float().log_softmax(-1).transpose(0, 1)         # (T', B, V) float32
        loss = F.ctc_loss(logp, targets, olens, tlens, blank=0, zero_infinity=True)
    del logits, logp
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    if (step + 1) % every == 0:
        e, n = evaluate()
        print(f"step {step + 1}: ctc loss {loss.item():.3f} (batch {feats.shape[0]} x {feats.shape[1]} frames), "
              f"eval length error {e:.3f}, {n} hypothesis tokens")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
