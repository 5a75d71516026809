#!/bin/bash
# Session 12, call 2 (one H200): after the hostile-input sweep (24ad937). strata-tensor and strata-autograd GPU
# tests (kernel cache cold at first), the GPT at seed 0 (autocast), memcheck on the small checkpointed GPT, then
# the GPU conformance replay with the cache the tests left, and again with it warm.
cd devbin
export STRATA_CONFORMANCE_DIR=$PWD/conformance
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc; rm -rf /tmp/kc
echo "# tensor_cuda, cold cache" >> $T; s=$(now); timeout 230 ./n/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T
grep -E "test result|FAILED|panicked" $OUT/c2.txt | head -5 >> $T
echo "# autograd_cuda" >> $T; s=$(now); timeout 120 ./n/c3 --include-ignored --test-threads=8 > $OUT/c3.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T
grep -E "test result|FAILED|panicked" $OUT/c3.txt | head -5 >> $T
echo "# gpt seed 0 autocast" >> $T; timeout 60 ./n/gpt --precision autocast-bf16 > $OUT/gpt.txt 2>&1; echo "rc $?" >> $T; grep -o '"loss_last":[0-9.]*\|"ms_per_step":[0-9.]*\|"peak_reserved[a-z_]*":[0-9]*' $OUT/gpt.txt >> $T
G="./n/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16"
echo "# memcheck small gpt" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no $G 2>&1 | grep -o '"loss_last":[0-9.]*\|ERROR SUMMARY.*' >> $T
echo "entries $(ls /tmp/kc | grep -c cubin$)" >> $T
cat $T
