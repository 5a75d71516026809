#!/bin/bash
# Session 42, call 1 (one H200), test binaries of the commit in HEAD (68c629c): the device's memory as the driver
# reports it; strata-autograd's GPU suite (with the new in-place-on-a-view test) and strata-tensor's, each then under
# compute-sanitizer memcheck.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P
python3 -c "import torch; f,t=torch.cuda.mem_get_info(); print('mem_get_info total', t, 'free', f)" >> $P 2>&1
s=$(date +%s); timeout 150 $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda.txt 2>&1; echo "autograd_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/autograd_cuda.txt >> $P
s=$(date +%s); timeout 100 compute-sanitizer --tool memcheck $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda-memcheck.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/autograd_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 200 $B/tensor_cuda --include-ignored --test-threads 8 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/tensor_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 130 compute-sanitizer --tool memcheck $B/tensor_cuda --include-ignored --test-threads 1 > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P
cat $P
