"""A 3-layer graph network (torch_geometric: a GCNConv, which recomputes its symmetric normalisation with self
loops every call, then two mean-aggregation SAGEConv layers; hidden 256, BatchNorm, ReLU, dropout) trained for
node classification with Adam on a new random graph every step, as neighbour-sampled mini-batches give: 8k..100k
nodes with 128 features and average degree 4..24 (edge lists built on the device), loss on a random 30% of the
nodes, 30 steps, with a no-grad eval graph every 10 steps.
`--device cpu` (or DEVICE=cpu) and SMOKE=1 (200..2000 nodes, 4 steps) for a quick CPU check."""
import os, random, sys, torch, torch.nn as nn, torch.nn.functional as F
from torch_geometric.nn import GCNConv, SAGEConv
dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else os.environ.get("DEVICE", "cuda")
smoke = os.environ.get("SMOKE") == "1"
torch.manual_seed(0); random.seed(0)
(nlo, nhi), steps, F_IN, H, C = ((200, 2000), 4, 128, 256, 40) if smoke else ((8000, 100000), 30, 128, 256, 40)

class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.convs = nn.ModuleList([GCNConv(F_IN, H), SAGEConv(H, H), SAGEConv(H, C)])
        s.norms = nn.ModuleList([nn.BatchNorm1d(H), nn.BatchNorm1d(H)])
    def forward(s, x, ei):
        for conv, norm in zip(s.convs[:-1], s.norms):
            x = F.dropout(F.relu(norm(conv(x, ei))), 0.5, s.training)
        return s.convs[-1](x, ei)

def graph():
    n = random.randint(nlo, nhi); e = n * random.randint(4, 24) // 2
    src, dst = torch.randint(0, n, (e,), device=dev), torch.randint(0, n, (e,), device=dev)
    ei = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], 1)
    return torch.randn(n, F_IN, device=dev), ei, torch.randint(0, C, (n,), device=dev), torch.rand(n, device=dev) < 0.3

model = Net().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
for step in range(steps):
    model.train()
    x, ei, y, m = graph()
    loss = F.cross_entropy(model(x, ei)[m], y[m])
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    if step % 10 == 9 or step == steps - 1:
        model.eval()
        with torch.no_grad():
            x, ei, y, m = graph()
            acc = (model(x, ei).argmax(-1) == y).float().mean().item()
if dev.startswith("cuda"): torch.cuda.synchronize()
