#!/bin/bash
# Session 32, call G (one H200): PyTorch-oracle programs on cuda:0: seeds 2500-2579 of
# fuzz_conformance_{core,ops}.py (160,000 programs, PyTorch 2.15 on the dev VM's CPU, where strata passed
# 160,000/160,000), in 8 parallel processes of `conformance conformance_runs_on_the_gpu` (one folder of 20 files
# each), sharing one kernel cache.
rm -rf /tmp/g; mkdir -p /tmp/g; tar xJf devbin/s32/g.tar.xz -C /tmp/g
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/g/fzs/p$i timeout ${T:-500} /tmp/g/conformance --exact conformance_runs_on_the_gpu --include-ignored > $OUT/p$i.txt 2>&1; echo "p$i rc $? $(( $(date +%s) - s )) s" >> $P ) &
done
wait
grep -h "conformance on\|test result" $OUT/p*.txt >> $P
grep -h -o "fuzz_[a-z]*\.s[0-9]*_[a-z_0-9]*" $OUT/p*.txt | sort -u | head -40 >> $P
ls /tmp/kc | wc -l >> $P
cat $P
