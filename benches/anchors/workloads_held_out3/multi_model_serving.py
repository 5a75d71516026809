"""A multi-model inference server, fp16 weights, 120 requests one after the other, each under inference mode. Three
models are registered on the host: a text embedder (30,522-token embedding, learned positions, nn.TransformerEncoder
of 6 post-norm layers, d 768, 12 heads, in eval mode so that the fused fast path runs and the padded batch goes
through it as a nested tensor via src_key_padding_mask; mean-pooled, L2-normalised), an image classifier (a
ResNet-18-shaped conv net with batch norm, 1,000 classes) and a candidate scorer (a 12-block pre-norm causal decoder,
d 1024, 16 heads, 50,257-token tied vocabulary: the log-likelihood of each candidate, from float32 log-softmax of its
logits gathered at the next tokens). At most two models are on the device at once: a request for a third evicts the
least recently used one (model.to("cpu"), its weights freed) and loads the requested one (model.to(device), parameter
by parameter), outside inference mode, followed by torch.cuda.empty_cache(); the server also calls
torch.cuda.empty_cache() after every 16th request (with these seeds: 21 loads, 18 of them after an eviction).
Requests: the mix of kinds shifts every 40 requests (mostly embed, then mostly classify, then mostly score, each with
the other two mixed in); embed: 1..64 texts of 8..512 tokens each, padded to the longest; classify: 1..32 images at a
side of 128..448 (multiples of 32); score: 1..8 candidates of 32..384 tokens, right-padded. Each result is copied to
the host. WL_DEVICE=cpu: float32, widths 64 / 16 / 64, 2 layers / 2 stages / 2 blocks, 1,000-token vocabularies, 12
requests (kinds shifting every 4) with lengths and sides divided by 8."""
import os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(85); rng = random.Random(85)
if small:       # (width, layers, vocabulary) of the embedder, (width, stages) of the classifier, scorer as embedder
    (ED, EL, EV), (CW, CS), (SD, SL, SV) = (64, 2, 1000), (16, 2), (64, 2, 1000)
    n_req, phase, scale, dt = 12, 4, 8, torch.float32
else:
    (ED, EL, EV), (CW, CS), (SD, SL, SV) = (768, 6, 30522), (64, 4), (1024, 12, 50257)
    n_req, phase, scale, dt = 120, 40, 1, torch.float16


class Embedder(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.pos = nn.Embedding(EV, ED), nn.Embedding(512, ED)
        s.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(ED, max(2, ED // 64), 4 * ED, 0.0, batch_first=True), EL)

    def forward(s, ids, pad):
        h = s.enc(s.emb(ids) + s.pos.weight[: ids.shape[1]], src_key_padding_mask=pad)   # nested-tensor fast path
        h = h.masked_fill(pad[..., None], 0).sum(1) / (~pad).sum(1, keepdim=True)
        return F.normalize(h.float(), dim=-1)


def basic(cin, c, stride):
    body = nn.Sequential(nn.Conv2d(cin, c, 3, stride, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(True),
                         nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c))
    short = nn.Identity() if stride == 1 and cin == c else nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False),
                                                                         nn.BatchNorm2d(c))
    return body, short


class Classifier(nn.Module):
    def __init__(s):
        super().__init__()
        s.stem = nn.Sequential(nn.Conv2d(3, CW, 7, 2, 3, bias=False), nn.BatchNorm2d(CW), nn.ReLU(True), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], CW
        for i in range(CS):
            for j in range(2):
                blocks.append(nn.ModuleList(basic(cin, CW * 2 ** i, 2 if (i and not j) else 1)))
                cin = CW * 2 ** i
        s.blocks, s.fc = nn.ModuleList(blocks), nn.Linear(cin, 1000)

    def forward(s, x):
        x = s.stem(x)
        for body, short in s.blocks:
            x = F.relu(body(x) + short(x))
        return s.fc(x.mean((2, 3))).float().softmax(-1).topk(5, -1)


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.qkv, s.o = nn.LayerNorm(SD), nn.Linear(SD, 3 * SD), nn.Linear(SD, SD)
        s.n2, s.mlp = nn.LayerNorm(SD), nn.Sequential(nn.Linear(SD, 4 * SD), nn.GELU(), nn.Linear(4 * SD, SD))

    def forward(s, x):
        b, t, _ = x.shape
        q, k, v = s.qkv(s.n1(x)).view(b, t, 3, SD // 64, 64).permute(2, 0, 3, 1, 4)
        x = x + s.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, SD))
        return x + s.mlp(s.n2(x))


class Scorer(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.pos = nn.Embedding(SV, SD), nn.Embedding(512, SD)
        s.blocks, s.norm = nn.ModuleList(Block() for _ in range(SL)), nn.LayerNorm(SD)

    def forward(s, ids, lens):
        x = s.emb(ids) + s.pos.weight[: ids.shape[1]]
        for b in s.blocks:
            x = b(x)
        logp = (s.norm(x[:, :-1]) @ s.emb.weight.T).float().log_softmax(-1)
        tok = logp.gather(-1, ids[:, 1:, None])[..., 0]
        keep = torch.arange(1, ids.shape[1], device=ids.device)[None] < lens[:, None]
        return (tok * keep).sum(1)


models = {"embed": Embedder(), "classify": Classifier(), "score": Scorer()}
for m in models.values():
    m.to(dt).eval()                                          # host copies, fp16
resident = []                                                # names on the device, least recently used first


def acquire(name):
    if name in resident:
        resident.remove(name)
    else:
        if len(resident) == 2:                               # evict the least recently used model
            models[resident.pop(0)].to("cpu")
        models[name].to(dev)
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()
    resident.append(name)
    return models[name]


def padded(lens, vocab):
    ids = torch.zeros(len(lens), max(lens), dtype=torch.long)
    for i, l in enumerate(lens):
        ids[i, :l] = torch.randint(1, vocab, (l,))
    return ids.to(dev), torch.tensor(lens).to(dev)


mixes = [(6, 2, 1), (1, 6, 2), (2, 1, 6)]
for r in range(n_req):
    kind = rng.choices(["embed", "classify", "score"], weights=mixes[(r // phase) % 3])[0]
    m = acquire(kind)                                        # loads and evictions run outside inference mode
    with torch.inference_mode():
        if kind == "embed":
            ids, lens = padded([rng.randint(8, 512) // scale for _ in range(rng.randint(1, 64))], EV)
            out = m(ids, torch.arange(ids.shape[1], device=dev)[None] >= lens[:, None])
        elif kind == "classify":
            side = rng.randrange(128, 449, 32) // scale
            out = m(torch.randn(rng.randint(1, 32), 3, side, side, device=dev, dtype=dt))[1]
        else:
            ids, lens = padded([rng.randint(32, 384) // scale for _ in range(rng.randint(1, 8))], SV)
            out = m(ids, lens)
        out.cpu()
        del out
    if r % 16 == 15 and dev.startswith("cuda"):
        torch.cuda.empty_cache()
if dev.startswith("cuda"):
    torch.cuda.synchronize()
