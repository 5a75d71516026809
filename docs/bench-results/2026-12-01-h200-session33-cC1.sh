#!/bin/bash
# Session 33, call C1 (one H200): the headline figures of issues 11-13 at this session's head (a49a1f3), strata beside
# PyTorch in one call: gpu_bench beside torch_mission.py small_op/sum/matmul, torch_matmul_extra.py and torch_bench.py
# elementwise/transfers; memory_hungry (bf16, f32) beside torch_mission.py mlp48; transformer_ops beside
# torch_transformer_ops.py.
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf devbin/s33/c.tar.xz -C /tmp/c && B=/tmp/c/c
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/c1.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> $P; nproc >> $P
python3 -c 'import torch; print("torch", torch.__version__)' >> $P 2>&1
s=$(date +%s); t() { echo "# t $(( $(date +%s) - s )) $1" >> $P; }
t gpu_bench; timeout 150 $B/gpu_bench >> $P 2>&1
t torch_mission; timeout 150 python3 $B/torch_mission.py small_op sum matmul >> $P 2>&1
t matmul_extra; timeout 90 python3 benches/anchors/torch_matmul_extra.py >> $P 2>&1
t torch_bench; mkdir -p /tmp/tt; timeout 90 python3 $B/torch_bench.py /tmp/tt /tmp/tbe.json elementwise transfer > /dev/null 2>&1; cat /tmp/tbe.json >> $P; echo >> $P
t small_op_again; timeout 30 $B/gpu_bench --only small_op >> $P 2>&1; timeout 60 python3 $B/torch_mission.py small_op >> $P 2>&1
t mlp48; for f in "--dtype bf16" "--dtype f32"; do echo "# memory_hungry $f" >> $P; timeout 60 $B/memory_hungry $f >> $P 2>&1; done
timeout 150 python3 $B/torch_mission.py mlp48 >> $P 2>&1
t transformer_ops; timeout 90 $B/transformer_ops >> $P 2>&1; timeout 120 python3 benches/anchors/torch_transformer_ops.py >> $P 2>&1
t end
grep -E "^# t" $P
