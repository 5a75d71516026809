#!/bin/bash
# Session 19, call 3 (one H200, the machine of call 2 still held): call 2 ran out of time compiling kernels on a cold
# cache (the conformance replay alone compiles them one at a time); the same 240,000 programs again, f2 and f3 in
# parallel, with the kernel cache call 2 left in /tmp/kc.
[ -d /tmp/b/s19b ] || { mkdir -p /tmp/b && tar xJf devbin/s19b.tar.xz -C /tmp/b; }
B=/tmp/b/s19b; ls /tmp/kc | wc -l
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
for f in f2 f3; do
  ( s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/$f timeout 420 $B/conf project_conformance --nocapture > $OUT/$f.txt 2>&1; echo "conf $f rc $? $(( $(now) - s )) s" >> $T ) &
done
wait
for f in f2 f3; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL" $OUT/$f.txt | head -20 >> $T; done
cat $T
