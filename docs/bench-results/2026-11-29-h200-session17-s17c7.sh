#!/bin/bash
# Session 17, call 7 (one H200): the strata-tensor GPU suite and the conformance replay (CPU and cuda:0) at 0ae53a2
# (error names: results allocated under their op's name, cumsum/softmax allocate their result first; matmul and clamp
# fixes of 67ffac8), in parallel with a cold kernel cache, as in call 1.
mkdir -p /tmp/b && tar xJf devbin/s17e.tar.xz -C /tmp/b && B=/tmp/b/s17e
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
export STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance
( s=$(now); timeout 400 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
( s=$(now); timeout 480 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T ) &
wait
for f in c2 conf; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL" $OUT/$f.txt | head -20 >> $T; done
cat $T
