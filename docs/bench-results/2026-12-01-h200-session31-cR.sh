#!/bin/bash
# Session 31, call R (one H200): issue 14's replay beside PyTorch in one call, at this session's head:
# `replay --device cuda --json --passes 5 --warmup 2` on the 29 `*.default` traces, torch_bench.py replay (default,
# then expandable_segments:True), then two 60-pass strata runs: unpinned (as before), then pinned to one core with
# `taskset -c 5` (to tell the allocator's cost from the host's scheduling: session 30's 60-pass dlrm_embeddingbag ran
# 32 passes at 104 ns/op, then 28 at 60 in the same process). First, PyTorch's CPU and CUDA answers to the four oracle
# programs that strata's cuda:0 answered differently in call G1 (torch_known.py).
rm -rf /tmp/r; mkdir -p /tmp/r && tar xJf devbin/s31/r.tar.xz -C /tmp/r && B=/tmp/r/r
P=$OUT/replay.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; lscpu | grep -E "NUMA node|Model name" >> $P
python3 devbin/s31/torch_known.py > $OUT/torch_known.txt 2>&1
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 5 warmup 2" >> $P; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# torch default" >> $P; timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 110 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# strata passes 60 warmup 2 taskset -c 5" >> $P; timeout 110 taskset -c 5 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
grep -E "^rc|^#|rc [0-9]" $P
