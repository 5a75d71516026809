#!/bin/bash
# Session 23, call 3 (one H200): binaries of 82bd213 (log_softmax's 2-byte last-dim rounding on the CPU, cross_entropy
# with probability targets in PyTorch's dtypes). strata-tensor's GPU suite (filling the kernel cache), the conformance
# programs on cuda:0 (shared and project), 21,000 new oracle programs (20 files of seeds 1870-1889 `ops`, and seed
# 1366 `ops`) on the CPU and cuda:0, then memcheck on the suite's softmax and cross-entropy tests.
mkdir -p /tmp/b && tar xJf devbin/s23c/s23b.tar.xz -C /tmp/b && B=/tmp/b/s23b
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
s=$(date +%s); timeout 300 $B/tcuda --include-ignored --test-threads=8 > $OUT/tcuda.txt 2>&1; echo "tcuda rc $? $(( $(date +%s) - s )) s"
grep -E "test result|FAILED|panicked" $OUT/tcuda.txt | head -10
s=$(date +%s); timeout 120 $B/conf --include-ignored --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(date +%s) - s )) s"
grep -E "conformance on|test result|^FAIL" $OUT/conf.txt | head -20
s=$(date +%s); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 150 $B/conf project_conformance --include-ignored --nocapture > $OUT/fz.txt 2>&1; echo "fz rc $? $(( $(date +%s) - s )) s"
grep -E "conformance on|test result|^FAIL" $OUT/fz.txt | head -20
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/tcuda --include-ignored --test-threads=4 softmax cross_entropy > $OUT/memcheck.txt 2>&1; echo "memcheck rc $? $(( $(date +%s) - s )) s"
grep -E "test result|ERROR SUMMARY|FAILED" $OUT/memcheck.txt | head
