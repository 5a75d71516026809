#!/bin/bash
# Session 23, call 1 (one H200): binaries of 6ce758d's allocator (unchanged since f017ff5). Issue 14's replay of the 25
# traces (`*.default`: 5 shared, 12 of traces/, 8 held out): strata unpinned and pinned to one core (taskset -c 5),
# PyTorch's torch_bench.py replay pinned the same way (default, then expandable_segments:True), then a 60-pass
# strata run pinned.
B=devbin/s23a
P=$OUT/replay.txt; : > $P
nproc >> $P; lscpu | grep -E 'Model name|MHz|NUMA node\(s\)' >> $P
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata unpinned passes 5 warmup 2" >> $P; timeout 100 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# strata pinned passes 5 warmup 2" >> $P; timeout 100 taskset -c 5 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# torch default pinned" >> $P; timeout 170 taskset -c 5 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable pinned" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 170 taskset -c 5 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata pinned passes 60 warmup 2" >> $P; timeout 130 taskset -c 5 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
grep -E "^rc|^#" $P
