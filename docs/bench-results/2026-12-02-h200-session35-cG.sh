#!/bin/bash
# Session 35, call G (one H200): issue 14's replay at the session's final allocator (binary of the HEAD in g/HEAD)
# beside PyTorch: `replay --device cuda --json --passes 5 --warmup 2` on the 29 `*.default` traces (shared, project
# and held-out), then torch_bench.py replay (default, then expandable_segments:True), as session 34's call D.
rm -rf /tmp/g; mkdir -p /tmp/g && tar xJf devbin/s35/g.tar.xz -C /tmp && B=/tmp/g
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; cat $B/HEAD >> $P
R=$OUT/replay.txt; : > $R
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 5 warmup 2" >> $R; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $R 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R
echo "# torch default" >> $R; timeout 150 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R; cat /tmp/tr1.json >> $R; echo >> $R
echo "# torch expandable" >> $R; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R; cat /tmp/tr2.json >> $R; echo >> $R
grep -E "^rc|^#" $R >> $P
cat $P
