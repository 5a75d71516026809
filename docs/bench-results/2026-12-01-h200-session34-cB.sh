#!/bin/bash
# Session 34, call G (one H200): PyTorch-oracle programs on cuda:0: seeds 2740-2859 of
# fuzz_conformance_core.py (120,000 programs, PyTorch 2.15 on the dev VM's CPU, where they passed at 17b07e3),
# in 8 parallel processes of `conformance conformance_runs_on_the_gpu` (one folder of 15 files each; binary of
# a016e75), sharing one kernel cache; then the conformance test binary in full (the shared programs and
# conformance/ on the CPU and cuda:0), as call F2 of session 33 ran it.
rm -rf /tmp/g; mkdir -p /tmp/g; tar xJf devbin/s34/g.tar.xz -C /tmp/g
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/g/g/fzs/p$i timeout ${T:-420} /tmp/g/g/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/g/p$i.txt 2>&1; echo "p$i rc $? $(( $(date +%s) - s )) s" >> $P ) &
done
wait
for i in 0 1 2 3 4 5 6 7; do echo "p$i: $(grep -h "conformance on" /tmp/g/p$i.txt | tr '\n' ' ')| $(grep -h "test result" /tmp/g/p$i.txt)" >> $P; done
grep -h -o "fuzz_[a-z]*\.s[0-9]*_[a-z_0-9]*" /tmp/g/p*.txt | sort -u | head -40 >> $P
grep -h -B2 -A8 "FAIL\|panicked" /tmp/g/p*.txt | head -80 >> $P
ls /tmp/kc | wc -l >> $P
mkdir -p /tmp/sc && tar xJf devbin/s34/shared_conformance.tar.xz -C /tmp/sc
s=$(date +%s); STRATA_CONFORMANCE_DIR=/tmp/sc/shared_conformance timeout 250 /tmp/g/g/conformance --include-ignored --test-threads 3 --nocapture > $OUT/conformance.txt 2>&1; echo "conformance rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "conformance on|^project|test result|FAIL" $OUT/conformance.txt | head -20 >> $P
cat $P
