#!/bin/bash
# Session 36, call C (one H200): the strata-alloc GPU suite at the review's mend (c/HEAD), alone and under
# compute-sanitizer memcheck.
rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf devbin/s36/c.tar.xz -C /tmp && B=/tmp/c
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 90 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda-memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/alloc_cuda-memcheck.txt >> $P
cat $P
