#!/bin/bash
# Session 35, call B (one H200): PyTorch-oracle programs on cuda:0 with bb2e518's conformance binary (CUDA sums merge
# neighbouring lanes first): seeds 2860-2919 of fuzz_conformance_{core,ops}.py (120,000 programs, PyTorch 2.15 on the
# dev VM's CPU; session 34's call E ran them with the old order), 8 processes of 15 files; then strata-alloc's GPU
# suite alone (call A ran it beside the conformance processes, whose allocations moved the device's free memory).
rm -rf /tmp/e /tmp/a; mkdir -p /tmp/e; tar xJf devbin/s34/e.tar.xz -C /tmp/e; tar xJf devbin/s35/a.tar.xz -C /tmp
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
s=$(date +%s); timeout 90 /tmp/a/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda alone rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt >> $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/e/e/fzs/p$i timeout 300 /tmp/a/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/e/p$i.txt 2>&1; r=$?; echo "p$i rc $r $(( $(date +%s) - s )) s: $(grep -h "conformance on" /tmp/e/p$i.txt | tr '\n' ' ')" >> $P; grep -h "^FAIL" /tmp/e/p$i.txt | head -5 >> $P ) &
done
wait
cat $P
