#!/bin/bash
# Session 48, call 3 (one H200), binaries of the HEAD below (the session's last code: the loaders' and the optimizer
# state fixes on top of calls 1-2): strata-alloc's, strata-tensor's and strata-autograd's GPU suites, and
# strata-tensor's Adam, transfer and creation tests plus strata-autograd's suite under compute-sanitizer memcheck.
B=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 30 ./t_alloc --include-ignored > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
s=$(date +%s); timeout 220 ./t_tensor --include-ignored --test-threads 16 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/tensor.txt | head -30 >> $P
s=$(date +%s); timeout 90 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 adam transfers creation > $O/tensor_mc.txt 2>&1; echo "tensor adam+transfers+creation memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc.txt | tr '\n' ' ')" >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $O/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/autograd_mc.txt | tr '\n' ' ')" >> $P
cd $O && tar cJf $OUT/c3.tar.xz . && cat $P
