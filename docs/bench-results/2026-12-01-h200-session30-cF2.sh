#!/bin/bash
# Session 30, call F2 (one H200): issue 14's replay beside PyTorch in one call, at c7b659e's allocator (session 29's
# hot-path changes, never measured on the H200): `replay --device cuda --json --passes 5 --warmup 2` on the 29
# `*.default` traces (5 shared, 12 of traces/, 12 held out), torch_bench.py replay (default, then
# expandable_segments:True), then a 60-pass strata run. Unpinned.
mkdir -p /tmp/r && tar xJf devbin/s30/r.tar.xz -C /tmp/r && B=/tmp/r/r
P=$OUT/replay.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 5 warmup 2" >> $P; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# torch default" >> $P; timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 110 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
grep -E "^rc|^#|rc [0-9]" $P
