#!/bin/bash
# Session 20, call 3 (one H200): the binaries of call 2; 160,000 more of this session's oracle programs (both
# generators, seeds 640-719) on the CPU and cuda:0, beside the strata-tensor GPU suite (which fills the kernel cache).
mkdir -p /tmp/b && tar xJf devbin/s20c.tar.xz -C /tmp/b && B=/tmp/b/s20c
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
( s=$(now); timeout 230 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 400 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T
wait
for f in c2 fz; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|allow-listed cases" $OUT/$f.txt | head -20 >> $T; done
cat $T
