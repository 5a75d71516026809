#!/bin/bash
# Session 33, call R (one H200), binaries of 40db407 (helper-25's reserved_bytes_by_private_pools): strata-alloc's GPU
# tests and memcheck; issue 14's replay beside PyTorch: `replay --device cuda --json --passes 5 --warmup 2` on the 29
# `*.default` traces, torch_bench.py replay (default, then expandable_segments:True), then 60-pass strata runs in
# alphabetical and in reverse order.
rm -rf /tmp/r; mkdir -p /tmp/r && tar xJf devbin/s33/r.tar.xz -C /tmp/r && B=/tmp/r/r
T=$OUT/tests.txt; : > $T
echo "# alloc cuda" >> $T; timeout 120 $B/alloc_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck alloc cuda" >> $T; timeout 200 compute-sanitizer --tool memcheck $B/alloc_cuda --include-ignored --test-threads=1 2>&1 | tail -3 >> $T
P=$OUT/replay.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; lscpu | grep -E "NUMA node|Model name" >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 5 warmup 2" >> $P; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# torch default" >> $P; timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 110 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# strata passes 60 warmup 2 reverse" >> $P; timeout 110 $B/replay --device cuda --json --passes 60 --warmup 2 $(ls /tmp/ta/*.default.json.gz | sort -r) >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
cat $T; grep -E "^rc|^#|rc [0-9]" $P
