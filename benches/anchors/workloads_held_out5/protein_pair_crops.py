"""An Evoformer-like protein trunk trained on random crops under bf16 autocast, AdamW (lr 1e-3 after a 10-step linear
warmup, weight decay 0.01, gradient clipping at 0.1), 64 optimizer steps of one crop each. Each step draws a crop
length L from 96..384 and an MSA depth S from 1..8 (row 0 is the target sequence: the single representation), so
the pair activations (L, L, c) change size every step and scale with L^2 (and the triangle attention with L^3).
Inputs: random residue types, an MSA of random substitutions of them with about 15% of its positions (a fixed count,
drawn by randperm) replaced by a mask token, and a random compact 3-D chain (a Gaussian random walk rescaled to a
radius of gyration of 2.2 L^0.38) whose pairwise distances, bucketed into 64 bins of 2..22 A, are the distogram
targets. Embedding: MSA (S, L, 256) from the MSA and residue tokens; pair (L, L, 128) from outer sums of residue
projections plus a clipped (+-32) relative-position embedding. Trunk: 4 blocks, each: row-wise gated self-attention
over residues (8 heads of 32) with an additive per-head bias projected from the pair; MSA transition (256 -> 1,024
-> 256); outer-product mean (32 x 32 channels per pair, an (L, L, 1,024) tensor projected to 128); triangle
multiplicative updates, outgoing ('ikc,jkc->ijc') and incoming ('kic,kjc->ijc'), with gated 128-channel
projections; triangle self-attention around the starting and the ending node (4 heads of 32, bias from the pair,
the ending one on the transposed pair), computed in chunks of rows; pair transition (128 -> 512 -> 128). Every
block is activation-checkpointed (torch.utils.checkpoint, use_reentrant=False), and in the grad-tracked pass each
64-row triangle-attention chunk is checkpointed again inside it, so only one chunk's (64, 4, L, L) logits live at a
time in the backward. Recycling: each step first runs 1..3 no-grad iterations of the whole trunk (triangle
attention in 32-row chunks, no checkpointing), each fed the previous one's single and pair representations through
layer norms; then the grad-tracked iteration with the last recycled ones. Losses: a float32 distogram
cross-entropy over all L x L pairs (symmetrised logits) plus a masked-MSA cross-entropy on the masked positions.
One progress line every 8 steps.
WL_DEVICE=cpu: widths 32 (single) and 16 (pair), 2 heads, 2 blocks, L 16..40, S 1..3, 6 steps, chunks 8 and 4."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(111); rng = random.Random(111)
if small:
    CS, CZ, HM, HT, CO, CT, NB, LMIN, LMAX, SMAX, steps, CH_G, CH_R, every = 32, 16, 2, 2, 8, 16, 2, 16, 40, 3, 6, 8, 4, 2
else:
    CS, CZ, HM, HT, CO, CT, NB, LMIN, LMAX, SMAX, steps, CH_G, CH_R, every = 256, 128, 8, 4, 32, 128, 4, 96, 384, 8, 64, 64, 32, 8
NBINS, NAA, MASK_TOK = 64, 20, 21                    # MSA tokens: 20 residues, 20 = gap, 21 = mask
kind, AMP = dev.split(":")[0], torch.bfloat16
edges = torch.linspace(2.0, 22.0, NBINS - 1, device=dev)


def attend(q, k, v, bias):                           # (n, H, Lq, d) x (n, H, Lk, d), bias (1, H, Lq, Lk)
    a = torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 + bias, -1)
    return a.to(v.dtype) @ v


class RowAttention(nn.Module):                       # gated self-attention along each MSA row, pair-biased
    def __init__(s):
        super().__init__()
        s.ln, s.lnz = nn.LayerNorm(CS), nn.LayerNorm(CZ)
        s.qkvg, s.bias, s.out = nn.Linear(CS, 4 * CS, bias=False), nn.Linear(CZ, HM, bias=False), nn.Linear(CS, CS)

    def forward(s, m, z):
        n, l, _ = m.shape
        q, k, v, g = s.qkvg(s.ln(m)).view(n, l, 4, HM, CS // HM).permute(2, 0, 3, 1, 4)
        bias = s.bias(s.lnz(z)).permute(2, 0, 1)[None]
        o = attend(q, k, v, bias) * torch.sigmoid(g)
        return s.out(o.permute(0, 2, 1, 3).reshape(n, l, CS))


class Transition(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.ln, s.fc1, s.fc2 = nn.LayerNorm(c), nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(s, x):
        return s.fc2(F.relu(s.fc1(s.ln(x))))


class OuterProductMean(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln, s.ab, s.out = nn.LayerNorm(CS), nn.Linear(CS, 2 * CO), nn.Linear(CO * CO, CZ)

    def forward(s, m):
        a, b = s.ab(s.ln(m)).chunk(2, -1)            # (S, L, CO) each
        o = torch.einsum("sic,sjd->ijcd", a, b) / m.shape[0]
        return s.out(o.reshape(o.shape[0], o.shape[1], CO * CO))


class TriangleMultiply(nn.Module):
    def __init__(s, outgoing):
        super().__init__()
        s.eq = "ikc,jkc->ijc" if outgoing else "kic,kjc->ijc"
        s.ln_in, s.proj, s.gate = nn.LayerNorm(CZ), nn.Linear(CZ, 4 * CT), nn.Linear(CZ, CZ)
        s.ln_out, s.out = nn.LayerNorm(CT), nn.Linear(CT, CZ)

    def forward(s, z):
        x = s.ln_in(z)
        pa, ga, pb, gb = s.proj(x).chunk(4, -1)
        t = torch.einsum(s.eq, pa * torch.sigmoid(ga), pb * torch.sigmoid(gb))
        return torch.sigmoid(s.gate(x)) * s.out(s.ln_out(t))


class TriangleAttention(nn.Module):
    def __init__(s, starting):
        super().__init__()
        s.starting = starting
        s.ln, s.qkvg = nn.LayerNorm(CZ), nn.Linear(CZ, 4 * CZ, bias=False)
        s.bias, s.out = nn.Linear(CZ, HT, bias=False), nn.Linear(CZ, CZ)

    def forward(s, z, chunk):
        if not s.starting:                           # around the ending node: the same on the transposed pair
            z = z.transpose(0, 1)
        x = s.ln(z)
        l = x.shape[0]
        q, k, v, g = s.qkvg(x).view(l, l, 4, HT, CZ // HT).permute(2, 0, 3, 1, 4)   # (rows, H, L, d)
        bias = s.bias(x).permute(2, 0, 1)[None]
        outs = []
        for i in range(0, l, chunk):                 # rows in chunks; each chunk checkpointed when tracking grads
            args = (q[i:i + chunk], k[i:i + chunk], v[i:i + chunk], bias)
            outs.append(checkpoint(attend, *args, use_reentrant=False) if torch.is_grad_enabled() else attend(*args))
        o = torch.cat(outs) * torch.sigmoid(g)
        o = s.out(o.permute(0, 2, 1, 3).reshape(l, l, CZ))
        return o if s.starting else o.transpose(0, 1)


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.row, s.m_tr, s.opm = RowAttention(), Transition(CS), OuterProductMean()
        s.tri_out, s.tri_in = TriangleMultiply(True), TriangleMultiply(False)
        s.att_start, s.att_end, s.z_tr = TriangleAttention(True), TriangleAttention(False), Transition(CZ)

    def forward(s, m, z, chunk):
        m = m + s.row(m, z)
        m = m + s.m_tr(m)
        z = z + s.opm(m)
        z = z + s.tri_out(z)
        z = z + s.tri_in(z)
        z = z + s.att_start(z, chunk)
        z = z + s.att_end(z, chunk)
        return m, z + s.z_tr(z)


class Trunk(nn.Module):
    def __init__(s):
        super().__init__()
        s.msa_emb, s.res_emb = nn.Embedding(MASK_TOK + 1, CS), nn.Embedding(NAA, CS)
        s.left, s.right, s.relpos = nn.Linear(CS, CZ), nn.Linear(CS, CZ), nn.Embedding(65, CZ)
        s.rec_m, s.rec_z = nn.LayerNorm(CS), nn.LayerNorm(CZ)
        s.blocks = nn.ModuleList(Block() for _ in range(NB))
        s.disto, s.msa_head = nn.Linear(CZ, NBINS), nn.Linear(CS, MASK_TOK)

    def forward(s, seq, msa, prev, chunk):
        l = seq.shape[0]
        r = s.res_emb(seq)
        m = s.msa_emb(msa) + r[None]
        pos = torch.arange(l, device=seq.device)
        z = s.left(r)[:, None] + s.right(r)[None] + s.relpos((pos[None] - pos[:, None]).clamp(-32, 32) + 32)
        if prev is not None:                         # recycled single and pair representations
            m = torch.cat([m[:1] + s.rec_m(prev[0])[None], m[1:]])
            z = z + s.rec_z(prev[1])
        for blk in s.blocks:
            if torch.is_grad_enabled():
                m, z = checkpoint(blk, m, z, chunk, use_reentrant=False)
            else:
                m, z = blk(m, z, chunk)
        return m, z


def crop(l, n):                                      # residues, masked MSA, mask positions and their tokens, bins
    seq = torch.randint(0, NAA, (l,), device=dev)
    msa = torch.where(torch.rand(n, l, device=dev) < 0.2, torch.randint(0, NAA + 1, (n, l), device=dev), seq[None])
    msa[0] = seq
    nmask = max(1, round(0.15 * n * l))
    where = torch.randperm(n * l, device=dev)[:nmask]
    true_tok = msa.view(-1)[where].clone()
    msa.view(-1)[where] = MASK_TOK
    x = torch.randn(l, 3, device=dev).cumsum(0)
    x = x - x.mean(0)
    x = x * (2.2 * l ** 0.38) / x.pow(2).sum(-1).mean().sqrt()
    bins = torch.bucketize(torch.cdist(x, x), edges)
    return seq, msa, where, true_tok, bins


model = Trunk().to(dev)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
opt = torch.optim.AdamW([dict(params=decay, weight_decay=0.01), dict(params=no_decay, weight_decay=0.0)],
                        lr=1e-3, betas=(0.9, 0.99), eps=1e-6)
for step in range(steps):
    for g in opt.param_groups:
        g["lr"] = 1e-3 * min(1.0, (step + 1) / 10)
    l, n, recycles = rng.randint(LMIN, LMAX), rng.randint(1, SMAX), rng.randint(1, 3)
    seq, msa, where, true_tok, bins = crop(l, n)
    prev = None
    with torch.no_grad(), torch.autocast(device_type=kind, dtype=AMP):
        for _ in range(recycles):
            m, z = model(seq, msa, prev, CH_R)
            prev = (m[0].float(), z.float())
            del m, z
    with torch.autocast(device_type=kind, dtype=AMP):
        m, z = model(seq, msa, prev, CH_G)
        logits = model.disto(z).float()
        logits = logits + logits.transpose(0, 1)
        dist_loss = F.cross_entropy(logits.reshape(-1, NBINS), bins.reshape(-1))
        msa_loss = F.cross_entropy(model.msa_head(m.reshape(-1, CS)[where]).float(), true_tok)
        loss = dist_loss + 0.5 * msa_loss
    del m, z, logits, prev
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    opt.step()
    if (step + 1) % every == 0:
        print(f"step {step + 1}: L {l}, S {n}, {recycles} recycles, distogram {dist_loss.item():.3f}, "
              f"masked MSA {msa_loss.item():.3f}")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
