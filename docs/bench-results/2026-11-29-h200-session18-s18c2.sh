#!/bin/bash
# Session 18, call 2 (one H200): binaries with the CUDA cross-entropy fix (label smoothing's sum term by term; found
# by call 1: fuzz_ops.s181_cross_entropy_0624, kept as conformance/fuzz_ops_seed181.json). The strata-tensor GPU
# suite (cold kernel cache), then the conformance replay (CPU and cuda:0: the shared programs and conformance/), then
# the GPU suite under compute-sanitizer memcheck.
mkdir -p /tmp/b && tar xJf devbin/s18b.tar.xz -C /tmp/b && B=/tmp/b/s18b
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
export STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance
s=$(now); timeout 240 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T
s=$(now); timeout 150 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T
s=$(now); timeout 190 compute-sanitizer --tool memcheck --report-api-errors no $B/c2 --include-ignored --test-threads=8 > $OUT/memcheck.txt 2>&1; echo "memcheck c2 rc $? $(( $(now) - s )) s" >> $T
for f in c2 conf memcheck; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|ERROR SUMMARY" $OUT/$f.txt | head -20 >> $T; done
cat $T
