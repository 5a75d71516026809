import torch, torch.nn.functional as F
for dev in ["cpu", "cuda"]:
    bf = torch.bfloat16
    x = torch.tensor([1.5, 0.625, -0.75, -1.75], dtype=bf, device=dev)
    y = torch.tensor([0.75, 2.25, 2.875, 1.5], dtype=bf, device=dev)
    w = torch.tensor([-1.0002555517425873e+30, 1.0002555517425873e+30, 0.375, 0.25], dtype=bf, device=dev)
    # the conformance format's weighted mse_loss: FORMAT.md's formula
    try:
        r1 = F.mse_loss(x, y, reduction="mean", weight=w)
    except TypeError:
        r1 = ((x - y) ** 2 * w).sum() / w.sum()
    logits = torch.tensor([-2.875], dtype=bf, device=dev).expand(4, 3, 2)
    t = torch.tensor([0.25, 0.125, 0.875, 0.375, 0.75, 1.0002555517425873e+30, 0.875, -1.0002555517425873e+30, 1.0, 0.75, 0.875, 0.875, 0.75, 0.875, 0.75, 0.25, 0.5, 0.75, 0.25, 1.0, 0.125, 0.5, 0.375, 0.375], dtype=bf, device=dev).reshape(4, 3, 2)
    r2 = F.cross_entropy(logits, t, reduction="sum")
    print(dev, "weighted mse mean:", r1.item(), "w.sum():", w.sum().item(), "| cross_entropy prob-target sum:", r2.item(), "| torch", torch.__version__)
