#!/bin/bash
# Session 30, call A (one H200): the GPU suites of strata-alloc, strata-tensor and strata-autograd at session 29's
# head (plus the strided-Adam GPU test), each followed by compute-sanitizer memcheck.
mkdir -p /tmp/b && tar xJf devbin/s30/a.tar.xz -C /tmp/b && B=/tmp/b/a
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
for t in alloc_cuda tensor_cuda autograd_cuda; do
  s=$(date +%s); timeout 240 $B/$t --include-ignored --test-threads 1 > $OUT/$t.txt 2>&1; echo "$t rc $? $(( $(date +%s) - s )) s" >> $P
  grep -E "test result|FAILED|panicked" $OUT/$t.txt | head -20 >> $P
done
for t in alloc_cuda autograd_cuda tensor_cuda; do
  s=$(date +%s); timeout 200 compute-sanitizer --tool memcheck --report-api-errors no $B/$t --include-ignored --test-threads 1 > $OUT/$t-memcheck.txt 2>&1; echo "$t memcheck rc $? $(( $(date +%s) - s )) s" >> $P
  grep -E "ERROR SUMMARY|test result" $OUT/$t-memcheck.txt >> $P
done
cat $P
