#!/bin/bash
# Session 30, call F1 (one H200): the GPU suites of strata-tensor and strata-autograd with the helpers' changes of
# this session (tensor: view offsets, randint bool (+ GPU test); autograd: probability-target cross_entropy, var/std
# gradients, dropout (+ GPU test)). The tensor suite runs once with 8 test threads (its cold NVRTC compiles fill the
# kernel cache), then under memcheck with one thread: that run's result is the one that counts.
mkdir -p /tmp/b && tar xJf devbin/s30/f.tar.xz -C /tmp/b && B=/tmp/b/f
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
s=$(date +%s); timeout 60 $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda.txt 2>&1; echo "autograd_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/autograd_cuda.txt >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck --report-api-errors no $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda-memcheck.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result" $OUT/autograd_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 300 $B/tensor_cuda --include-ignored --test-threads 8 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda (8 threads) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/tensor_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 200 compute-sanitizer --tool memcheck --report-api-errors no $B/tensor_cuda --include-ignored --test-threads 1 > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P; grep -c "ok$" $OUT/tensor_cuda-memcheck.txt >> $P
cat $P
