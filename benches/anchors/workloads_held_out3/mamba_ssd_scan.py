"""A Mamba-2-style selective state-space language model in plain PyTorch, trained under bf16 autocast with AdamW
(gradient clipping) for 40 steps, then sampled with its recurrent state. 8 pre-norm Mamba-2 blocks (d 512, expand 2:
inner width 1,024 = 16 heads of 64, state size 64, one shared B/C group; an input projection to z, x, B, C and a
per-head dt; a depthwise causal Conv1d of width 4 with SiLU; a gated RMSNorm and an output projection), RMSNorm,
32,000-token embedding tied to the output. The scan is the chunked SSD form with chunks of 64: per chunk the (64 x 64)
decay matrix exp(segsum(dt*A)) in float32 for the intra-chunk (diagonal) outputs, each chunk's end state by a matmul,
then a Python loop over the chunks carries the (batch, 16, 64, 64) float32 state from chunk to chunk (one small
multiply-add per chunk, every intermediate state kept for backward and stacked for the off-diagonal outputs). Every
step holds 4,096 tokens: a sequence length drawn from 256, 512, 1024, 2048 and a batch of 4096 / length (so the number
of chunks per layer, 4..32, and every scan tensor's shape change every step); loss in float32 over the full logits.
After training, 2 sampling rounds in inference mode: a batch of 4 prompts of 256 or 512 tokens prefilled with the
chunked scan (which hands each layer's final state and last 3 conv inputs over), then 64 tokens sampled one at a time
(temperature 0.8) with the recurrent step: every layer's state updated by exp(dt*A) * state + dt * x * B and its conv
window rebuilt by torch.cat each token, so the decode holds a fixed-size state instead of a growing cache.
WL_DEVICE=cpu: d 64, 2 blocks, heads of 32, state 16, chunks of 16, 1,000 tokens, 256 tokens a step in sequences of
32..128, 3 steps, 1 round of 2 prompts and 6 tokens."""
import os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(81); rng = random.Random(81)
if small:
    D, L, N, P, Q, V, TOK, lens, steps = 64, 2, 16, 32, 16, 1000, 256, (32, 64, 128), 3
    rounds, gb, gps, gn = 1, 2, (32,), 6                       # sampling rounds, prompts, prompt lengths, new tokens
else:
    D, L, N, P, Q, V, TOK, lens, steps = 512, 8, 64, 64, 64, 32000, 4096, (256, 512, 1024, 2048), 40
    rounds, gb, gps, gn = 2, 4, (256, 512), 64
DI, K, kind = 2 * D, 4, dev.split(":")[0]
H = DI // P                                                    # 16 heads at full size


def segsum(a):                                                 # (..., l) -> (..., l, l): sum of a over (s, t]
    cs = a.cumsum(-1)
    keep = torch.ones(a.shape[-1], a.shape[-1], dtype=torch.bool, device=a.device).tril()
    return (cs[..., :, None] - cs[..., None, :]).masked_fill(~keep, float("-inf"))


def ssd(x, a, Bm, Cm):
    """Chunked scan. x (b,t,h,p) already times dt, a = dt*A (b,t,h), Bm/Cm (b,t,n) -> y (b,t,h,p), final state."""
    b, t, h, p = x.shape
    c = t // Q
    xh = x.view(b, c, Q, h, p).permute(0, 3, 1, 2, 4)           # b h c l p
    Bm, Cm = Bm.reshape(b, c, Q, N), Cm.reshape(b, c, Q, N)
    acs = a.float().view(b, c, Q, h).permute(0, 3, 1, 2).cumsum(-1)     # b h c l
    Lm = torch.exp(segsum(a.float().view(b, c, Q, h).permute(0, 3, 1, 2)))  # b h c l l
    y = ((Cm @ Bm.transpose(-1, -2))[:, None] * Lm) @ xh          # diagonal blocks: b h c l p
    decay = torch.exp(acs[..., -1:] - acs)
    states = (xh * decay[..., None]).transpose(-1, -2) @ Bm[:, None]   # b h c p n: each chunk's end state
    chunk_decay = torch.exp(acs[..., -1])                           # b h c
    st, prev = torch.zeros(b, h, p, N, device=x.device), []
    for i in range(c):                                             # the scan across chunks
        prev.append(st)
        st = st * chunk_decay[:, :, i, None, None] + states[:, :, i]
    prev = torch.stack(prev, 2)                                    # b h c p n: the state entering each chunk
    y = y + (Cm[:, None] @ prev.transpose(-1, -2)) * torch.exp(acs)[..., None]
    return y.permute(0, 2, 3, 1, 4).reshape(b, t, h, p), st


class Mamba2(nn.Module):
    def __init__(s):
        super().__init__()
        s.norm, s.inp = nn.RMSNorm(D, eps=1e-5), nn.Linear(D, 2 * DI + 2 * N + H, bias=False)
        s.conv = nn.Conv1d(DI + 2 * N, DI + 2 * N, K, groups=DI + 2 * N, padding=K - 1)
        s.dt_bias = nn.Parameter(torch.rand(H) * 2.3 - 4.6)       # softplus(dt_bias) ~ 0.01..0.1
        s.A_log = nn.Parameter(torch.log(torch.rand(H) * 15 + 1))
        s.Dskip = nn.Parameter(torch.ones(H))
        s.onorm, s.out = nn.RMSNorm(DI, eps=1e-5), nn.Linear(DI, D, bias=False)

    def forward(s, u):                                             # u (b,t,D) -> u', final state, conv tail
        b, t, _ = u.shape
        z, xbc, dt = s.inp(s.norm(u)).split([DI, DI + 2 * N, H], -1)
        tail = xbc[:, -(K - 1):].transpose(1, 2)
        xbc = F.silu(s.conv(xbc.transpose(1, 2))[..., :t].transpose(1, 2))
        x, Bm, Cm = xbc.split([DI, N, N], -1)
        dt = F.softplus(dt.float() + s.dt_bias)                     # b t h
        x = x.reshape(b, t, H, P)
        y, st = ssd(x * dt[..., None], dt * -torch.exp(s.A_log), Bm, Cm)
        y = y + x * s.Dskip[:, None]
        return u + s.out(s.onorm(y.reshape(b, t, DI) * F.silu(z))), st, tail

    def step(s, u, st, conv):                                      # one token: u (b,D), st (b,h,p,n), conv (b,c,K-1)
        z, xbc, dt = s.inp(s.norm(u)).split([DI, DI + 2 * N, H], -1)
        window = torch.cat([conv, xbc[:, :, None].to(conv.dtype)], -1)
        xbc = F.silu((window * s.conv.weight[:, 0]).sum(-1) + s.conv.bias)
        x, Bm, Cm = xbc.split([DI, N, N], -1)
        dt = F.softplus(dt.float() + s.dt_bias)                     # b h
        x = x.reshape(-1, H, P)
        dA = torch.exp(dt * -torch.exp(s.A_log))
        st = st * dA[..., None, None] + (x * dt[..., None])[..., None] * Bm[:, None, None]
        y = (st @ Cm[:, None, :, None]).squeeze(-1) + x * s.Dskip[:, None]
        return u + s.out(s.onorm(y.reshape(-1, DI) * F.silu(z))), st.float(), window[:, :, 1:]


class LM(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.layers, s.norm = nn.Embedding(V, D), nn.ModuleList(Mamba2() for _ in range(L)), nn.RMSNorm(D, eps=1e-5)

    def forward(s, ids):
        x, states = s.emb(ids), []
        for m in s.layers:
            x, st, tail = m(x)
            states.append((st, tail))
        return s.norm(x) @ s.emb.weight.T, states

    def logits_step(s, tok, states):
        x, new = s.emb(tok), []
        for m, (st, conv) in zip(s.layers, states):
            x, st, conv = m.step(x, st, conv)
            new.append((st, conv))
        return s.norm(x) @ s.emb.weight.T, new


model = LM().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)
for step in range(steps):
    T = rng.choice(lens)
    ids = torch.randint(0, V, (TOK // T, T + 1), device=dev)
    with torch.autocast(device_type=kind, dtype=torch.bfloat16):
        logits, _ = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, V), ids[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    del logits, loss

model.eval()
with torch.inference_mode(), torch.autocast(device_type=kind, dtype=torch.bfloat16):
    for r in range(rounds):
        prompt = torch.randint(0, V, (gb, rng.choice(gps)), device=dev)
        logits, states = model(prompt)                             # prefill with the chunked scan
        tok, out = logits[:, -1].float().div(0.8).softmax(-1).multinomial(1)[:, 0], []
        del logits
        for _ in range(gn):                                        # recurrent decode: fixed-size state per layer
            out.append(tok)
            logits, states = model.logits_step(tok, states)
            tok = logits.float().div(0.8).softmax(-1).multinomial(1)[:, 0]
        torch.stack(out, 1).cpu()
        del states, out
if dev.startswith("cuda"):
    torch.cuda.synchronize()
