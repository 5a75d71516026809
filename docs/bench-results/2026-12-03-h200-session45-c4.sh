#!/bin/bash
# Session 45, call 4 (the merged tree, 968da1f): the GPU suites of strata-alloc (the allocator split), strata-autograd
# (SGD, GradScaler, clip) and strata-tensor (softmax rows, pow), 16 test threads as in session 44, then
# compute-sanitizer memcheck on strata-alloc's suite, the row-kernel tests (softmax, cross-entropy, layer norm),
# generated_tensors (pow among its ops), the adam/sgd/addcmul tests and strata-autograd's suite.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 20 ./t_alloc --include-ignored > $OUT/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $OUT/alloc.txt)" >> $P
s=$(date +%s); timeout 20 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $OUT/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $OUT/alloc_mc.txt | tr '\n' ' ')" >> $P
s=$(date +%s); timeout 70 ./t_autograd --include-ignored --test-threads 8 > $OUT/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $OUT/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $OUT/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 190 ./t_tensor --include-ignored --test-threads 16 > $OUT/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $OUT/tensor.txt)" >> $P
grep -E "FAILED|panicked" -A3 $OUT/tensor.txt | head -30 >> $P
s=$(date +%s); timeout 40 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 4 softmax cross_entropy layer_norm generated_tensors adam sgd addcmul > $OUT/tensor_mc.txt 2>&1; echo "tensor memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $OUT/tensor_mc.txt | tr '\n' ' ')" >> $P
s=$(date +%s); timeout 20 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $OUT/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $OUT/autograd_mc.txt | tr '\n' ' ')" >> $P
cat $P
