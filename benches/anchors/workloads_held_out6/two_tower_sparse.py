"""Two-tower retrieval recommender trained with in-batch and mixed random negatives, sparse embedding gradients and
SparseAdam, float32, 400 steps of 8,192 (user, next item) pairs, with a full-corpus top-100 retrieval eval every 100
steps.
Tables (float32, on the device): user ids 1,000,000 x 64 (nn.Embedding, sparse=True), item ids 2,000,000 x 64 (one
table shared by the item tower's nn.Embedding lookup and the user tower's history bag through F.embedding_bag, both
sparse, so its gradient is the sum of two sparse gradients), query terms 500,000 x 32 (nn.EmbeddingBag mode 'mean',
sparse), item categories 10,000 x 32 (sparse); per-user dense features (1M x 16) and per-item dense features (2M x 8)
as fixed device tensors read by index.
Batch, made on the device: users uniform; each user prefers one of 1,000 item clusters (item id mod 1,000); item
popularity is Zipfian (weight of rank r proportional to r^-1.05 over a random item order, by searchsorted into a
float64 CDF); the next item is from the user's cluster with probability 0.5, else popular; a history of 1..200 items
(log-uniform length, mean about 38, about 310k ids a batch; each from the cluster with probability 0.5) pooled by
embedding_bag mode 'sum' with per_sample_weights 0.95^age (offsets from the lengths); 1..12 query terms pooled by
their mean.
Towers: user [id 64, history 64, terms 32, dense 16] -> 512 -> 256 -> 128, item [id 64, category 32, dense 8] -> 512
-> 256 -> 128, ReLU MLPs, L2-normalised outputs. Candidates: the 8,192 next items plus M uniform random items, M drawn
per step from 0, 1,024, 4,096, 4,096; logits (8,192, 8,192 + M) / 0.05 minus the log sampling probability of each
candidate (in-batch items from a streaming frequency estimator: two 2^21-entry hashed arrays of last-seen step and
mean gap, updated by index_put_ every step; random ones log(M / 2M)); duplicates of a row's positive among the
in-batch columns masked out; cross-entropy on the diagonal. SparseAdam (lr 0.01) for the four tables (it coalesces
each sparse gradient: sort, unique, segment sum), Adam (lr 1e-3) for the MLPs.
Eval (no grad) after steps 100, 200, 300, 400: item embeddings of the whole 2M corpus in chunks of 131,072 into a (2M,
128) float32 buffer, then 4,096 fresh users scored in 4 chunks of 1,024 against item chunks of 131,072 ((1,024,
131,072) float32 scores), a running top-100 merged by torch.topk over the concatenation of the running and the chunk's
top 100; recall@100 of the held-out next item.
Hand estimate of the peak at full size: tables 0.83 GB, SparseAdam's two dense state tensors per table 1.66 GB,
feature stores 0.13 GB (2.6 GB resident); training adds the (8,192, 12,288) float32 logits, their softmax and gradient
(0.4 GB each), the 8,192 x 8,192 duplicate mask and about 0.1 GB of sparse gradient values and their coalesced copies:
about 4.5 GB; the eval adds the 1 GB corpus buffer and a 0.5 GB score chunk: about 4.3 GB. GPU time about 6 s.
What it adds: sparse gradients whose row counts follow the batch's history lengths, one of them the sum of two sparse
gradients, coalesced by SparseAdam against dense state tensors twice the size of the tables; per_sample_weights in an
embedding bag; a logits matrix whose width changes with the number of mixed negatives; in-place index_put_ updates of
hashed statistics; and a corpus-wide embedding buffer with a running top-k merge.
WL_DEVICE=cpu: 2,000 users, 5,000 items in 50 clusters, 1,000 terms, 50 categories, batches of 256 with 0, 64 or 128
random negatives, histories of 1..20, 8 steps, eval after steps 4 and 8 with 128 users, chunks of 1,024 items and 64
users."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(125); rng = random.Random(125)
if small:
    NU, NI, NT, NCAT, NCLUS, B, NEGS, HMAX, steps, eval_every, NEVAL, ICH, UCH, HASH = \
        2000, 5000, 1000, 50, 50, 256, (0, 64, 128, 128), 20, 8, 4, 128, 1024, 64, 1 << 12
else:
    NU, NI, NT, NCAT, NCLUS, B, NEGS, HMAX, steps, eval_every, NEVAL, ICH, UCH, HASH = \
        1_000_000, 2_000_000, 500_000, 10_000, 1000, 8192, (0, 1024, 4096, 4096), 200, 400, 100, 4096, 131_072, 1024, \
        1 << 21
TEMP, OUT = 0.05, 128

user_emb = nn.Embedding(NU, 64, sparse=True).to(dev)
item_emb = nn.Embedding(NI, 64, sparse=True).to(dev)
term_bag = nn.EmbeddingBag(NT, 32, mode="mean", sparse=True).to(dev)
cat_emb = nn.Embedding(NCAT, 32, sparse=True).to(dev)
for t in (user_emb, item_emb, term_bag, cat_emb):
    nn.init.normal_(t.weight, std=0.05)
user_mlp = nn.Sequential(nn.Linear(176, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, OUT)).to(dev)
item_mlp = nn.Sequential(nn.Linear(104, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, OUT)).to(dev)
user_dense = torch.randn(NU, 16, device=dev)
item_dense = torch.randn(NI, 8, device=dev)
w = torch.arange(1, NI + 1, device=dev, dtype=torch.float64).pow(-1.05)
item_cdf = w.cumsum(0); item_cdf /= item_cdf[-1].clone()
item_order = torch.randperm(NI, device=dev)
del w
last_seen = torch.zeros(HASH, device=dev)
gap = torch.full((HASH,), float(NI) / B, device=dev)
sparse_opt = torch.optim.SparseAdam([user_emb.weight, item_emb.weight, term_bag.weight, cat_emb.weight], lr=0.01)
dense_opt = torch.optim.Adam(list(user_mlp.parameters()) + list(item_mlp.parameters()), lr=1e-3)


def popular(n):
    return item_order[torch.searchsorted(item_cdf, torch.rand(n, device=dev, dtype=torch.float64)).clamp_(max=NI - 1)]


def from_cluster(c):
    return c + NCLUS * torch.randint(0, NI // NCLUS, c.shape, device=dev)


def users_batch(n):
    """Users, their next item, and the history / term bags (ids, offsets, weights)."""
    u = torch.randint(0, NU, (n,), device=dev)
    pref = (u * 7919) % NCLUS
    nxt = torch.where(torch.rand(n, device=dev) < 0.5, from_cluster(pref), popular(n))
    hl = torch.exp(torch.rand(n, device=dev) * math.log(HMAX)).long().clamp_(1, HMAX)
    owner = torch.repeat_interleave(torch.arange(n, device=dev), hl)
    hoff = hl.cumsum(0) - hl
    age = torch.arange(owner.numel(), device=dev) - hoff[owner]
    hist = torch.where(torch.rand(owner.numel(), device=dev) < 0.5, from_cluster(pref[owner]), popular(owner.numel()))
    tl = torch.randint(1, 13, (n,), device=dev)
    terms = torch.randint(0, NT, (int(tl.sum().item()),), device=dev)
    return u, nxt, hist, hoff, 0.95 ** age.float(), terms, tl.cumsum(0) - tl


def user_tower(u, hist, hoff, hw, terms, toff):
    h = F.embedding_bag(hist, item_emb.weight, hoff, mode="sum", per_sample_weights=hw, sparse=True)
    x = torch.cat([user_emb(u), h, term_bag(terms, toff), user_dense[u]], 1)
    return F.normalize(user_mlp(x), dim=1)


def item_tower(items):
    x = torch.cat([item_emb(items), cat_emb(items % NCAT), item_dense[items]], 1)
    return F.normalize(item_mlp(x), dim=1)


@torch.no_grad()
def evaluate():
    corpus = torch.empty(NI, OUT, device=dev)
    for a in range(0, NI, ICH):
        corpus[a:a + ICH] = item_tower(torch.arange(a, min(NI, a + ICH), device=dev))
    hits = 0
    for _ in range(0, NEVAL, UCH):
        u, nxt, *bags = users_batch(UCH)
        q = user_tower(u, *bags)
        best_s = torch.full((UCH, 100), -float("inf"), device=dev)
        best_i = torch.zeros(UCH, 100, dtype=torch.long, device=dev)
        for a in range(0, NI, ICH):
            s = q @ corpus[a:a + ICH].T
            ts, ti = s.topk(100, 1)
            del s
            cs, ci = torch.cat([best_s, ts], 1), torch.cat([best_i, ti + a], 1)
            best_s, pick = cs.topk(100, 1)
            best_i = ci.gather(1, pick)
        hits += (best_i == nxt[:, None]).any(1).sum().item()
    return hits / NEVAL


losses, recalls, max_hist = [], [], 0
for step in range(steps):
    u, nxt, hist, hoff, hw, terms, toff = users_batch(B)
    max_hist = max(max_hist, hist.numel())
    m = rng.choice(NEGS)
    cand = torch.cat([nxt, torch.randint(0, NI, (m,), device=dev)])
    hsh = nxt % HASH                                  # streaming frequency estimate of the in-batch items
    gap[hsh] = 0.95 * gap[hsh] + 0.05 * (step - last_seen[hsh])
    last_seen[hsh] = float(step)
    logq = torch.cat([-gap[hsh].clamp_min(1.0).log(), torch.full((m,), math.log(max(m, 1) / NI), device=dev)])
    qv = user_tower(u, hist, hoff, hw, terms, toff)
    iv = item_tower(cand)
    logits = (qv @ iv.T) / TEMP - logq[None]
    dup = (nxt[:, None] == nxt[None, :]) & ~torch.eye(B, dtype=torch.bool, device=dev)
    logits = logits.masked_fill(F.pad(dup, (0, m)), -1e9)
    loss = F.cross_entropy(logits, torch.arange(B, device=dev))
    sparse_opt.zero_grad(set_to_none=True); dense_opt.zero_grad(set_to_none=True)
    loss.backward()
    sparse_opt.step(); dense_opt.step()
    losses.append(loss.item())
    if (step + 1) % eval_every == 0:
        recalls.append(evaluate())
print(f"{steps} steps: loss {losses[0]:.3f} -> {losses[-1]:.3f}, up to {max_hist} history ids a batch, "
      f"item-table gradient nnz {item_emb.weight.grad._nnz()} (last step), recall@100 "
      + " ".join(f"{r:.3f}" for r in recalls))
if dev.startswith("cuda"):
    torch.cuda.synchronize()
