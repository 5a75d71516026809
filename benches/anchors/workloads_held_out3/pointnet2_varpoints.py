"""PointNet++-style (single-scale grouping) point-cloud part segmentation trained in float32 with Adam (cosine
learning rate), 25 steps, on random clouds whose size changes every step: a batch of 4..16 clouds of N points each,
N drawn from 1,024..8,192 in steps of 512 and capped so that batch x N <= 49,152 (xyz plus 3 normal-like features
per point, 16 part labels per point). Each set-abstraction level picks centres by farthest point sampling (a Python
loop of one distance update, min and argmax per centre, under no_grad: 1,024 + 256 + 64 iterations at N = 4,096),
groups neighbours by ball query (the (batch, centres, points) distance matrix from torch.cdist, points outside the
radius pushed to infinity, torch.topk of the 32 / 64 / 64 nearest, out-of-radius slots replaced by the nearest one),
gathers the grouped xyz offsets and features by advanced indexing ((batch, centres, k, channels); their backward is
an accumulating index_put), runs a shared MLP of 1x1 Conv2d + BatchNorm + ReLU on the permuted groups and max-pools
over k. Levels: N/4 centres of radius 0.1 (64-64-128), N/16 of 0.2 (128-128-256), N/64 of 0.4 (256-256-512). Three
feature-propagation levels go back up by inverse-distance interpolation of the 3 nearest coarse points (cdist, topk,
gather, weights), concatenation with the skip features and 1x1 Conv1d + BatchNorm + ReLU (256-256, 256-128,
128-128-128), then a 16-way head; cross-entropy over all points. After training, a no-grad eval in eval mode on 2
clouds of 16,384 points. WL_DEVICE=cpu: batch x N <= 2,048, N of 256..1,024, 2 steps, eval on 2 x 1,024."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(82); rng = random.Random(82)
if small:
    budget, (nlo, nhi), (blo, bhi), steps, n_eval = 2048, (256, 1024), (2, 4), 2, 1024
else:
    budget, (nlo, nhi), (blo, bhi), steps, n_eval = 49152, (1024, 8192), (4, 16), 25, 16384
PARTS = 16


def fps(xyz, m):                                       # farthest point sampling: (b, n, 3) -> (b, m) indices
    b, n, _ = xyz.shape
    idx = torch.zeros(b, m, dtype=torch.long, device=xyz.device)
    mind = torch.full((b, n), float("inf"), device=xyz.device)
    far = torch.randint(0, n, (b,), device=xyz.device)
    ar = torch.arange(b, device=xyz.device)
    for i in range(m):
        idx[:, i] = far
        d = ((xyz - xyz[ar, far][:, None]) ** 2).sum(-1)
        mind = torch.minimum(mind, d)
        far = mind.argmax(-1)
    return idx


def gather(x, idx):                                     # x (b, n, c), idx (b, ...) -> (b, ..., c)
    ar = torch.arange(x.shape[0], device=x.device).view(-1, *([1] * (idx.dim() - 1)))
    return x[ar, idx]


class SetAbstraction(nn.Module):
    def __init__(s, ratio, radius, k, cin, widths):
        super().__init__()
        s.ratio, s.radius, s.k = ratio, radius, k
        layers = []
        for c in widths:
            layers += [nn.Conv2d(cin, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(True)]
            cin = c
        s.mlp = nn.Sequential(*layers)

    def forward(s, xyz, feat):                          # xyz (b, n, 3), feat (b, n, c)
        with torch.no_grad():
            centres = gather(xyz, fps(xyz, xyz.shape[1] // s.ratio))          # (b, m, 3)
            d = torch.cdist(centres, xyz)                                      # (b, m, n)
            d = d.masked_fill(d > s.radius, float("inf"))
            dist, nbr = d.topk(min(s.k, d.shape[-1]), -1, largest=False)    # (b, m, k)
            nbr = torch.where(torch.isinf(dist), nbr[..., :1], nbr)
        g = torch.cat([gather(xyz, nbr) - centres[:, :, None], gather(feat, nbr)], -1)   # (b, m, k, 3 + c)
        g = s.mlp(g.permute(0, 3, 1, 2))                                        # (b, c', m, k)
        return centres, g.amax(-1).transpose(1, 2)                              # (b, m, c')


class FeatureProp(nn.Module):
    def __init__(s, cin, widths):
        super().__init__()
        layers = []
        for c in widths:
            layers += [nn.Conv1d(cin, c, 1, bias=False), nn.BatchNorm1d(c), nn.ReLU(True)]
            cin = c
        s.mlp = nn.Sequential(*layers)

    def forward(s, xyz, coarse_xyz, skip, coarse):      # interpolate coarse features onto xyz, concat skip
        with torch.no_grad():
            dist, nbr = torch.cdist(xyz, coarse_xyz).topk(3, -1, largest=False)     # (b, n, 3)
            w = 1.0 / (dist + 1e-8)
            w = w / w.sum(-1, keepdim=True)
        up = (gather(coarse, nbr) * w[..., None]).sum(2)                         # (b, n, c)
        x = torch.cat([up, skip], -1) if skip is not None else up
        return s.mlp(x.transpose(1, 2)).transpose(1, 2)


class PointNet2(nn.Module):
    def __init__(s):
        super().__init__()
        s.sa = nn.ModuleList([SetAbstraction(4, 0.1, 32, 6, (64, 64, 128)), SetAbstraction(4, 0.2, 64, 131, (128, 128, 256)),
                              SetAbstraction(4, 0.4, 64, 259, (256, 256, 512))])
        s.fp = nn.ModuleList([FeatureProp(512 + 256, (256, 256)), FeatureProp(256 + 128, (256, 128)),
                              FeatureProp(128 + 3, (128, 128, 128))])
        s.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(128, PARTS))

    def forward(s, xyz, feat):
        xs, fs = [xyz], [feat]
        for sa in s.sa:
            x, f = sa(xs[-1], fs[-1])
            xs.append(x); fs.append(f)
        f = fs[-1]
        for i, fp in enumerate(s.fp):                    # 3 -> 2 -> 1 -> 0
            f = fp(xs[2 - i], xs[3 - i], fs[2 - i], f)
        return s.head(f)


def clouds(b, n):
    xyz = torch.rand(b, n, 3, device=dev) * 2 - 1
    xyz = xyz / xyz.norm(dim=-1, keepdim=True).clamp(min=1e-6) * torch.rand(b, n, 1, device=dev) ** (1 / 3)
    return xyz, F.normalize(torch.randn(b, n, 3, device=dev), dim=-1), torch.randint(0, PARTS, (b, n), device=dev)


model = PointNet2().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
for step in range(steps):
    n = rng.randrange(nlo, nhi + 1, 512 if not small else 256)
    b = min(rng.randint(blo, bhi), budget // n)
    xyz, feat, labels = clouds(b, n)
    logits = model(xyz, feat)
    loss = F.cross_entropy(logits.reshape(-1, PARTS), labels.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step(); sched.step()
    del logits, loss

model.eval()
with torch.no_grad():
    xyz, feat, labels = clouds(2, n_eval)
    acc = (model(xyz, feat).argmax(-1) == labels).float().mean().item()
if dev.startswith("cuda"):
    torch.cuda.synchronize()
