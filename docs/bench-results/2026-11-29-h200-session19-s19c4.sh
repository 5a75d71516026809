#!/bin/bash
# Session 19, call 4 (one H200): test binaries of 7a1a0ae (the CPU's sums in PyTorch's order; the GPU code is that
# of call 1). The strata-tensor GPU suite filling the kernel cache, in parallel with the conformance replay (shared
# programs and conformance/, CPU and cuda:0); then session 18's last 80,000 programs (both generators, seeds
# 380-419), which ran out of device time on cuda:0 in session 18.
mkdir -p /tmp/b && tar xJf devbin/s19c.tar.xz -C /tmp/b && B=/tmp/b/s19c
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
export STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch
( s=$(now); timeout 230 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 230 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T
wait
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fzq timeout 200 $B/conf project_conformance --nocapture > $OUT/fzq.txt 2>&1; echo "conf fzq rc $? $(( $(now) - s )) s" >> $T
for f in c2 conf fzq; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|allow-listed cases" $OUT/$f.txt | head -20 >> $T; done
cat $T
