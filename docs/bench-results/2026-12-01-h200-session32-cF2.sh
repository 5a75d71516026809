#!/bin/bash
# Session 32, call F2 (same H200, right after F): strata-tensor's GPU suite under compute-sanitizer memcheck (one
# thread, kernel cache filled by F), then the conformance test binary in full.
[ -d /tmp/b/f ] || { mkdir -p /tmp/b && tar xJf devbin/s32/f.tar.xz -C /tmp/b; }; B=/tmp/b/f
[ -d /tmp/sc/shared_conformance ] || { mkdir -p /tmp/sc && tar xJf devbin/s32/shared_conformance.tar.xz -C /tmp/sc; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
s=$(date +%s); timeout 280 compute-sanitizer --tool memcheck --report-api-errors no $B/tensor_cuda --include-ignored --test-threads 1 > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=/tmp/sc/shared_conformance timeout 280 $B/conformance --include-ignored --test-threads 3 --nocapture > $OUT/conformance.txt 2>&1; echo "conformance rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "conformance on|^project|test result|FAIL" $OUT/conformance.txt | head -20 >> $P
cat $P
