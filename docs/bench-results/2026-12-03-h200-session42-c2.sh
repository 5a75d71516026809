#!/bin/bash
# Session 42, call 2 (one H200), test binaries of the commit in HEAD (after call 1's fixes and the warm-path commits):
# strata-alloc's GPU suite and strata-autograd's, each then under compute-sanitizer memcheck; strata-tensor's GPU suite,
# then its arange/generation test under memcheck.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 60 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda-memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/alloc_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 130 $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda.txt 2>&1; echo "autograd_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/autograd_cuda.txt >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda-memcheck.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/autograd_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 290 $B/tensor_cuda --include-ignored --test-threads 16 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/tensor_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck $B/tensor_cuda --include-ignored --test-threads 1 generated_tensors > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck (generated_tensors) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P
cat $P
