#!/bin/bash
# Session 35, calls C and D (one H200): PyTorch-oracle programs on cuda:0 with bb2e518's conformance binary (CUDA
# sums merge neighbouring lanes first), 8 processes of 15 files, sharing one kernel cache.
# C: seeds 2920-2979 of fuzz_conformance_{core,ops}.py (120,000 programs, PyTorch 2.15 on the dev VM's CPU, where
#    they passed at the end of session 34; never run on a GPU before). Usage: bash c.sh devbin/s35/c.tar.xz c
# D: seeds 2740-2859 of fuzz_conformance_ops.py (120,000; session 34's calls B/C ran them with the old order and
#    failed s2750_mse_loss_0045). Usage: bash c.sh devbin/s34/g2.tar.xz g2 devbin/s35/cb.tar.xz
rm -rf /tmp/x; mkdir -p /tmp/x; tar xJf $1 -C /tmp/x; C=/tmp/x/$2/conformance
if [ -n "$3" ]; then tar xJf $3 -C /tmp/x; C=/tmp/x/cb/conformance; fi
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/x/$2/fzs/p$i timeout 400 $C --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/x/p$i.txt 2>&1; r=$?; echo "p$i rc $r $(( $(date +%s) - s )) s: $(grep -h "conformance on" /tmp/x/p$i.txt | tr '\n' ' ')" >> $P; grep -h "^FAIL" /tmp/x/p$i.txt | head -5 >> $P ) &
done
wait
cat $P
