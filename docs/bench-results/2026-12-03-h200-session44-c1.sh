#!/bin/bash
# Session 44, call 1 (one H200), test binaries of 4f97f4a (session 43's tree: host-side autograd changes not yet
# run on a GPU): strata-alloc, strata-autograd and strata-tensor GPU suites, each under compute-sanitizer memcheck
# (tensor: the generated_tensors test and the optimizer tests); then the GPT example next to torch_gpt.py, f32 and
# autocast-bf16, default sizes.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 60 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda-memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/alloc_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 130 $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda.txt 2>&1; echo "autograd_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/autograd_cuda.txt >> $P
s=$(date +%s); timeout 100 compute-sanitizer --tool memcheck $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda-memcheck.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/autograd_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 250 $B/tensor_cuda --include-ignored --test-threads 16 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/tensor_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck $B/tensor_cuda --include-ignored --test-threads 1 generated_tensors > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck (generated_tensors) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck $B/tensor_cuda --include-ignored --test-threads 1 adam sgd > $OUT/tensor_cuda-memcheck-optim.txt 2>&1; echo "tensor memcheck (adam, sgd) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck-optim.txt >> $P
for pr in f32 autocast-bf16; do
s=$(date +%s); STRATA_DEVICE=cuda timeout 90 $B/gpt --precision $pr > $OUT/gpt_strata_$pr.txt 2>&1; echo "gpt strata $pr rc $? $(( $(date +%s) - s )) s" >> $P; tail -2 $OUT/gpt_strata_$pr.txt >> $P
s=$(date +%s); timeout 90 python3 $B/torch_gpt.py --precision $pr > $OUT/gpt_torch_$pr.txt 2>&1; echo "gpt torch $pr rc $? $(( $(date +%s) - s )) s" >> $P; tail -1 $OUT/gpt_torch_$pr.txt >> $P
done
cat $P
