#!/bin/bash
# TF32 8192^3 under ncu (clocks locked to base by ncu's default): strata's gpu_bench and PyTorch's mm,
# kernel name, grid, duration and SM clock.
cd devbin; mkdir -p n; tar xJf s7c5.tar.xz -C n
M="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y,launch__registers_per_thread"
timeout 90 ncu --metrics $M -k regex:"gemm|xmma" --launch-skip 3 --launch-count 1 ./n/gpu_bench --only matmul8192_tf32 --iters 10 2>&1 | grep -v "^==PROF==" | tail -12
cat > /tmp/t.py <<'PY'
import torch
torch.backends.cuda.matmul.allow_tf32 = True
a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
for _ in range(6): a @ b
torch.cuda.synchronize()
PY
timeout 90 ncu --metrics $M -k regex:"gemm|xmma" --launch-skip 3 --launch-count 1 python3 /tmp/t.py 2>&1 | grep -v "^==PROF==" | tail -12
