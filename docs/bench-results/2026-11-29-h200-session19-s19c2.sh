#!/bin/bash
# Session 19, call 2 (one H200): the conformance binary of 9dc67c7 on 240,000 more fuzz programs (both generators,
# PyTorch 2.15 on the dev VM's CPU): f2 seeds 480-559, f3 seeds 560-599, on the CPU and cuda:0.
mkdir -p /tmp/b && tar xJf devbin/s19b.tar.xz -C /tmp/b && B=/tmp/b/s19b
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
for f in f2 f3; do
  s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/$f timeout 250 $B/conf project_conformance --nocapture > $OUT/$f.txt 2>&1; echo "conf $f rc $? $(( $(now) - s )) s" >> $T
done
for f in f2 f3; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL" $OUT/$f.txt | head -20 >> $T; done
cat $T
