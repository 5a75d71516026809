#!/bin/bash
# Session 27, call 6 (one H200): binaries of 1756e16 (the hostile-input fixes): strata-tensor's and strata-autograd's
# GPU suites, memcheck on both, gpt under autocast, and seeds 2260-2289 (both generators) on cuda:0.
mkdir -p /tmp/b && tar xJf devbin/s27c/g.tar.xz -C /tmp/b && mkdir -p /tmp/fz && tar xJf /tmp/b/g6/fz.tar.xz -C /tmp/fz
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
G=/tmp/b/g6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s); timeout 120 $G/tcuda --include-ignored > $OUT/tcuda.txt 2>&1; echo "tcuda rc $? $(( $(date +%s) - s )) s"; grep -E "test result" $OUT/tcuda.txt
s=$(date +%s); timeout 90 $G/acuda --include-ignored --test-threads 1 > $OUT/acuda.txt 2>&1; echo "acuda rc $? $(( $(date +%s) - s )) s"; grep -E "test result" $OUT/acuda.txt
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck --report-api-errors no $G/acuda --include-ignored --test-threads 1 > $OUT/acuda-memcheck.txt 2>&1; echo "memcheck acuda rc $? $(( $(date +%s) - s )) s"; grep -E "ERROR SUMMARY|test result" $OUT/acuda-memcheck.txt
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $G/tcuda --include-ignored --test-threads 1 scatter gather index > $OUT/tcuda-memcheck.txt 2>&1; echo "memcheck tcuda rc $? $(( $(date +%s) - s )) s"; grep -E "ERROR SUMMARY|test result" $OUT/tcuda-memcheck.txt
echo "# gpt autocast"; timeout 90 $G/gpt --precision autocast-bf16 --steps 10 --warmup 3 --batch 8 > $OUT/gpt.txt 2>&1; echo rc $?; grep -o '"loss_last":[0-9.]*\|"step_ms":[0-9.]*' $OUT/gpt.txt
s=$(date +%s); STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fz/s27b timeout 240 $G/conf project_conformance --nocapture > $OUT/fz27b.txt 2>&1; echo "fz27b rc $? $(( $(date +%s) - s )) s"; grep -E "conformance on|test result" $OUT/fz27b.txt
