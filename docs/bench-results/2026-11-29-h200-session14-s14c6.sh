#!/bin/bash
# Session 14, call 6 (one H200): the strata-autograd GPU test at the final commit (left out of call 5).
cd devbin
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(date +%s); timeout 300 ./n/c3 --include-ignored --test-threads=4 > $OUT/c3.txt 2>&1; echo "rc $? wall $(( $(date +%s) - s )) s"
grep -E "test result|FAILED|panicked" $OUT/c3.txt | head -5
