#!/bin/bash
# Session 34, call C (one H200): PyTorch-oracle programs on cuda:0: seeds 2740-2859 of
# fuzz_conformance_ops.py (120,000 programs, PyTorch 2.15 on the dev VM's CPU, where they passed at 17b07e3),
# in 8 parallel processes of `conformance conformance_runs_on_the_gpu` (one folder of 15 files each; binary of
# a016e75), sharing one kernel cache; then the project's conformance vectors (conformance/) on the CPU and
# cuda:0, which call B's full run could not find; then issue 14's replay at a016e75, 5 passes after 2 warm-up, on the
# 29 traces.
rm -rf /tmp/g; mkdir -p /tmp/g; tar xJf devbin/s34/g2.tar.xz -C /tmp/g
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/g/g2/fzs/p$i timeout ${T:-420} /tmp/g/g2/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/g/p$i.txt 2>&1; echo "p$i rc $? $(( $(date +%s) - s )) s" >> $P ) &
done
wait
for i in 0 1 2 3 4 5 6 7; do echo "p$i: $(grep -h "conformance on" /tmp/g/p$i.txt | tr '\n' ' ')| $(grep -h "test result" /tmp/g/p$i.txt)" >> $P; done
grep -h -o "fuzz_[a-z]*\.s[0-9]*_[a-z_0-9]*" /tmp/g/p*.txt | sort -u | head -40 >> $P
grep -h -B2 -A8 "FAIL\|panicked" /tmp/g/p*.txt | head -80 >> $P
ls /tmp/kc | wc -l >> $P
mkdir -p /tmp/sc && tar xJf devbin/s34/shared_conformance.tar.xz -C /tmp/sc
s=$(date +%s); STRATA_CONFORMANCE_DIR=/tmp/sc/shared_conformance STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 200 /tmp/g/g2/conformance --include-ignored --test-threads 2 --nocapture project_conformance conformance_runs_on_the_gpu > $OUT/conformance.txt 2>&1; echo "project conformance rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "conformance on|test result|FAIL" $OUT/conformance.txt | head -20 >> $P
mkdir -p /tmp/rr && tar xJf devbin/s34/rr.tar.xz -C /tmp/rr
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz /tmp/rr/rr/straces/*.default.json.gz /tmp/ta/
ls /tmp/ta | wc -l >> $P
s=$(date +%s); timeout 90 /tmp/rr/rr/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay.txt 2>&1; echo "replay rc $? $(( $(date +%s) - s )) s" >> $P
cat $P
