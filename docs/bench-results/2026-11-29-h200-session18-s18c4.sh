#!/bin/bash
# Session 18, call 4 (one H200): binaries with short float rows of cumsum scanned in order on the GPU (found by call
# 3: fuzz_ops.s162_cumsum_0664, kept as conformance/fuzz_ops_seed162.json). The strata-tensor GPU suite (cold kernel
# cache), the conformance replay (CPU and cuda:0: the shared programs and conformance/), the 40,000 programs of
# fzr_a again, then the GPU suite under compute-sanitizer memcheck.
mkdir -p /tmp/b && tar xJf devbin/s18d.tar.xz -C /tmp/b && B=/tmp/b/s18d
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
export STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance
s=$(now); timeout 220 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T
s=$(now); timeout 120 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fzr_a timeout 60 $B/conf project_conformance --nocapture > $OUT/conf_fzr_a.txt 2>&1; echo "conf fzr_a rc $? $(( $(now) - s )) s" >> $T
s=$(now); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/c2 --include-ignored --test-threads=8 > $OUT/memcheck.txt 2>&1; echo "memcheck c2 rc $? $(( $(now) - s )) s" >> $T
for f in c2 conf conf_fzr_a memcheck; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|ERROR SUMMARY" $OUT/$f.txt | head -20 >> $T; done
cat $T
