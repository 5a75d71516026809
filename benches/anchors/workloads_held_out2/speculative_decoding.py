"""Speculative sampling with a draft and a target decoder, fp16, inference mode, batch 1: the target has 12 pre-norm
blocks (d 768, 12 heads), the draft 2 blocks (d 512, 8 heads), both a 32,000-token vocabulary and learned positions;
each keeps a per-layer key/value cache grown by torch.cat. For each of 3 prompts of 64..512 tokens (prefilled into
both models) 32..80 new tokens are generated in rounds: the draft proposes k = 4 tokens one forward at a time
(sampled at temperature 0.8), the target scores all of them in one forward of 5 tokens with a bottom-right causal
mask, the proposals are accepted while rand < p_target / p_draft, the first rejected one is resampled from the
normalised residual max(p_target - p_draft, 0) (or a bonus token drawn when all 4 pass), the sequence is grown by
torch.cat, and both models' caches are cut back to the accepted length by slicing and clone. WL_DEVICE=cpu: d 64 and
32, 2 and 1 blocks, 1,000 tokens, 2 prompts of 8..32, 6..12 new tokens."""
import os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(71); rng = random.Random(71)
if small:
    TGT, DRF, V, prompts, (plo, phi), (nlo, nhi) = (64, 4, 2), (32, 4, 1), 1000, 2, (8, 32), (6, 12)
else:
    TGT, DRF, V, prompts, (plo, phi), (nlo, nhi) = (768, 12, 12), (512, 8, 2), 32000, 3, (64, 512), (32, 80)
K, TEMP, dt = 4, 0.8, torch.float16


class Block(nn.Module):
    def __init__(s, D, H):
        super().__init__()
        s.D, s.H = D, H
        s.ln1, s.qkv, s.proj = nn.LayerNorm(D), nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.ln2, s.mlp = nn.LayerNorm(D), nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(s, x, cache):
        t = x.shape[1]
        q, k, v = s.qkv(s.ln1(x)).view(1, t, 3, s.H, s.D // s.H).permute(2, 0, 3, 1, 4)
        if cache[0] is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        cache[0], cache[1] = k, v
        n = k.shape[2]
        if t == 1:
            a = F.scaled_dot_product_attention(q, k, v)
        elif n == t:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:                                   # several new tokens after a cache: bottom-right causal mask
            mask = torch.ones(t, n, dtype=torch.bool, device=x.device).tril(n - t)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + s.proj(a.transpose(1, 2).reshape(1, t, s.D))
        return x + s.mlp(s.ln2(x))


class LM(nn.Module):
    def __init__(s, D, H, L):
        super().__init__()
        s.emb, s.pos = nn.Embedding(V, D), nn.Embedding(2048, D)
        s.blocks, s.lnf, s.head = nn.ModuleList(Block(D, H) for _ in range(L)), nn.LayerNorm(D), nn.Linear(D, V, bias=False)
        s.L = L

    def new_cache(s):
        return [[None, None] for _ in range(s.L)]

    def forward(s, ids, cache, start, last):   # ids: (t,) new tokens at positions start..; logits of the last `last`
        x = (s.emb(ids) + s.pos.weight[start:start + ids.shape[0]])[None]
        for b, c in zip(s.blocks, cache):
            x = b(x, c)
        return s.head(s.lnf(x[0, -last:]))

    @staticmethod
    def crop(cache, n):                         # cut a cache back to n positions (slice + clone frees the old one)
        for c in cache:
            c[0], c[1] = c[0][:, :, :n].clone(), c[1][:, :, :n].clone()


target, draft = LM(*TGT).to(dev, dt).eval(), LM(*DRF).to(dev, dt).eval()
accepted_total, rounds = 0, 0
with torch.inference_mode():
    for p in range(prompts):
        P, n_new = rng.randint(plo, phi), rng.randint(nlo, nhi)
        seq = torch.randint(3, V, (P,), device=dev)
        tc, dc = target.new_cache(), draft.new_cache()
        first = target(seq, tc, 0, 1).float().div(TEMP).softmax(-1)
        draft(seq, dc, 0, 1)
        seq = torch.cat([seq, torch.multinomial(first, 1)[0]])
        t_len = d_len = P                       # positions held in each cache; seq[-1] is in neither
        while seq.shape[0] < P + n_new:
            # draft: feed what it has not seen (1 or 2 tokens), then propose K tokens one at a time
            x, props, dprobs = seq[d_len:], [], []
            for i in range(K):
                q = draft(x, dc, d_len, 1).float().div(TEMP).softmax(-1)
                d_len += x.shape[0]
                x = torch.multinomial(q, 1)[0]
                props.append(x); dprobs.append(q[0])
            props, dprobs = torch.cat(props), torch.stack(dprobs)
            # target: one forward over its unseen tokens plus the K proposals
            tin = torch.cat([seq[t_len:], props])
            tp = target(tin, tc, t_len, K + 1).float().div(TEMP).softmax(-1)     # (K+1, V)
            t_len += tin.shape[0]
            ar = torch.arange(K, device=dev)
            ratio = tp[ar, props] / dprobs[ar, props]
            ok = (torch.rand(K, device=dev) < ratio).int().cumprod(0)
            n_acc = int(ok.sum())
            if n_acc < K:
                res = (tp[n_acc] - dprobs[n_acc]).clamp(min=0)
                res = res / res.sum() if float(res.sum()) > 0 else tp[n_acc]
                extra = torch.multinomial(res, 1)
            else:
                extra = torch.multinomial(tp[K], 1)
            seq = torch.cat([seq, props[:n_acc], extra])
            keep = seq.shape[0] - 1             # every accepted token but the newest is cached
            if t_len > keep:
                LM.crop(tc, keep); t_len = keep
            if d_len > keep:
                LM.crop(dc, keep); d_len = keep
            accepted_total += n_acc; rounds += 1
        del tc, dc, seq
assert rounds > 0
if dev.startswith("cuda"):
    torch.cuda.synchronize()
