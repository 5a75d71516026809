#!/bin/bash
# Session 34, call A (one H200): the GPU suites at a016e75 (session 33's last head, whose last commits never ran on a
# GPU: 1bfaa92's weak-repetition rule, helper-25's per-pool statistics, helper-26's guard/unbind/tied-weight fixes,
# a016e75's mend), binaries built from a clean worktree of a016e75: strata-alloc and strata-autograd each run, then
# under compute-sanitizer memcheck; strata-tensor with 8 threads (fills the kernel cache), then under memcheck.
rm -rf /tmp/b; mkdir -p /tmp/b && tar xJf devbin/s34/f.tar.xz -C /tmp/b && B=/tmp/b/f
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
for c in alloc autograd; do
  s=$(date +%s); timeout 90 $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda.txt 2>&1; echo "${c}_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/${c}_cuda.txt >> $P
  s=$(date +%s); timeout 90 compute-sanitizer --tool memcheck --report-api-errors no $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda-memcheck.txt 2>&1; echo "${c} memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result" $OUT/${c}_cuda-memcheck.txt >> $P
done
s=$(date +%s); timeout 260 $B/tensor_cuda --include-ignored --test-threads 8 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda (8 threads) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/tensor_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 200 compute-sanitizer --tool memcheck --report-api-errors no $B/tensor_cuda --include-ignored --test-threads 1 > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P
cat $P
