"""A paged key/value-cache LLM server (vLLM-style scheduling, plain PyTorch attention) in bf16 inference mode: 160
requests arriving over time into a llama-style decoder with a fixed pool of cache blocks, prefix caching, chunked
prefill and preemption by recomputation.
Model: 16 blocks of d 1,024 (RMSNorm, 16 query heads and 8 key/value heads of 64 with rotary positions, SwiGLU MLP of
2,816, no biases), 32,000 tokens, embedding tied to the output: 222M parameters, built on the device in float32 and
cast to bf16 (443 MB).
Cache: per layer one key and one value pool of 1,792 blocks x 16 tokens x 8 heads x 64 (bf16, 28 MiB each, 896 MiB in
all), allocated once. Each request holds a Python list of block ids; new key/value rows are written by index_copy_
into the flattened pool at slot block x 16 + offset, and attention reads them back by gathering the pool with the
padded (batch, blocks) block table (pool[table] -> (batch, blocks x 16, 8, 64), a fresh tensor per layer whose length
follows the longest sequence in the batch), the 2 query heads of each key/value head folded into the query length, and
scaled_dot_product_attention with a boolean (key position <= query position) mask.
Requests (160, arrival gaps drawn from an exponential of mean 5 scheduler iterations): 50% share one of 4 system
prompts (200, 384, 640 or 1,000 tokens) followed by 16..320 tokens of their own, 40% are unique prompts of 32..768
tokens, 10% are long prompts of 2,048..6,144 tokens; each asks for 16 + Exp(mean 120) new tokens (at most 512),
sampled at temperature 0.7..1.0 with top-p 0.9 (a full sort of the (batch, 32,000) float32 logits).
Scheduler, one iteration at a time: arrived requests are admitted first come first served while fewer than 32 are
running and enough blocks are free or evictable; full blocks are looked up in a prefix cache keyed by the hash chain
of their tokens, and matched blocks are shared (reference counts) instead of recomputed; then at most one prefill
chunk of up to 1,024 tokens (the oldest request still prefilling; long prompts take several iterations), whose last
token's logits give the request's first new token; then one decode step for every request past its prefill. Blocks are
taken as a sequence crosses a 16-token boundary; a finished request releases its blocks, and blocks whose contents are
in the prefix cache stay evictable (least recently used first) until the free list runs out. When no block can be had,
the most recently admitted request is preempted: its blocks are released and it goes back to the head of the queue
with its prompt and generated tokens, to be prefilled again.
Hand estimate of the peak at full size: weights 0.44 GB (0.89 GB in float32 while being built) + cache pools 0.94 GB +
per-layer gathers (keys and values, 32 x up to about 6,000 positions x 8 x 64 x 2 B: up to 0.4 GB a layer) + logits,
sort and mask of a few tens of MB: about 1.9 GB. GPU time about 10 s (a dry run of the scheduler at full size: 1,054
iterations, each a decode forward of 16 layers, 224 of them with a prefill chunk too; 10 preemptions; launch-bound).
What it adds: a cache that never grows or shrinks (one fixed pool, in contrast to the per-request or per-token caches
of the earlier decoding workloads), with the attention's working set a per-layer gathered copy whose size follows the
batch's longest context at each iteration; prefill chunks of a fixed size alternating with decode steps of a drifting
batch; shared prefixes that skip prefill work; and preemptions that make a request's prefill run again later.
WL_DEVICE=cpu: d 64, 4 query and 2 key/value heads, 2 blocks, 512 tokens, blocks of 4 tokens, 64 blocks, at most 6
running, chunks of 32, 16 requests of up to 48 (long 96..160) prompt tokens and up to 24 new tokens."""
import collections, math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(123); rng = random.Random(123)
if small:
    D, H, KVH, L, V, FF, BS, NBLK, MAXRUN, CHUNK, NREQ, GAP = 64, 4, 2, 2, 512, 172, 4, 64, 6, 32, 16, 2.0
    SYS, OWN, UNIQ, LONG, NEW_MIN, NEW_MEAN, NEW_MAX = (8, 20, 28, 36), (4, 12), (8, 48), (96, 160), 4, 6, 24
else:
    D, H, KVH, L, V, FF, BS, NBLK, MAXRUN, CHUNK, NREQ, GAP = 1024, 16, 8, 16, 32000, 2816, 16, 1792, 32, 1024, 160, 5.0
    SYS, OWN, UNIQ, LONG, NEW_MIN, NEW_MEAN, NEW_MAX = \
        (200, 384, 640, 1000), (16, 320), (32, 768), (2048, 6144), 16, 120, 512
HD, G = D // H, H // KVH
MAXPOS = LONG[1] + NEW_MAX + BS
DT = torch.bfloat16


class RMSNorm(nn.Module):
    def __init__(s):
        super().__init__()
        s.w = nn.Parameter(torch.ones(D))

    def forward(s, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * s.w


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.n1, s.n2 = RMSNorm(), RMSNorm()
        s.qkv, s.o = nn.Linear(D, (H + 2 * KVH) * HD, bias=False), nn.Linear(D, D, bias=False)
        s.w13, s.w2 = nn.Linear(D, 2 * FF, bias=False), nn.Linear(FF, D, bias=False)


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = nn.Embedding(V, D)
        nn.init.normal_(s.emb.weight, std=0.02)
        s.layers = nn.ModuleList(Layer() for _ in range(L))
        s.norm = RMSNorm()


with torch.device(dev):
    model = Model()
model = model.to(DT).eval()
inv = 1.0 / 10000 ** (torch.arange(0, HD, 2, device=dev).float() / HD)
ang = torch.arange(MAXPOS, device=dev).float()[:, None] * inv
COS, SIN = ang.cos().to(DT), ang.sin().to(DT)
k_pool = [torch.zeros(NBLK, BS, KVH, HD, device=dev, dtype=DT) for _ in range(L)]
v_pool = [torch.zeros(NBLK, BS, KVH, HD, device=dev, dtype=DT) for _ in range(L)]


def rope(x, cos, sin):                               # x (B, c, heads, HD); cos, sin (B, c, HD / 2)
    x1, x2 = x.chunk(2, -1)
    c, s_ = cos[:, :, None], sin[:, :, None]
    return torch.cat([x1 * c - x2 * s_, x2 * c + x1 * s_], -1)


def forward(tokens, pos, slots, table):
    """tokens, pos (B, c) int64; slots (B * c,) flat cache slots; table (B, nb) block ids. Returns the last
    position's hidden state per sequence (B, D)."""
    b, c = tokens.shape
    nb = table.shape[1]
    x = model.emb(tokens)
    cos, sin = COS[pos], SIN[pos]
    keypos = torch.arange(nb * BS, device=dev)
    mask = (keypos[None, None] <= pos[:, :, None])                       # (B, c, keys)
    mask = mask[:, None].expand(b, G, c, nb * BS).reshape(b, 1, G * c, nb * BS)
    for l, ly in enumerate(model.layers):
        q, k, v = ly.qkv(ly.n1(x)).view(b, c, H + 2 * KVH, HD).split([H, KVH, KVH], 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k_pool[l].view(-1, KVH, HD).index_copy_(0, slots, k.reshape(-1, KVH, HD))
        v_pool[l].view(-1, KVH, HD).index_copy_(0, slots, v.reshape(-1, KVH, HD))
        kk = k_pool[l][table].view(b, nb * BS, KVH, HD).transpose(1, 2)  # (B, KVH, keys, HD)
        vv = v_pool[l][table].view(b, nb * BS, KVH, HD).transpose(1, 2)
        qq = q.view(b, c, KVH, G, HD).permute(0, 2, 3, 1, 4).reshape(b, KVH, G * c, HD)
        a = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask)
        a = a.view(b, KVH, G, c, HD).permute(0, 3, 1, 2, 4).reshape(b, c, D)
        x = x + ly.o(a)
        g, u = ly.w13(ly.n2(x)).chunk(2, -1)
        x = x + ly.w2(F.silu(g) * u)
    return model.norm(x[:, -1])


def sample(h, temps):                                # top-p 0.9 sampling; returns a list of token ids
    logits = (h @ model.emb.weight.T).float() / temps[:, None]
    sorted_l, idx = logits.sort(-1, descending=True)
    probs = sorted_l.softmax(-1)
    drop = probs.cumsum(-1) - probs > 0.9
    probs = probs.masked_fill(drop, 0.0)
    pick = torch.multinomial(probs, 1)
    return idx.gather(1, pick)[:, 0].tolist()


class Req:
    def __init__(s, i, arrive, prompt, new, temp):
        s.i, s.arrive, s.toks, s.plen, s.new, s.temp = i, arrive, prompt, len(prompt), new, temp
        s.blocks, s.keys, s.ncomp, s.prefilled = [], [], 0, False


def rand_tokens(n):
    return [rng.randrange(V) for _ in range(n)]


sys_prompts = [rand_tokens(n) for n in SYS]
reqs, t = [], 0.0
for i in range(NREQ):
    t += rng.expovariate(1.0 / GAP)
    u = rng.random()
    if u < 0.5:
        prompt = list(rng.choice(sys_prompts)) + rand_tokens(rng.randint(*OWN))
    elif u < 0.9:
        prompt = rand_tokens(rng.randint(*UNIQ))
    else:
        prompt = rand_tokens(rng.randint(*LONG))
    new = min(NEW_MAX, int(NEW_MIN + rng.expovariate(1.0 / NEW_MEAN)))
    reqs.append(Req(i, int(t), prompt, new, rng.uniform(0.7, 1.0)))

# block manager: free list, reference counts, prefix cache (hash chain -> block), evictable cached blocks (LRU)
free = collections.deque(range(NBLK))
refs = [0] * NBLK
block_key = [None] * NBLK
prefix = {}
evictable = collections.OrderedDict()
stats = collections.Counter()


def take_block():
    if free:
        b = free.popleft()
    elif evictable:
        b, key = evictable.popitem(last=False)
        del prefix[key]
        block_key[b] = None
        stats["evicted"] += 1
    else:
        return None
    refs[b] = 1
    return b


def release(r):
    for b in r.blocks:
        refs[b] -= 1
        if refs[b] == 0:
            if block_key[b] is not None:
                evictable[b] = block_key[b]
            else:
                free.append(b)
    r.blocks, r.keys, r.ncomp, r.prefilled = [], [], 0, False


def chain(r, j):                                     # hash-chain key of r's full block j
    return hash((r.keys[j - 1] if j else -1, tuple(r.toks[j * BS:(j + 1) * BS])))


def register_full_blocks(r):
    while len(r.keys) < r.ncomp // BS:
        j = len(r.keys)
        key = chain(r, j)
        r.keys.append(key)
        b = r.blocks[j]
        if key not in prefix and block_key[b] is None:
            prefix[key], block_key[b] = b, key


def try_admit(r):
    matched = []
    for j in range((len(r.toks) - 1) // BS):
        key = hash((matched[-1][1] if matched else -1, tuple(r.toks[j * BS:(j + 1) * BS])))
        if key not in prefix:
            break
        matched.append((prefix[key], key))
    need = -(-len(r.toks) // BS) - len(matched) + 1
    avail = len(free) + len(evictable) - sum(1 for b, _ in matched if refs[b] == 0)
    if avail < need:
        return False
    for b, key in matched:
        if refs[b] == 0:
            evictable.pop(b)
        refs[b] += 1
        r.blocks.append(b); r.keys.append(key)
    r.ncomp = len(matched) * BS
    stats["prefix_hit_tokens"] += r.ncomp
    return True


def ensure_blocks(r, upto, running):
    """Gives r blocks for positions < upto, preempting the most recently admitted others (or r) if needed.
    Returns False if r itself was preempted."""
    while len(r.blocks) * BS < upto:
        b = take_block()
        if b is None:
            victim = running[-1]
            running.remove(victim)
            release(victim)
            waiting.appendleft(victim)
            stats["preempted"] += 1
            if victim is r:
                return False
            continue
        r.blocks.append(b)
    return True


def table_tensor(rs):
    nb = max(len(r.blocks) for r in rs)
    return torch.tensor([r.blocks + [0] * (nb - len(r.blocks)) for r in rs], device=dev)


def slot(r, p):
    return r.blocks[p // BS] * BS + p % BS


waiting, running, done = collections.deque(), [], []
it, nxt, gen_tokens, max_batch, max_keys = 0, 0, 0, 0, 0
with torch.inference_mode():
    while nxt < NREQ or waiting or running:
        while nxt < NREQ and reqs[nxt].arrive <= it:
            waiting.append(reqs[nxt]); nxt += 1
        while waiting and len(running) < MAXRUN and try_admit(waiting[0]):
            running.append(waiting.popleft())
        pre = next((r for r in running if not r.prefilled), None)
        if pre is not None:                          # one prefill chunk
            a = pre.ncomp
            c = min(CHUNK, len(pre.toks) - a)
            if ensure_blocks(pre, a + c, running):
                pos = torch.arange(a, a + c, device=dev)[None]
                toks = torch.tensor(pre.toks[a:a + c], device=dev)[None]
                slots = torch.tensor([slot(pre, p) for p in range(a, a + c)], device=dev)
                h = forward(toks, pos, slots, table_tensor([pre]))
                pre.ncomp = a + c
                register_full_blocks(pre)
                stats["prefill_chunks"] += 1
                if pre.ncomp == len(pre.toks):
                    pre.toks.append(sample(h, torch.tensor([pre.temp], device=dev))[0])
                    pre.prefilled = True
                    gen_tokens += 1
        dec = []
        for r in list(running):                      # decode: each needs a slot at position len(toks) - 1
            if r in running and r.prefilled and len(r.toks) - r.plen < r.new:
                if ensure_blocks(r, len(r.toks), running):
                    dec.append(r)
        dec = [r for r in dec if r in running]
        if dec:
            p = [len(r.toks) - 1 for r in dec]
            toks = torch.tensor([[r.toks[-1]] for r in dec], device=dev)
            pos = torch.tensor(p, device=dev)[:, None]
            slots = torch.tensor([slot(r, q) for r, q in zip(dec, p)], device=dev)
            table = table_tensor(dec)
            max_batch, max_keys = max(max_batch, len(dec)), max(max_keys, table.shape[1] * BS)
            new = sample(forward(toks, pos, slots, table), torch.tensor([r.temp for r in dec], device=dev))
            for r, tk in zip(dec, new):
                r.ncomp += 1
                r.toks.append(tk)
                register_full_blocks(r)
            gen_tokens += len(dec)
            stats["decode_steps"] += 1
        for r in [r for r in running if r.prefilled and len(r.toks) - r.plen >= r.new]:
            running.remove(r)
            release(r)
            done.append(r)
        it += 1
print(f"{len(done)} requests in {it} iterations: {gen_tokens} tokens generated ({stats['decode_steps']} decode steps, "
      f"batch up to {max_batch}, up to {max_keys} keys), {stats['prefill_chunks']} prefill chunks, "
      f"{stats['prefix_hit_tokens']} prompt tokens from the prefix cache, {stats['preempted']} preemptions, "
      f"{stats['evicted']} cached blocks evicted")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
