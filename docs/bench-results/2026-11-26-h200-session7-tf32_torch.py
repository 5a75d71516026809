import torch, json
torch.backends.cuda.matmul.allow_tf32 = True
N = 8192
a = torch.randn(N, N, device="cuda"); b = torch.randn(N, N, device="cuda")
for _ in range(5): a @ b
torch.cuda.synchronize()
ts = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); a @ b; e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
ts.sort()
print(json.dumps({"exp": "tf32", "torch_mm": round(2 * N ** 3 / (ts[10] * 1e-3) / 1e12, 1)}))
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as p:
    a @ b; torch.cuda.synchronize()
print([e.key for e in p.key_averages()])
