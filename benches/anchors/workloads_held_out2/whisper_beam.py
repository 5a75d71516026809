"""Whisper-style speech recognition with beam search, fp16 weights, inference mode: for each of 6 utterances one
after the other, 4..30 s of random 16 kHz audio is turned into an 80-bin log-mel spectrogram on the device (torch.stft,
n_fft 400, hop 160, a mel filter matmul, log10, clamp, in float32: 400..3000 frames), then a front end of two Conv1d
(the second of stride 2, GELU) and a 12-block pre-norm transformer encoder (d 768, 12 heads, sinusoidal positions)
gives 200..1500 audio states, which are repeated for the 4 beams; a 4-block decoder (self-attention with a key/value
cache grown by torch.cat every token, cross-attention on keys/values computed once per utterance, 51,865-token
vocabulary tied to the embedding, learned positions) decodes 20..56 tokens after a 4-token prompt with beam search
(beam 4: the 4 best of the 4 x 51,865 summed log-probabilities every step, a few tokens suppressed, the token
sequences and every self-attention cache reordered with index_select). WL_DEVICE=cpu: a tiny model (d 64, 2+2
blocks, 1,000 tokens), 2 utterances of 60..200 frames, 4..8 tokens."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(31); rng = random.Random(31)
if small:
    D, H, LE, LD, V, utts, (flo, fhi), (tlo, thi) = 64, 4, 2, 2, 1000, 2, (60, 200), (4, 8)
else:
    D, H, LE, LD, V, utts, (flo, fhi), (tlo, thi) = 768, 12, 12, 4, 51865, 6, (400, 3000), (20, 56)
NM, BEAM, hd, dt, NPOS = 80, 4, D // H, torch.float16, 448


class Attn(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.o = nn.Linear(D, D), nn.Linear(D, D, bias=False), nn.Linear(D, D), nn.Linear(D, D)

    def heads(s, x):
        return x.view(x.shape[0], x.shape[1], H, hd).transpose(1, 2)

    def kv(s, x):
        return s.heads(s.k(x)), s.heads(s.v(x))

    def forward(s, x, kv=None, cache=None, causal=False):
        q = s.heads(s.q(x))
        if kv is not None:
            k, v = kv                                   # cross-attention: computed once per utterance
        else:
            k, v = s.kv(x)
            if cache is not None:                       # decoder self-attention: grow the cache
                if cache[0] is not None:
                    k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                cache[0], cache[1] = k, v
        a = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return s.o(a.transpose(1, 2).reshape(x.shape[0], x.shape[1], D))


def mlp():
    return nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))


class EncBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.attn, s.ln2, s.mlp = nn.LayerNorm(D), Attn(), nn.LayerNorm(D), mlp()

    def forward(s, x):
        x = x + s.attn(s.ln1(x))
        return x + s.mlp(s.ln2(x))


class DecBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.attn, s.ln2, s.cross, s.ln3, s.mlp = nn.LayerNorm(D), Attn(), nn.LayerNorm(D), Attn(), nn.LayerNorm(D), mlp()

    def forward(s, x, xkv, cache, causal):
        x = x + s.attn(s.ln1(x), cache=cache, causal=causal)
        x = x + s.cross(s.ln2(x), kv=xkv)
        return x + s.mlp(s.ln3(x))


class Whisper(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1, s.conv2 = nn.Conv1d(NM, D, 3, padding=1), nn.Conv1d(D, D, 3, stride=2, padding=1)
        s.enc, s.ln_enc = nn.ModuleList(EncBlock() for _ in range(LE)), nn.LayerNorm(D)
        s.tok, s.pos = nn.Embedding(V, D), nn.Embedding(NPOS, D)
        s.dec, s.ln_dec = nn.ModuleList(DecBlock() for _ in range(LD)), nn.LayerNorm(D)

    def encode(s, mel):                                 # mel: (1, NM, frames)
        x = F.gelu(s.conv2(F.gelu(s.conv1(mel)))).transpose(1, 2)
        T = x.shape[1]
        inv = torch.exp(-math.log(10000) / (D // 2 - 1) * torch.arange(D // 2, device=mel.device))
        t = torch.arange(T, device=mel.device)[:, None] * inv[None]
        x = x + torch.cat([t.sin(), t.cos()], 1).to(x.dtype)
        for b in s.enc:
            x = b(x)
        return s.ln_enc(x)

    def decode(s, tokens, offset, xkvs, caches):
        x = s.tok(tokens) + s.pos.weight[offset:offset + tokens.shape[1]]
        for b, xkv, c in zip(s.dec, xkvs, caches):
            x = b(x, xkv, c, causal=tokens.shape[1] > 1)
        return s.ln_dec(x[:, -1]) @ s.tok.weight.T   # (beams, V)


model = Whisper().to(dev, dt).eval()
window = torch.hann_window(400, device=dev)
fbank = torch.rand(NM, 201, device=dev) * (torch.rand(NM, 201, device=dev) < 0.05)   # sparse stand-in mel filters
prompt = torch.tensor([[V - 4, V - 3, V - 2, V - 1]], device=dev)                   # sot, language, task, notimestamps
suppress = torch.tensor(sorted(rng.sample(range(V - 100, V), 40)), device=dev)


def log_mel(audio):
    spec = torch.stft(audio, 400, 160, window=window, return_complex=True)[..., :-1]
    mel = fbank @ spec.abs() ** 2
    logm = mel.clamp(min=1e-10).log10()
    logm = torch.maximum(logm, logm.max() - 8.0)
    return ((logm + 4.0) / 4.0)[None]


results = []
with torch.inference_mode():
    for u in range(utts):
        frames, n_new = rng.randint(flo, fhi), rng.randint(tlo, thi)
        audio = torch.randn(frames * 160, device=dev) * 0.1
        mel = log_mel(audio).to(dt)
        xa = model.encode(mel).repeat_interleave(BEAM, 0)                  # (BEAM, frames/2, D)
        xkvs = [b.cross.kv(xa) for b in model.dec]
        del xa
        caches = [[None, None] for _ in range(LD)]
        tokens = prompt.repeat(BEAM, 1)
        scores = torch.full((BEAM,), float("-inf"), device=dev)
        scores[0] = 0.0                                                     # the beams start identical
        x, offset = tokens, 0
        for t in range(n_new):
            logp = model.decode(x, offset, xkvs, caches).float().log_softmax(-1)
            logp[:, suppress] = float("-inf")
            top = (scores[:, None] + logp).view(-1).topk(BEAM)
            src, tok, scores = top.indices // V, top.indices % V, top.values
            tokens = torch.cat([tokens.index_select(0, src), tok[:, None]], 1)
            for c in caches:                                                # reorder the caches by beam
                c[0], c[1] = c[0].index_select(0, src), c[1].index_select(0, src)
            offset, x = tokens.shape[1] - 1, tok[:, None]
        best = int((scores / tokens.shape[1]).argmax())
        results.append(tokens[best, prompt.shape[1]:].tolist())
        del caches, xkvs, tokens, logp
assert len(results) == utts
if dev.startswith("cuda"):
    torch.cuda.synchronize()
