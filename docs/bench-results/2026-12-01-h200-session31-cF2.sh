#!/bin/bash
# Session 31, call F2 (same H200, right after F1): strata-tensor's GPU suite under compute-sanitizer memcheck (one
# thread, kernel cache filled by F1), then the conformance test binary in full (`--include-ignored`: the shared
# programs and the project's conformance/ on the CPU and cuda:0, the four new known differences allow-listed on cuda:0).
[ -d /tmp/b/f ] || { mkdir -p /tmp/b && tar xJf devbin/s31/f.tar.xz -C /tmp/b; }; B=/tmp/b/f
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
s=$(date +%s); timeout 260 compute-sanitizer --tool memcheck --report-api-errors no $B/tensor_cuda --include-ignored --test-threads 1 > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$PWD/devbin/s31/shared_conformance timeout 280 $B/conformance --include-ignored --test-threads 3 --nocapture > $OUT/conformance.txt 2>&1; echo "conformance rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "^conformance|^project|test result|FAIL" $OUT/conformance.txt | head -20 >> $P
cat $P
