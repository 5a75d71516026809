#!/bin/bash
# Session 34, call E (one H200): PyTorch-oracle programs on cuda:0: seeds 2860-2919 of
# fuzz_conformance_{core,ops}.py (120,000 programs, PyTorch 2.15 on the dev VM's CPU, where they passed at 6f943e0), in
# 8 parallel processes of `conformance conformance_runs_on_the_gpu` (15 files each; binary of 6f943e0, strata-tensor
# as at a016e75), sharing one kernel cache. Each process's result is written as it finishes.
rm -rf /tmp/e; mkdir -p /tmp/e; tar xJf devbin/s34/e.tar.xz -C /tmp/e
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/e/e/fzs/p$i timeout ${T:-130} /tmp/e/e/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/e/p$i.txt 2>&1; r=$?; echo "p$i rc $r $(( $(date +%s) - s )) s: $(grep -h "conformance on" /tmp/e/p$i.txt | tr '\n' ' ')" >> $P; grep -h "^FAIL" /tmp/e/p$i.txt | head -5 >> $P ) &
done
wait
cat $P
