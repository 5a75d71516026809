#!/bin/bash
# Session 22, call 2 (one H200): binaries of 99eb920 (HEAD; allocator as at 7dbc871). PyTorch's std/var of six equal
# values of ±1e200 on the CPU and CUDA (the one cuda:0 difference of call 1); 150,000 more new oracle programs (PyTorch
# 2.15 on the dev VM, seeds 1340-1399 and 1450-1464, both generators) on the CPU and cuda:0; then issue 14's replay of
# the 25 traces (`*.default`: 5 shared, 12 of traces/, 8 held out) by strata on the GPU (5 passes after 2 warm-up
# passes) beside torch_bench.py replay (default, then expandable_segments:True) in the same call, then a 60-pass run.
mkdir -p /tmp/b && tar xJf devbin/s22b.tar.xz -C /tmp/b && B=/tmp/b/s22b
T=$OUT/tests.txt; P=$OUT/replay.txt; : > $T; : > $P
now() { date +%s; }
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee -a $P >> $T
timeout 60 python3 $B/torch_var.py >> $T 2>&1
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 200 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T
grep -E "test result|conformance on|^FAIL" $OUT/fz.txt | head -20 >> $T
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "# strata passes 5 warmup 2" >> $P; timeout 120 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
echo "# torch default" >> $P; timeout 200 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 200 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata cuda passes 60 warmup 2" >> $P; timeout 200 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
grep -c ns_per_op $P >> $T
grep "^rc\|^#" $P >> $T
cat $T
