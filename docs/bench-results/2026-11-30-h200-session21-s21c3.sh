#!/bin/bash
# Session 21, call 3 (one H200): at 7dbc871, issue 14's replay of the 25 traces (`*.default`: 5 shared, 12 of
# traces/, 8 held out) by strata on the GPU beside torch_bench.py replay (default, then expandable_segments:True) in
# the same call, then strata's 5-pass run once more.
mkdir -p /tmp/b && tar xJf devbin/s21a.tar.xz -C /tmp/b && B=/tmp/b/s21a
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz $B/ho/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader >> $P
echo "# strata passes 5 warmup 2" >> $P; timeout 120 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
echo "# torch default" >> $P; timeout 200 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 200 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 5 warmup 2, again" >> $P; timeout 120 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
grep -c ns_per_op $P
grep "^rc\|^#" $P
