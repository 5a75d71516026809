#!/bin/bash
# Session 18, call 5 (one H200): binaries of 6e5f65b. 80,000 more programs of fuzz_conformance_ops.py (the generator
# whose programs found this session's GPU differences; seeds 300-379, PyTorch 2.15 on the dev VM) on the CPU and
# cuda:0, with the strata-tensor GPU suite filling the kernel cache in parallel.
mkdir -p /tmp/b && tar xJf devbin/s18e.tar.xz -C /tmp/b && B=/tmp/b/s18e
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
( s=$(now); timeout 200 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fzo timeout 240 $B/conf project_conformance --nocapture > $OUT/conf_fzo.txt 2>&1; echo "conf fzo rc $? $(( $(now) - s )) s" >> $T
wait
for f in c2 conf_fzo; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL" $OUT/$f.txt | head -20 >> $T; done
cat $T
