#!/bin/bash
# Session 48, call 4 (one H200), the HEAD below: strata-tensor's new GPU test of the loaders
# (model_files_load_onto_the_gpu_as_onto_the_cpu), plain and under compute-sanitizer memcheck.
B=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 60 ./t_tensor --include-ignored model_files > $O/tensor.txt 2>&1; echo "tensor model_files rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked" -A5 $O/tensor.txt | head -30 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 model_files > $O/tensor_mc.txt 2>&1; echo "memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc.txt | tr '\n' ' ')" >> $P
cd $O && tar cJf $OUT/c4.tar.xz . && cat $P
