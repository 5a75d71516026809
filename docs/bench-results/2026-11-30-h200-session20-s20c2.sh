#!/bin/bash
# Session 20, call 2 (one H200): test binaries of af07c88 (the tensor code is that of session 19's 4499aae; its GPU
# code that of 7a1a0ae). The strata-tensor GPU suite filling the kernel cache, in parallel with the conformance
# replay (shared programs and conformance/, CPU and cuda:0); then 80,000 of this session's new oracle programs (both
# generators, seeds 600-639) on the CPU and cuda:0.
mkdir -p /tmp/b && tar xJf devbin/s20b.tar.xz -C /tmp/b && B=/tmp/b/s20b
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
export STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch
( s=$(now); timeout 230 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 230 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T
wait
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 250 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T
for f in c2 conf fz; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|allow-listed cases" $OUT/$f.txt | head -20 >> $T; done
cat $T
