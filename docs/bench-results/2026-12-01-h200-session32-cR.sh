#!/bin/bash
# Session 32, call R (one H200): issue 14's replay beside PyTorch in one call, at this session's head (its allocator
# includes helper-24's settings-parser changes, none on the allocation path): `replay --device cuda --json --passes 5
# --warmup 2` on the 29 `*.default` traces, torch_bench.py replay (default, then expandable_segments:True), then a
# 60-pass strata run.
rm -rf /tmp/r; mkdir -p /tmp/r && tar xJf devbin/s32/r.tar.xz -C /tmp/r && B=/tmp/r/r
P=$OUT/replay.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; lscpu | grep -E "NUMA node|Model name" >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 5 warmup 2" >> $P; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# torch default" >> $P; timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 110 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
grep -E "^rc|^#|rc [0-9]" $P
