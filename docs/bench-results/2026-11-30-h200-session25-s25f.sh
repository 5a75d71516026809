#!/bin/bash
# Session 25, call F (one H200): the conformance replay at the commit that allow-lists seeds 2068 and 2054 on cuda:0.
xz -dc devbin/s25/conf_f.xz > /tmp/conf && chmod +x /tmp/conf
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 300 /tmp/conf --include-ignored --test-threads=2 --nocapture 2>&1 | grep -E "conformance on|test result|FAIL|stale|panicked"
