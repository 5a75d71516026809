#!/bin/bash
# Session 27, call 1 (one H200): conformance of 120,000 oracle programs on cuda:0 (seeds 2170-2199 of both
# generators; core 2200-2229 and ops 2230-2259), then the GPU suites of strata-tensor and strata-autograd after the
# hostile-input sweep (ead1894), memcheck on autograd's cuda suite.
mkdir -p /tmp/b && tar xJf devbin/s27/g.tar.xz -C /tmp/b && mkdir -p /tmp/fz && tar xJf /tmp/b/g/fz.tar.xz -C /tmp/fz
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s); timeout 120 /tmp/b/g/acuda --include-ignored --test-threads 1 > $OUT/acuda.txt 2>&1; echo "acuda rc $? $(( $(date +%s) - s )) s"; grep -E "test result" $OUT/acuda.txt
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no /tmp/b/g/acuda --include-ignored --test-threads 1 > $OUT/acuda-memcheck.txt 2>&1; echo "memcheck rc $? $(( $(date +%s) - s )) s"; grep -E "ERROR SUMMARY|test result" $OUT/acuda-memcheck.txt
s=$(date +%s); STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fz/s26b timeout 280 /tmp/b/g/conf project_conformance --nocapture > $OUT/fz26b.txt 2>&1; echo "fz26b rc $? $(( $(date +%s) - s )) s"
grep -E "conformance on|test result|FAIL" $OUT/fz26b.txt | head -20
