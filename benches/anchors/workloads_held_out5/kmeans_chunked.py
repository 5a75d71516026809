"""Chunked Lloyd's k-means on the GPU, no neural network: 5,000,000 float32 points of dimension 128 (2,441 MiB,
resident throughout), clustered four times with k = 256, 1,024, 4,096 and 2,048 in that order.
Data, made on the device in blocks of 500,000 rows written into one preallocated (N, 128) tensor: a mixture of
3,000 Gaussian clusters with random centres (scale 4) and random widths (0.5..1.5), plus 0.5% outliers drawn
uniformly from a box of half-width 20; the squared row norms are kept beside it.
Seeding, per run: k = 256, 1,024 and 2,048 by greedy k-means++ on a fresh random subsample of 65,536 points
(randperm): centres drawn one at a time, each from 2 + ln k candidates sampled by torch.multinomial in proportion
to the current squared distance, each candidate scored by torch.cdist against the subsample and the best kept, so
thousands of sequential steps of small tensors; k = 4,096 from a pool of 2,990 random points drawn with
replacement, so about 1,870 centres are duplicates and start empty.
Lloyd iterations, at most 24 per run (stopping once the relative inertia change is below 2e-5 after at least 12):
the points in chunks sized so that the (chunk, k) float32 distance matrix is 384 MiB (393,216 rows at k 256 down
to 24,576 at k 4,096; the last chunk a shorter tail), each chunk's matrix as |c|^2 - 2 x c^T by torch.addmm with the
broadcast centre norms, min over k (distance and argmin), the per-point distance and assignment written into
(N,) buffers, centre sums by index_add_ and counts by torch.bincount; then new centres, empty clusters re-seeded
from points drawn at random among the 8 x (empty count) farthest (torch.topk over the per-point distances), and
the inertia and centre shift read with .item() for the convergence check. One line after each seeding and each run.
WL_DEVICE=cpu: 40,000 points of dimension 16 from 24 clusters, k = 16, 64 (pool of 46) and 32, a subsample of 4,096,
1 MiB distance chunks, at most 6 iterations (at least 4)."""
import math, os, random, torch
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(112); rng = random.Random(112)
if small:
    N, D, NTRUE, GEN, SUB, DMAT, MAXIT, MINIT = 40_000, 16, 24, 16_384, 4096, 1 << 20, 6, 4
    RUNS = ((16, "kmeans++"), (64, "pool"), (32, "kmeans++"))
else:
    N, D, NTRUE, GEN, SUB, DMAT, MAXIT, MINIT = 5_000_000, 128, 3000, 500_000, 65_536, 384 << 20, 24, 12
    RUNS = ((256, "kmeans++"), (1024, "kmeans++"), (4096, "pool"), (2048, "kmeans++"))
TOL = 2e-5

# data: Gaussian mixture plus uniform outliers, generated block by block into one buffer
X = torch.empty(N, D, device=dev)
true_c = torch.randn(NTRUE, D, device=dev) * 4
true_w = 0.5 + torch.rand(NTRUE, device=dev)
for a in range(0, N, GEN):
    n = min(GEN, N - a)
    lab = torch.randint(0, NTRUE, (n,), device=dev)
    X[a:a + n] = true_c[lab] + torch.randn(n, D, device=dev) * true_w[lab, None]
    out = torch.rand(n, device=dev) < 0.005
    X[a:a + n] = torch.where(out[:, None], (torch.rand(n, D, device=dev) * 2 - 1) * 20, X[a:a + n])
xx = X.pow(2).sum(1)
dmin = torch.empty(N, device=dev)                    # squared distance of each point to its centre
assign = torch.empty(N, dtype=torch.int32, device=dev)
del true_c, true_w
print(f"data: {N} x {D} float32 points, {X.numel() * 4 >> 20} MiB")


def kmeanspp(k):                                     # greedy k-means++ on a subsample, one centre at a time
    sub = X[torch.randperm(N, device=dev)[:SUB]]
    C = torch.empty(k, D, device=dev)
    first = torch.randint(0, SUB, (1,), device=dev)
    C[:1] = sub.index_select(0, first)
    pot = torch.cdist(C[:1], sub)[0].pow(2)
    trials = 2 + int(math.log(k))
    for i in range(1, k):
        cand = torch.multinomial(pot, trials, replacement=True)
        newpot = torch.minimum(torch.cdist(sub.index_select(0, cand), sub).pow(2), pot[None])
        best = newpot.sum(1).argmin().view(1)
        pot = newpot.index_select(0, best)[0]
        C[i:i + 1] = sub.index_select(0, cand.index_select(0, best))
    return C, pot.sum().item()


def pool_init(k):                                    # random points drawn with replacement from a small pool
    pool = X[torch.randint(0, N, (int(k * 0.73),), device=dev)]
    return pool[torch.randint(0, pool.shape[0], (k,), device=dev)].clone()


def lloyd_pass(C):
    k = C.shape[0]
    chunk = DMAT // (4 * k)
    cc = C.pow(2).sum(1)
    sums = torch.zeros(k, D, device=dev)
    counts = torch.zeros(k, dtype=torch.long, device=dev)
    inertia = torch.zeros((), dtype=torch.float64, device=dev)
    for a in range(0, N, chunk):
        xc = X[a:a + chunk]
        d = torch.addmm(cc, xc, C.T, alpha=-2.0)      # (chunk, k): |c|^2 - 2 x.c  (|x|^2 added after the min)
        best, idx = d.min(1)
        del d
        dist = (best + xx[a:a + chunk]).clamp_min_(0)
        dmin[a:a + chunk] = dist
        assign[a:a + chunk] = idx
        inertia += dist.sum(dtype=torch.float64)
        sums.index_add_(0, idx, xc)
        counts += torch.bincount(idx, minlength=k)
    return sums, counts, inertia


for k, init in RUNS:
    C, pot = kmeanspp(k) if init == "kmeans++" else (pool_init(k), float("nan"))
    print(f"k {k}: {init} seeding done (subsample potential {pot:.4g})")
    prev, reseeded = None, 0
    for it in range(MAXIT):
        sums, counts, inertia = lloyd_pass(C)
        newC = sums / counts.clamp_min(1)[:, None].to(sums.dtype)
        empty = (counts == 0).nonzero().flatten()
        ne = empty.numel()
        if ne:                                       # re-seed empty clusters from random far points
            far = torch.topk(dmin, min(N, 8 * ne)).indices
            pick = far[torch.randperm(far.numel(), device=dev)[:ne]]
            newC[empty] = X[pick]
            reseeded += ne
        shift = ((newC - C).pow(2).sum(1).max() / C.pow(2).sum(1).mean()).sqrt().item()
        C = newC
        cur = inertia.item()
        rel = float("inf") if prev is None else abs(prev - cur) / max(cur, 1e-30)
        prev = cur
        if it + 1 >= MINIT and rel < TOL:
            break
    sizes = torch.bincount(assign.long(), minlength=k)
    print(f"k {k}: {it + 1} Lloyd iterations, inertia/N {cur / N:.4f}, last shift {shift:.2e}, "
          f"{reseeded} empty clusters re-seeded, sizes {sizes.min().item()}..{sizes.max().item()}")
    del C, newC, sums, counts, sizes
if dev.startswith("cuda"):
    torch.cuda.synchronize()
