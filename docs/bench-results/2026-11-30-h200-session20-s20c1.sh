#!/bin/bash
# Session 20, call 1 (one H200): at af07c88 (weak repetitions become strong once the workload has gone round),
# strata-alloc's GPU tests; issue 14's replay of the 17 traces (`*.default`) beside torch_bench.py replay (default,
# then expandable_segments:True) in the same call; a 60-pass run; the GPU tests under compute-sanitizer memcheck.
mkdir -p /tmp/b && tar xJf devbin/s20a.tar.xz -C /tmp/b && B=/tmp/b/s20a
mkdir -p /tmp/ta && cp traces/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
T=$OUT/tests.txt; P=$OUT/replay.txt; : > $T; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee -a $P >> $T
python3 -c "import torch; print('torch', torch.__version__)" >> $P
echo "# alloc GPU tests" >> $T; timeout 60 $B/alloc_cuda --include-ignored --test-threads=4 >> $T 2>&1; echo "rc $?" >> $T
echo "# strata passes 5 warmup 2" >> $P; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
echo "# torch default" >> $P; timeout 140 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 140 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata cuda passes 60 warmup 2" >> $P; timeout 120 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
echo "# alloc GPU tests under memcheck" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads=4 >> $T 2>&1; echo "rc $?" >> $T
grep -c ns_per_op $P
grep "^rc\|^#\|test result\|ERROR SUMMARY" $T $P
