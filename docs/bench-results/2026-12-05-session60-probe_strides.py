# PyTorch's result strides on the CPU and on CUDA for the results strata's GPU
# lays out differently from the conformance vectors (PyTorch's CPU answers).
import torch
def run(dev):
    out = {}
    b0 = torch.arange(4, dtype=torch.int32, device=dev); b2 = torch.arange(12., device=dev)
    out['mul_0500 i32[3,4](0,1) * f32[3,4](1,3)'] = (b0.as_strided([3, 4], [0, 1], 0) * b2.as_strided([3, 4], [1, 3], 0)).stride()
    b1 = torch.arange(37, dtype=torch.int32, device=dev)
    out['57_0070 clamp(i32 as_strided[1,4,4](5,10,1), 7e4)'] = b1.as_strided([1, 4, 4], [5, 10, 1], 2).clamp(70000.0).stride()
    x = torch.randn(4, 1, 4, dtype=torch.float64, device=dev).permute(1, 2, 0).unsqueeze(-3)[0:3:2]
    x8 = torch.ones(1, 4, dtype=torch.int32, device=dev).expand(1, 1, 4, 4)
    out['0461 ge(i32 expand[1,1,4,4], f64 permuted)'] = torch.ge(x8, x).stride()
    xb3 = torch.randn(1, 3, dtype=torch.float64, device=dev).transpose(-2, 1)
    x2 = torch.ones(3, 2, dtype=torch.int32, device=dev).narrow(-1, 0, 1)
    out['0678 ge(f64 [3,1] t, i32 narrow)'] = torch.ge(xb3, x2).stride()
    xb1 = torch.ones(2, 4, dtype=torch.bool, device=dev)[:, 1:6:3]
    xb3 = torch.randn(1, 2, dtype=torch.float64, device=dev).transpose(-2, 1)
    out['s8_0929 maximum(f64 t, bool slice)'] = torch.maximum(xb3, xb1).stride()
    # same-dtype control: the rule is the same on both devices
    a = torch.randn(3, 4, device=dev).t(); c = torch.randn(4, 3, device=dev)
    out['control f32 t + f32'] = (a + c).stride()
    return out
c, g = run('cpu'), run('cuda')
for k in c:
    print(f"{k}: cpu {c[k]} cuda {g[k]}{'' if c[k] == g[k] else '  DIFFER'}")
