#!/bin/bash
# Session 31, call F1 (one H200): the GPU suites with this session's changes (strata-alloc: should_split under
# expandable segments, record_stream on a private pool's block, garbage-collection order; strata-tensor: layer_norm's
# sign of zero in ln_fwd/ln_row + a GPU test; strata-autograd: optimizer checks), each run, then under
# compute-sanitizer memcheck; PyTorch's CPU and CUDA answers to the four oracle programs strata's cuda:0 answered
# differently in call G1. The tensor suite first runs with 8 threads (fills the kernel cache).
rm -rf /tmp/b; mkdir -p /tmp/b && tar xJf devbin/s31/f.tar.xz -C /tmp/b && B=/tmp/b/f
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
python3 devbin/s31/torch_known.py >> $P 2>&1
for c in alloc autograd; do
  s=$(date +%s); timeout 90 $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda.txt 2>&1; echo "${c}_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/${c}_cuda.txt >> $P
  s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck --report-api-errors no $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda-memcheck.txt 2>&1; echo "${c} memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result" $OUT/${c}_cuda-memcheck.txt >> $P
done
s=$(date +%s); timeout 300 $B/tensor_cuda --include-ignored --test-threads 8 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda (8 threads) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/tensor_cuda.txt | head -20 >> $P
cat $P
