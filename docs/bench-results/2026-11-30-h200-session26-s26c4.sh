#!/bin/bash
# Session 26, call 4 (one H200): the conformance replay at 6c59a74 (s2150_cat_stack_0492 allow-listed on cuda:0):
# the shared programs and conformance/ (known_differences.json included), on the CPU and cuda:0.
mkdir -p /tmp/b && tar xJf devbin/s26/e.tar.xz -C /tmp/b
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(date +%s); STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 540 /tmp/b/e/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(date +%s) - s )) s"
grep -E "conformance on|test result|FAIL|stale|panicked" $OUT/conf.txt
