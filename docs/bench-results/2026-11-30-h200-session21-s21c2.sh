#!/bin/bash
# Session 21, call 2 (one H200): at 7dbc871 (a wider slack for the round of a context first seen when the peak was
# set), strata-alloc's GPU tests, and under compute-sanitizer memcheck; the missing `unet_cfg_sampling.expandable`
# trace recorded again; a 60-pass replay of the 25 traces (`*.default`: 5 shared, 12 of traces/, 8 held out).
mkdir -p /tmp/b && tar xJf devbin/s21a.tar.xz -C /tmp/b && B=/tmp/b/s21a
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz $B/ho/*.default.json.gz /tmp/ta/
T=$OUT/tests.txt; P=$OUT/replay60.txt; : > $T; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee -a $P >> $T
echo "# alloc GPU tests" >> $T; timeout 60 $B/alloc_cuda --include-ignored --test-threads=4 >> $T 2>&1; echo "rc $?" >> $T
(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 benches/anchors/record_trace.py $OUT/unet_cfg_sampling.expandable.json.gz unet_cfg_sampling expandable benches/anchors/workloads_held_out/unet_cfg_sampling.py > $OUT/unet.log 2>&1; echo "unet rc $?" >> $OUT/unet.log) &
echo "# alloc GPU tests under memcheck" >> $T; timeout 200 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads=4 >> $T 2>&1; echo "rc $?" >> $T
wait
echo "# strata cuda passes 60 warmup 2" >> $P; timeout 250 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
grep -c ns_per_op $P
tail -2 $OUT/unet.log
grep "^rc\|^#\|test result\|ERROR SUMMARY" $T $P
