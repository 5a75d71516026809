"""PyTorch's 256-element add_ in bursts of 256 after a synchronisation (host time per op, median of 40)."""
import json, statistics, time, torch
t = torch.zeros(256, device="cuda"); u = torch.ones(256, device="cuda")
for _ in range(1000): t.add_(u)
b = []
for _ in range(40):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(256): t.add_(u)
    b.append((time.perf_counter() - t0) / 256)
torch.cuda.synchronize()
print(json.dumps(dict(bench="small_op", impl="torch-python", burst256_host_us=round(statistics.median(b) * 1e6, 2))))
from torch.utils.cpp_extension import load_inline
src = r"""
#include <torch/extension.h>
#include <chrono>
#include <algorithm>
double burst(torch::Tensor t, torch::Tensor u) {
  std::vector<double> b;
  for (int r = 0; r < 40; r++) {
    torch::cuda::synchronize();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 256; i++) t.add_(u);
    b.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 256);
  }
  torch::cuda::synchronize();
  std::sort(b.begin(), b.end());
  return b[b.size() / 2];
}
"""
m = load_inline("small_burst", cpp_sources=src, functions=["burst"], extra_include_paths=[], verbose=False)
m.burst(t, u)
print(json.dumps(dict(bench="small_op", impl="torch-cpp", burst256_host_us=round(m.burst(t, u), 2))))
