#!/bin/bash
# Session 44, call 2 (one H200), test binaries of the HEAD below, after the session's merges (the CUDA Adam and
# addcmul kernels aligned with the CPU ones, the optimizer options): strata-alloc, strata-autograd and strata-tensor
# GPU suites, each then under compute-sanitizer memcheck (tensor: generated_tensors, then the adam, sgd and addcmul
# tests). The failing tests' panics are kept in the summary (tensor_cuda.txt may not come back: 8 files at most).
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 60 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda-memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/alloc_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 130 $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda.txt 2>&1; echo "autograd_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/autograd_cuda.txt >> $P
s=$(date +%s); timeout 100 compute-sanitizer --tool memcheck $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda-memcheck.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/autograd_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 280 $B/tensor_cuda --include-ignored --test-threads 16 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" -A4 $OUT/tensor_cuda.txt | head -60 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck $B/tensor_cuda --include-ignored --test-threads 1 generated_tensors > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck (generated_tensors) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck $B/tensor_cuda --include-ignored --test-threads 1 adam sgd addcmul > $OUT/tensor_cuda-memcheck-optim.txt 2>&1; echo "tensor memcheck (adam, sgd, addcmul) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck-optim.txt >> $P
cat $P
