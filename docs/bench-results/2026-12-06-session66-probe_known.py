# Session 66: PyTorch's answers, on the CPU and on CUDA, to the two programs of this session's fresh vectors that
# strata's GPU answered differently from PyTorch's CPU (conformance/README.md, "Known differences").
import torch
print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")
DEVS = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
v = [16777216, 9007199523176448, -9007199254740992, 77, 77, 77, 77, 77, 77, 16777217, -9223372036854775808, -9007199791611904,
     77, 77, 77, 77, 77, 77, 4611686018427387903, -257, 33554434, 77, 77, 77, 77, 77, 77, 4611686293305294848,
     -18014399583223808, 1047, 77, 77, 77, 77, 77, 77]
for dev in DEVS:
    x = torch.tensor(v, dtype=torch.int64, device=dev).reshape(12, 3)
    r = x[0:13:3].to(torch.float64).mean()
    print("s9901_int_float_0396", dev, repr(r.item()))
nan, inf = float("nan"), float("inf")
d = [-1.375, 2.625, 1.375, 1.25, -2.25, -2.25, 1.0, -3.375, -inf, -3.625, -1.625, -2.625, 3.875, -3.625, -2.375, 0.0, -1.125,
     -0.0, -0.5, 2.0, -3.5, 0.0, 1.375, -0.5, -0.125, 2.25, -0.375, 0.0, 1e200, -3.75, -2.5, 4.0, 1e200, -1.625, 0.25, -2.875,
     -0.125, -1.625, 1.625, 2.25, -1.75, 3.625, 0.375, 0.125, 1.875, nan, -1.0, 2.5]
for dev in DEVS:
    x = torch.tensor(d, dtype=torch.float64, device=dev).reshape(4, 3, 4).transpose(-3, 1)
    r = torch.nn.functional.layer_norm(x, [4])
    print("s6600_hostile_norm_scatter_0310", dev, "rows 6, 8, 10:", [r.reshape(12, 4)[i].tolist() for i in (6, 8, 10)])
