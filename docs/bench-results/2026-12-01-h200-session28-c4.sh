#!/bin/bash
# Session 28, call 4 (one H200): seeds 2350-2379 of both generators (60,000 new programs, all pass on the CPU) on
# cuda:0 with baf480b's conformance binary; a cold machine, so a first run fills the kernel cache, a second one runs warm.
mkdir -p /tmp/b /tmp/fz && tar xJf devbin/s28/f.tar.xz -C /tmp/b && tar xJf devbin/s28/fz3.tar.xz -C /tmp/fz
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
T=$OUT/fz.txt; : > $T
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $T
for i in 1 2; do
  s=$(date +%s); STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fz/s28c timeout 270 /tmp/b/f/conf project_conformance --nocapture > $OUT/fz_$i.txt 2>&1; rc=$?; echo "run $i rc $rc $(( $(date +%s) - s )) s" >> $T
  grep -E "conformance on|test result|FAIL" $OUT/fz_$i.txt | head -8 >> $T
  [ $rc = 0 ] && break
done
cat $T
