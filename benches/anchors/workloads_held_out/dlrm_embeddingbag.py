"""A DLRM-style recommendation model: 8 sparse EmbeddingBag tables (100,000 to 1,000,000 rows of 64) summed over a
multi-hot feature whose length is drawn per sample (1..40), a bottom MLP over 13 dense features, pairwise dot
interactions and a top MLP; SparseAdam for the tables and Adam for the rest, batches of 2048, 40 steps."""
import torch, torch.nn as nn
torch.manual_seed(23)
dev = "cuda"
rows = [100_000, 200_000, 300_000, 500_000, 1_000_000, 150_000, 400_000, 250_000]
tables = nn.ModuleList(nn.EmbeddingBag(r, 64, mode="sum", sparse=True) for r in rows).to(dev)
bottom = nn.Sequential(nn.Linear(13, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 64)).to(dev)
n_feat = len(rows) + 1
top = nn.Sequential(nn.Linear(64 + n_feat * (n_feat - 1) // 2, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                    nn.Linear(512, 1)).to(dev)
opt_sparse = torch.optim.SparseAdam(list(tables.parameters()), lr=1e-3)
opt_dense = torch.optim.Adam(list(bottom.parameters()) + list(top.parameters()), lr=1e-3)
iu = torch.triu_indices(n_feat, n_feat, 1, device=dev)
B = 2048
for step in range(40):
    dense = torch.randn(B, 13, device=dev)
    embs = []
    for r, t in zip(rows, tables):
        lengths = torch.randint(1, 41, (B,), device=dev)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long, device=dev), lengths.cumsum(0)[:-1]])
        idx = torch.randint(0, r, (int(lengths.sum()),), device=dev)
        embs.append(t(idx, offsets))
    z = torch.stack([bottom(dense)] + embs, dim=1)
    inter = torch.bmm(z, z.transpose(1, 2))[:, iu[0], iu[1]]
    logit = top(torch.cat([z[:, 0], inter], dim=1)).squeeze(1)
    y = torch.randint(0, 2, (B,), device=dev).float()
    loss = nn.functional.binary_cross_entropy_with_logits(logit, y)
    opt_sparse.zero_grad(set_to_none=True)
    opt_dense.zero_grad(set_to_none=True)
    loss.backward()
    opt_sparse.step()
    opt_dense.step()
torch.cuda.synchronize()
