#!/bin/bash
# Session 18, call 1 (one H200): binaries of f697169 (f16/bf16 div and mul by an expanded operand of another dtype).
# The strata-tensor GPU suite and the conformance replay (CPU and cuda:0: the shared programs and conformance/) in
# parallel with a cold kernel cache, then the session's 80,000 new oracle programs (devbin/s18/fz*) on both devices.
mkdir -p /tmp/b && tar xJf devbin/s18.tar.xz -C /tmp/b && B=/tmp/b/s18
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
export STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance
( s=$(now); timeout 400 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
( s=$(now); timeout 450 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T ) &
wait
for d in fz fz2 fz3 fz4; do
  s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/$d timeout 100 $B/conf project_conformance --nocapture > $OUT/conf_$d.txt 2>&1
  echo "conf $d rc $? $(( $(now) - s )) s" >> $T
done
for f in c2 conf conf_fz conf_fz2 conf_fz3 conf_fz4; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL" $OUT/$f.txt | head -20 >> $T; done
cat $T
