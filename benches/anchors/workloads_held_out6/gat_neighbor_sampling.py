"""GraphSAGE-style mini-batch training of a 3-layer graph attention network (GAT) on subgraphs sampled on the device
from one large resident graph, float32, Adam (lr 3e-3), three epochs over the training nodes (294 steps), each
followed by a layer-wise full-graph inference.
Graph, built on the device at start: 1,000,000 nodes with 100 float32 features (a class centroid plus noise, 47
classes) and 12M undirected edges stored both ways (24M, self loops dropped) in CSR form by destination: int64 indptr
(N + 1) and neighbour indices (24M), made by argsort of the destinations, bincount and cumsum. One endpoint of each
edge is drawn from a power law over a random node order (weight of rank r proportional to r^-0.75, by searchsorted
into the float64 CDF, in 4M-edge chunks), the other from the same class with probability 0.6, else uniformly, so
degrees run from 1 to about 10^5 (mean 24). 10% of the nodes are training nodes, 5% validation.
Sampling, per mini-batch of 1,024 seed nodes (the last of each epoch shorter: 100,000 training nodes make 97 full
batches and one of 672): three hops with fanouts 10, 10, 5; a node of degree <= fanout keeps all its neighbours,
others draw fanout neighbours with replacement (repeat_interleave over the per-node counts, random offsets into the
CSR rows); each hop's node set is torch.unique of its targets and their neighbours (return_inverse relabels the
edges), so the node and edge counts of each block (about 1,024 -> 8.7k -> 68k -> 260k nodes, about 0.34M sampled edges
and 68k self loops in the outermost block) change by a few per cent from batch to batch, and the last batch of an
epoch is smaller.
Model: GATConv-style layers 100 -> 4 x 32 (concat) -> 4 x 32 (concat) -> 47 (4 heads averaged), each with self loops
added per block, attention logits leaky_relu(a_src[src] + a_dst[dst]), an edge softmax by scatter_reduce 'amax'
(detached), exp, index_add denominators and a division, attention dropout 0.2, messages h[src] x alpha summed into the
targets by index_add, a linear residual from the targets' inputs; ELU, LayerNorm and feature dropout 0.2 between
layers. Cross-entropy on the seeds.
Layer-wise inference after each epoch (no grad, eval mode): for each layer, lin of all 1M nodes in chunks into an (N,
128) buffer, then the targets in chunks of 32,768 nodes, each with all its incoming edges read straight from the CSR
range (about 0.8M edges a chunk, more where hubs fall), into an (N, 128) output buffer; accuracy of the final layer on
the validation and test nodes.
Hand estimate of the peak at full size: resident graph and features 0.6 GB; building the CSR about 1.5 GB more
(argsort of 24M int64 keys); training, outermost block: node features and lin output 0.1 + 0.13 GB, edge tensors (0.4M
x 128 float32: gathered messages, their product with alpha, gradients) about 0.2 GB each, 4-5 alive: about 1.8 GB;
layer-wise inference: three (N, 128) float32 buffers 1.5 GB plus chunk edge tensors (0.8-0.9M x 128) about 0.43 GB
each, 3 alive: about 3.4 GB. GPU time about 5 s (294 steps of tens of kernels per hop and layer, three of them sorts
of about 0.4M ids; three inference passes).
What it adds: a large resident graph and feature table next to per-batch sampled blocks whose sizes come from
data-dependent ops (repeat_interleave, unique, index_select into CSR rows) three times over, each smaller than the
last; edge-level tensors two to five times the node tensors, with scatter_reduce / index_add aggregations and their
gather backwards; and a full-graph layer-wise inference with (N, hidden) buffers and chunks of uneven edge counts.
WL_DEVICE=cpu: 4,000 nodes, 40,000 undirected edges, 16 features, 6 classes, 2 heads of 8, 2 epochs, fanouts 4, 3, 2,
batches of 64 seeds (400 training nodes: 6 full batches and one of 16 an epoch), inference chunks of 1,024 nodes."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(121); rng = random.Random(121)
if small:
    N, EH, FIN, NCLS, HEADS, C, FANOUTS, BATCH, ECHUNK, GCHUNK, epochs = \
        4000, 40_000, 16, 6, 2, 8, (4, 3, 2), 64, 1024, 10_000, 2
else:
    N, EH, FIN, NCLS, HEADS, C, FANOUTS, BATCH, ECHUNK, GCHUNK, epochs = \
        1_000_000, 12_000_000, 100, 47, 4, 32, (10, 10, 5), 1024, 32_768, 4_000_000, 3
HID = HEADS * C


def build_graph():
    y = torch.randint(0, NCLS, (N,), device=dev)
    x = torch.randn(NCLS, FIN, device=dev)[y] * 0.7 + torch.randn(N, FIN, device=dev)
    w = torch.arange(1, N + 1, device=dev, dtype=torch.float64).pow(-0.75)
    cdf = w.cumsum(0); cdf /= cdf[-1].clone()
    order = torch.randperm(N, device=dev)
    by_class = torch.argsort(y)
    cnt = torch.bincount(y, minlength=NCLS)
    first = cnt.cumsum(0) - cnt
    src, dst = [], []
    for a in range(0, EH, GCHUNK):
        n = min(GCHUNK, EH - a)
        s = order[torch.searchsorted(cdf, torch.rand(n, device=dev, dtype=torch.float64)).clamp_(max=N - 1)]
        cs = y[s]
        same = by_class[first[cs] + (torch.rand(n, device=dev) * cnt[cs]).long().clamp_(max=cnt[cs] - 1)]
        d = torch.where(torch.rand(n, device=dev) < 0.6, same, torch.randint(0, N, (n,), device=dev))
        keep = s != d
        src.append(s[keep]); dst.append(d[keep])
    del w, cdf, order, by_class
    src, dst = torch.cat(src), torch.cat(dst)
    row, col = torch.cat([dst, src]), torch.cat([src, dst])          # row: the destination of each directed edge
    del src, dst
    perm = torch.argsort(row)
    indices = col[perm]
    deg = torch.bincount(row, minlength=N)
    del row, col, perm
    indptr = torch.zeros(N + 1, dtype=torch.long, device=dev)
    indptr[1:] = deg.cumsum(0)
    return x, y, indptr, indices, deg


def sample(seeds):
    """Returns the input node ids and the blocks, outermost first: (src, tgt, dst_in_src, n_dst) per layer."""
    nodes, blocks = seeds, []
    for f in FANOUTS:
        start = indptr[nodes]
        deg = indptr[nodes + 1] - start
        take = deg.clamp(max=f)
        tgt = torch.repeat_interleave(torch.arange(nodes.numel(), device=dev), take)
        excl = take.cumsum(0) - take
        rank = torch.arange(tgt.numel(), device=dev) - excl[tgt]
        dt = deg[tgt]
        off = torch.where(dt <= f, rank, (torch.rand(tgt.numel(), device=dev) * dt).long().clamp_(max=dt - 1))
        nbr = indices[start[tgt] + off]
        uniq, inv = torch.unique(torch.cat([nodes, nbr]), return_inverse=True)
        blocks.append((inv[nodes.numel():], tgt, inv[:nodes.numel()], nodes.numel()))
        nodes = uniq
    return nodes, blocks[::-1]


class GATLayer(nn.Module):
    def __init__(s, fin, concat):
        super().__init__()
        s.concat = concat
        s.lin = nn.Linear(fin, HID, bias=False)
        s.att_src, s.att_dst = nn.Parameter(torch.randn(HEADS, C) * 0.1), nn.Parameter(torch.randn(HEADS, C) * 0.1)
        s.res = nn.Linear(fin, HID if concat else NCLS, bias=True)
        if not concat:
            s.out = nn.Linear(C, NCLS, bias=False)

    def attend(s, h, a_s, a_d, src, tgt, n_dst):    # h (Ns, H, C) sources; a_s (Ns, H); a_d (Nd, H)
        e = F.leaky_relu(a_s[src] + a_d[tgt], 0.2)
        emax = torch.full((n_dst, HEADS), -1e30, device=e.device).scatter_reduce(
            0, tgt[:, None].expand(-1, HEADS), e.detach(), "amax", include_self=True)
        ex = (e - emax[tgt]).exp()
        den = torch.zeros(n_dst, HEADS, device=e.device).index_add(0, tgt, ex)
        alpha = F.dropout(ex / (den[tgt] + 1e-16), 0.2, s.training)
        out = torch.zeros(n_dst, HEADS, C, device=e.device).index_add(0, tgt, h[src] * alpha[..., None])
        return out.reshape(n_dst, HID) if s.concat else s.out(out.mean(1))

    def forward(s, x_src, src, tgt, dst_in_src, n_dst):
        h = s.lin(x_src).view(-1, HEADS, C)
        a_s = (h * s.att_src).sum(-1)
        a_d = (h[dst_in_src] * s.att_dst).sum(-1)
        loops = torch.arange(n_dst, device=x_src.device)
        src, tgt = torch.cat([src, dst_in_src]), torch.cat([tgt, loops])
        return s.attend(h, a_s, a_d, src, tgt, n_dst) + s.res(x_src[dst_in_src])


class GAT(nn.Module):
    def __init__(s):
        super().__init__()
        s.layers = nn.ModuleList([GATLayer(FIN, True), GATLayer(HID, True), GATLayer(HID, False)])
        s.norms = nn.ModuleList([nn.LayerNorm(HID), nn.LayerNorm(HID)])

    def between(s, i, h):
        return F.dropout(s.norms[i](F.elu(h)), 0.2, s.training)

    def forward(s, x, blocks):
        for i, (layer, blk) in enumerate(zip(s.layers, blocks)):
            x = layer(x, *blk)
            if i < 2:
                x = s.between(i, x)
        return x


@torch.no_grad()
def layerwise_inference():
    model.eval()
    h_in = feats
    for i, layer in enumerate(model.layers):
        hl = torch.empty(N, HID, device=dev)
        for a in range(0, N, ECHUNK * 4):
            hl[a:a + ECHUNK * 4] = layer.lin(h_in[a:a + ECHUNK * 4])
        hl3 = hl.view(N, HEADS, C)
        a_s = (hl3 * layer.att_src).sum(-1)
        out = torch.empty(N, HID if i < 2 else NCLS, device=dev)
        for a in range(0, N, ECHUNK):
            b = min(N, a + ECHUNK)
            e0, e1 = indptr[a].item(), indptr[b].item()
            src = torch.cat([indices[e0:e1], torch.arange(a, b, device=dev)])
            tgt = torch.cat([torch.repeat_interleave(torch.arange(b - a, device=dev), deg[a:b]),
                             torch.arange(b - a, device=dev)])
            a_d = (hl3[a:b] * layer.att_dst).sum(-1)
            o = layer.attend(hl3, a_s, a_d, src, tgt, b - a) + layer.res(h_in[a:b])
            out[a:b] = model.between(i, o) if i < 2 else o
        del hl, hl3, a_s
        h_in = out
    pred = h_in.argmax(1)
    model.train()
    return [(pred[idx] == labels[idx]).float().mean().item() for idx in (val_idx, test_idx)]


feats, labels, indptr, indices, deg = build_graph()
split = torch.randperm(N, device=dev)
train_idx, val_idx, test_idx = split[:N // 10], split[N // 10:N * 3 // 20], split[N * 3 // 20:N // 5]
del split
model = GAT().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
steps, loss, accs, max_nodes = 0, None, [], 0
for ep in range(epochs):
    order = train_idx[torch.randperm(train_idx.numel(), device=dev)]
    for a in range(0, order.numel(), BATCH):
        seeds = order[a:a + BATCH]
        nodes, blocks = sample(seeds)
        max_nodes = max(max_nodes, nodes.numel())
        out = model(feats[nodes], blocks)
        loss = F.cross_entropy(out, labels[seeds])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
    accs.append(layerwise_inference())
print(f"{steps} steps over {epochs} epochs ({indices.numel()} directed edges, max degree {deg.max().item()}, "
      f"up to {max_nodes} input nodes a batch): last loss {loss.item():.3f}, val/test accuracy "
      + ", ".join(f"{v:.3f}/{t:.3f}" for v, t in accs))
if dev.startswith("cuda"):
    torch.cuda.synchronize()
