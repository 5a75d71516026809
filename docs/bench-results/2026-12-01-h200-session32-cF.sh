#!/bin/bash
# Session 32, call F (one H200): the GPU suites at this session's head (strata-alloc: helper-24's settings-parser
# changes; strata-tensor/-autograd: helper-23's hostile-input fixes), each run, then under compute-sanitizer memcheck
# (alloc, autograd; tensor with 8 threads first to fill the kernel cache, then memcheck with 1 thread), then the
# conformance binary in full (shared programs and conformance/ on the CPU and cuda:0).
rm -rf /tmp/b; mkdir -p /tmp/b && tar xJf devbin/s32/f.tar.xz -C /tmp/b && B=/tmp/b/f
mkdir -p /tmp/sc && tar xJf devbin/s32/shared_conformance.tar.xz -C /tmp/sc
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
for c in alloc autograd; do
  s=$(date +%s); timeout 90 $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda.txt 2>&1; echo "${c}_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/${c}_cuda.txt >> $P
  s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck --report-api-errors no $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda-memcheck.txt 2>&1; echo "${c} memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result" $OUT/${c}_cuda-memcheck.txt >> $P
done
s=$(date +%s); timeout 240 $B/tensor_cuda --include-ignored --test-threads 8 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda (8 threads) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/tensor_cuda.txt | head -20 >> $P
cat $P
