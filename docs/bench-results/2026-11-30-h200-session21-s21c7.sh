#!/bin/bash
# Session 21, call 7 (one H200): the binaries of call 6; 160,000 more new oracle programs (both generators, seeds
# 1020-1099) on the CPU and cuda:0; and call 6's one cuda:0 difference (fuzz_ops.s1003_mse_loss_0091, a weighted
# mse_loss whose weights -1e200, 1e200, 0.75, 1.0 sum to 1.75 in order and to 0 in pairs) asked of PyTorch on the GPU.
mkdir -p /tmp/b && tar xJf devbin/s21d.tar.xz -C /tmp/b && B=/tmp/b/s21d
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
python3 - >> $T 2>&1 <<'PY'
import torch, torch.nn.functional as F
for dev in ["cpu", "cuda"]:
    x1 = torch.tensor([3.875, 0.375, 1.75, 1.375], dtype=torch.float64, device=dev)
    x2 = torch.tensor([-2.75, -2.375, -0.375, -1.75], dtype=torch.float64, device=dev)
    xb3 = torch.tensor([-1e200, -7.5, 1e200, -7.5, 0.75, -7.5, 1.0, -7.5], dtype=torch.float64, device=dev)
    w = xb3[0::2]
    print(dev, torch.__version__, "mse_loss", F.mse_loss(x1, x2, reduction="mean", weight=w).item(), "w.sum", w.sum().item())
PY
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 400 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T
for f in fz; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|allow-listed cases" $OUT/$f.txt | head -20 >> $T; done
cat $T
