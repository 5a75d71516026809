#!/bin/bash
# Session 28, call 2 (one H200): PyTorch-oracle programs on cuda:0 with the conformance binary of baf480b:
# seeds 2290-2304 (session 27's, CPU only until now), 2305-2319 and 2320-2349 of both generators (new; all pass on the CPU).
mkdir -p /tmp/b /tmp/fz && tar xJf devbin/s28/f.tar.xz -C /tmp/b && tar xJf devbin/s28/fz1.tar.xz -C /tmp/fz && tar xJf devbin/s28/fz2.tar.xz -C /tmp/fz
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
T=$OUT/fz.txt; : > $T
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $T
for d in s27c s28 s28b; do
  s=$(date +%s); STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fz/$d timeout ${TL:-170} /tmp/b/f/conf project_conformance --nocapture > $OUT/fz_$d.txt 2>&1; echo "$d rc $? $(( $(date +%s) - s )) s" >> $T
  grep -E "conformance on|test result|FAIL" $OUT/fz_$d.txt | head -8 >> $T
done
cat $T
