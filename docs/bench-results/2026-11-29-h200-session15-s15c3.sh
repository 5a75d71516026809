#!/bin/bash
# Session 15, call 3 (one H200): strata-tensor GPU tests after `empty` of bool starts false and the ops' output
# buffers moved to Tensor::uninit (binary of 02c01cb, kernel cache cold), the new
# empty_bool_starts_false_gpu first.
cd devbin
T=$OUT/tests.txt; : > $T
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(date +%s); timeout 40 ./n/c2 --include-ignored empty_bool > $OUT/c2_empty.txt 2>&1; echo "empty_bool rc $? $(( $(date +%s) - s )) s" >> $T; grep -E "test result|FAILED|panicked" $OUT/c2_empty.txt | head -5 >> $T
s=$(date +%s); timeout 210 ./n/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "all rc $? $(( $(date +%s) - s )) s" >> $T; grep -E "test result|FAILED|panicked" $OUT/c2.txt | head -8 >> $T
cat $T
