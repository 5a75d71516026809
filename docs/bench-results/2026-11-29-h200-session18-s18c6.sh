#!/bin/bash
# Session 18, call 6 (one H200): binaries of 6e5f65b. 80,000 more programs (fuzz_conformance_ops.py and
# fuzz_conformance_core.py, seeds 380-419 each, PyTorch 2.15 on the dev VM) on the CPU and
# cuda:0, with the strata-tensor GPU suite filling the kernel cache in parallel.
mkdir -p /tmp/b && tar xJf devbin/s18e.tar.xz -C /tmp/b && B=/tmp/b/s18e
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
( s=$(now); timeout 190 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fzq timeout 190 $B/conf project_conformance --nocapture > $OUT/conf_fzq.txt 2>&1; echo "conf fzq rc $? $(( $(now) - s )) s" >> $T
wait
for f in c2 conf_fzq; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL" $OUT/$f.txt | head -20 >> $T; done
cat $T
