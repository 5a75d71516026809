#!/bin/bash
# Session 24, call 6 (one H200): the review commit 7638412 (runtime driver_call helper): stream, priority and NCCL
# one-rank GPU tests, then memcheck on them.
export NCCL_NVLS_ENABLE=0 STRATA_KERNEL_CACHE_PATH=/tmp/kc
B=devbin/s24/r
timeout 200 $B/tensor_cuda --include-ignored stream nccl 2>&1 | grep -E "^test |FAILED|panicked|test result"
timeout 250 compute-sanitizer --tool memcheck --report-api-errors no $B/tensor_cuda --include-ignored --test-threads=1 stream nccl 2>&1 | tail -3
