"""NeRF-style training with occupancy-pruned, packed ray marching, fp32, Adam (lr 5e-4, eps 1e-15), 150 steps. Scene:
the unit cube [-1, 1]^3 seen by random cameras on a sphere of radius 3 to 4; each step draws 8,192 rays (a random
origin per 256 rays, directions toward a random point near the centre) whose target colours come from a fixed random
analytic field of the ray (sin of random projections of origin and direction). Per step: (1) a proposal pass over 64
stratified samples per ray (near 1, far 6) through a small density MLP (positional encoding of 6 frequencies, 3 x
128 ReLU), alpha from the sample spacing, transmittance by torch.cumprod over the samples, and 64 more samples per
ray drawn by inverse-CDF importance sampling of those weights (torch.searchsorted), merged and sorted with the 64
stratified ones (128 per ray); (2) pruning: samples outside the cube or in an unoccupied cell of a 64^3 occupancy
grid are dropped with a boolean mask, and the survivors are packed with nonzero (ray index and sample position per
sample: a count that changes every step, up to the full 1,048,576; about 170k at the start); (3) the main field
(positional encoding of 10 frequencies for the position, 4 for the direction; 8 x 256 ReLU layers with a skip at
layer 4, a density head and a 2 x 128 colour head on the direction) on the packed samples only; (4) packed volume
rendering: alpha = 1 - exp(-sigma x delta), the exclusive per-ray transmittance as exp of a global torch.cumsum
minus each ray's first value (gathered by the ray start index), weights, and per-ray colour, opacity and depth by
index_add_ into (8,192, x) buffers, then white background compositing; MSE to the target plus the proposal's
histogram loss against the main weights. Every 16 steps the occupancy grid is refreshed under no_grad: the main
field's density at all 262,144 cell centres (jittered) in chunks of 65,536, a decaying running maximum per cell (x
0.95, as instant-ngp), and the occupied set (cells above the mean of that maximum) rebuilt as a boolean grid. Every
50 steps a no-grad render of 16,384 rays in chunks of 4,096.
WL_DEVICE=cpu: 256 rays of 16 + 16 samples, widths 32 and 16, a 16^3 grid, 6 steps, grid refresh every 3, render of
512 rays at the end."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(93); rng = random.Random(93)
if small:
    R, SC, SF, W, WP, G, steps, grid_every, render_every, RENDER, CHUNK = 256, 16, 16, 32, 16, 16, 6, 3, 6, 512, 4096
else:
    R, SC, SF, W, WP, G, steps, grid_every, render_every, RENDER, CHUNK = 8192, 64, 64, 256, 128, 64, 150, 16, 50, 16384, 65536
NEAR, FAR = 1.0, 6.0


def posenc(x, n):                                    # (N, 3) -> (N, 3 + 6n)
    f = (2.0 ** torch.arange(n, device=x.device)) * math.pi
    xf = (x[..., None] * f).flatten(-2)
    return torch.cat([x, xf.sin(), xf.cos()], -1)


class Field(nn.Module):
    def __init__(s):
        super().__init__()
        s.l0 = nn.ModuleList([nn.Linear(63, W)] + [nn.Linear(W, W) for _ in range(3)])
        s.l1 = nn.ModuleList([nn.Linear(W + 63, W)] + [nn.Linear(W, W) for _ in range(3)])
        s.sigma, s.feat = nn.Linear(W, 1), nn.Linear(W, W)
        s.c1, s.c2 = nn.Linear(W + 27, W // 2), nn.Linear(W // 2, 3)

    def density(s, p):
        e = posenc(p, 10)
        h = e
        for l in s.l0:
            h = F.relu(l(h))
        h = torch.cat([h, e], -1)                    # the skip connection
        for l in s.l1:
            h = F.relu(l(h))
        return F.softplus(s.sigma(h)[:, 0] - 1.0), h

    def forward(s, p, d):
        sigma, h = s.density(p)
        c = F.relu(s.c1(torch.cat([s.feat(h), posenc(d, 4)], -1)))
        return sigma, torch.sigmoid(s.c2(c))


field = Field().to(dev)
prop = nn.Sequential(nn.Linear(39, WP), nn.ReLU(), nn.Linear(WP, WP), nn.ReLU(), nn.Linear(WP, WP), nn.ReLU(),
                     nn.Linear(WP, 1)).to(dev)
opt = torch.optim.Adam(list(field.parameters()) + list(prop.parameters()), lr=5e-4, eps=1e-15)
tgt_a, tgt_b = torch.randn(6, 3, device=dev) * 2, torch.randn(3, device=dev)
grid_ema = torch.zeros(G, G, G, device=dev)
occ = torch.ones(G, G, G, dtype=torch.bool, device=dev)


def rays(n):
    cams = n // 256
    o = F.normalize(torch.randn(cams, 3, device=dev), dim=-1) * (3 + torch.rand(cams, 1, device=dev))
    o = o.repeat_interleave(256, 0)
    look = torch.randn(n, 3, device=dev) * 0.5
    d = F.normalize(look - o, dim=-1)
    target = torch.sigmoid(torch.sin(torch.cat([o, d], -1) @ tgt_a) + tgt_b)
    return o, d, target


def cell(p):                                         # positions -> (inside cube, flat cell index)
    inside = (p.abs() < 1).all(-1)
    ijk = ((p.clamp(-1, 1 - 1e-6) + 1) * (G / 2)).long()
    return inside, (ijk[..., 0] * G + ijk[..., 1]) * G + ijk[..., 2]


def proposal(o, d):                                  # dense (n, SC) pass -> merged sorted t (n, SC + SF)
    n = o.shape[0]
    t = NEAR + (FAR - NEAR) * (torch.arange(SC, device=dev) + torch.rand(n, SC, device=dev)) / SC
    p = o[:, None] + d[:, None] * t[..., None]
    sig = F.softplus(prop(posenc(p.view(-1, 3), 6)).view(n, SC) - 1.0)
    delta = torch.cat([t[:, 1:] - t[:, :-1], torch.full((n, 1), 1e10, device=dev)], -1)
    alpha = 1 - torch.exp(-sig * delta)
    trans = torch.cumprod(torch.cat([torch.ones(n, 1, device=dev), 1 - alpha + 1e-10], -1), -1)[:, :-1]
    w = alpha * trans
    with torch.no_grad():                            # inverse-CDF importance sampling
        pdf = (w.detach() + 1e-5) / (w.detach() + 1e-5).sum(-1, keepdim=True)
        cdf = torch.cat([torch.zeros(n, 1, device=dev), pdf.cumsum(-1)], -1)
        u = torch.rand(n, SF, device=dev)
        i = torch.searchsorted(cdf, u, right=True).clamp(1, SC)
        lo, hi = cdf.gather(1, i - 1), cdf.gather(1, i)
        edges = torch.cat([t, t[:, -1:] + (FAR - NEAR) / SC], -1)
        tl, th = edges.gather(1, i - 1), edges.gather(1, i)
        tf = tl + (u - lo) / (hi - lo).clamp_min(1e-8) * (th - tl)
        tall, _ = torch.sort(torch.cat([t, tf], -1), -1)
    return tall, t, w


def render(o, d, tall):                              # occupancy pruning, packing, packed volume rendering
    n, s = tall.shape
    p = o[:, None] + d[:, None] * tall[..., None]
    inside, idx = cell(p)
    keep = inside & occ.view(-1)[idx]
    ri, si = keep.nonzero(as_tuple=True)            # packed samples, grouped by ray in order
    tk = tall[ri, si]
    tn = tall[ri, (si + 1).clamp(max=s - 1)]
    delta = torch.where(si + 1 < s, tn - tk, torch.full_like(tk, 1e-2)).clamp_min(1e-4)
    sigma, rgb = field(p[ri, si], d[ri])
    sd = sigma * delta
    cs = torch.cumsum(sd, 0)
    counts = torch.zeros(n, dtype=torch.long, device=dev).index_add_(0, ri, torch.ones_like(ri))
    start = torch.cumsum(counts, 0) - counts        # first packed index of each ray
    excl = cs - sd - (cs - sd)[start.clamp(max=max(ri.numel() - 1, 0))][ri]
    w = (1 - torch.exp(-sd)) * torch.exp(-excl)
    color = torch.zeros(n, 3, device=dev).index_add_(0, ri, w[:, None] * rgb)
    acc = torch.zeros(n, device=dev).index_add_(0, ri, w)
    depth = torch.zeros(n, device=dev).index_add_(0, ri, w * tk)
    return color + (1 - acc[:, None]), acc, depth, (ri, tk, w)


def refresh_grid():
    global occ
    with torch.no_grad():
        ax = torch.arange(G, device=dev)
        ijk = torch.stack(torch.meshgrid(ax, ax, ax, indexing="ij"), -1).view(-1, 3)
        centres = (ijk + torch.rand(ijk.shape, device=dev)) * (2.0 / G) - 1
        dens = torch.cat([field.density(c)[0] for c in centres.split(CHUNK)])
        grid_ema.mul_(0.95).view(-1).copy_(torch.maximum(grid_ema.view(-1), dens))
        occ = grid_ema > grid_ema.mean()            # untrained densities: about half the cells stay


for step in range(steps):
    if step % grid_every == 0:
        refresh_grid()
    o, d, target = rays(R)
    tall, tc, wc = proposal(o, d)
    color, acc, depth, (ri, tk, w) = render(o, d, tall.detach())
    loss = F.mse_loss(color, target)
    with torch.no_grad():                            # main weights binned onto the proposal intervals
        col = ((tk - NEAR) / (FAR - NEAR) * SC).long().clamp(0, SC - 1)
        hist = torch.zeros(R, SC, device=dev).index_put_((ri, col), w.detach(), accumulate=True)
    loss = loss + 0.1 * (F.relu(hist - wc) ** 2 / (wc + 1e-7)).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if (step + 1) % render_every == 0:
        with torch.no_grad():
            o, d, target = rays(RENDER)
            out = torch.cat([render(oc, dc, proposal(oc, dc)[0])[0] for oc, dc in zip(o.split(4096), d.split(4096))])
            psnr = -10 * torch.log10(F.mse_loss(out, target)).item()
        print(f"step {step + 1}: {ri.numel()} packed samples, occupied {occ.float().mean().item():.3f}, "
              f"loss {loss.item():.4f}, render psnr {psnr:.2f}")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
