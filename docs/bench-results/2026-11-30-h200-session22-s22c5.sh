#!/bin/bash
# Session 22, call 5 (one H200): strata-alloc's and strata-tensor's GPU tests at 2dd670c (throw_on_cudamalloc_oom, large_segment_size_mb,
# the pinned limits and the history options), and under compute-sanitizer memcheck.
B=devbin/s22e
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
timeout 60 $B/alloc_cuda --include-ignored --test-threads=4 2>&1 | grep -E "test result|FAILED|panicked"; echo "rc ${PIPESTATUS[0]}"
timeout 200 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads=4 2>&1 | grep -E "test result|FAILED|ERROR SUMMARY"; echo "rc ${PIPESTATUS[0]}"
# The strata-tensor GPU suite (transfers through the pinned allocator included).
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
timeout 300 $B/c2 --include-ignored --test-threads=8 2>&1 | grep -E "test result|FAILED|panicked"; echo "rc ${PIPESTATUS[0]}"
