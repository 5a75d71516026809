"""PyTorch's answers, on the CPU and on cuda:0, to the four oracle programs that strata's cuda:0 answered
differently from PyTorch's CPU in session 31 (seeds 2385, 2393, 2440, 2476 of fuzz_conformance_ops.py)."""
import torch, torch.nn.functional as F

def cases(dev):
    out = {}
    x = torch.tensor([[1e200]], dtype=torch.float64, device=dev).expand(3, 3, -1)
    out["s2440_var_0267"] = x.std(dim=[], correction=2, keepdim=True).flatten().tolist()
    xb3 = torch.tensor([-7.5, -7.5, -7.5, -7.5, 0.0, 0.875, 0.375, 1e200, -7.5, -7.5, -7.5, -7.5, -0.0, 0.125,
                        0.625, 0.5, -7.5, -7.5, -7.5, -7.5, 0.25, 0.125, 1.0, -1e200, -7.5, -7.5, -7.5, -7.5],
                       dtype=torch.float64, device=dev).reshape(7, 4)
    x2 = torch.tensor(3.375, dtype=torch.float64, device=dev).expand(3, 4)
    w = torch.tensor(2.0, dtype=torch.float64, device=dev).expand(4)
    out["s2476_cross_entropy_0778"] = [F.cross_entropy(x2, xb3[1:7:2], w, reduction="sum", label_smoothing=0.25).item()]
    big = 1.0002555517425873e30
    x3 = torch.tensor([0.25, float("nan"), 0.25, 1.0, 0.25, 0.0, 0.25, 0.125, 0.625, -big, big, 0.00099945068359375,
                       0.0, 0.375, 0.75, 0.25], dtype=torch.bfloat16, device=dev).reshape(4, 4)
    x2 = torch.tensor([1.75], dtype=torch.bfloat16, device=dev).expand(4, 4)
    out["s2385_cross_entropy_0669"] = F.cross_entropy(x2, x3, reduction="none", label_smoothing=0.5).float().tolist()
    xb1 = torch.tensor([3.125, 4.0], dtype=torch.bfloat16, device=dev).reshape(1, 2, 1).expand(4, 2, -1)
    xb3 = torch.tensor([0.625, big, 0.375, -big, 0.25, 0.375, 0.375, 0.875], dtype=torch.bfloat16,
                       device=dev).reshape(2, 4, 1).transpose(0, 1)
    out["s2393_cross_entropy_0498"] = [F.cross_entropy(xb1, xb3, reduction="mean").float().item()]
    return out

devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for d in devs:
    for k, v in cases(d).items():
        print(torch.__version__, d, k, v)
