#!/bin/bash
# Session 52, call 3 (one H200), binaries of the HEAD below: strata-autograd's GPU suite (9 tests, with the new
# test of empty parameters stepping on the GPU as on the CPU: helper-78's AdamW fix) and the same under
# compute-sanitizer memcheck.
B=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o3; mkdir -p $O
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 60 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $O/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/autograd_mc.txt | tr '\n' ' ')" >> $P
cd $O && tar cJf $OUT/c3.tar.xz . && cat $P
