#!/bin/bash
# Session 17, call 1 (one H200): correctness of sessions 15-16's code on cuda:0 (binaries of bc4e52d):
# the strata-tensor GPU suite, the conformance replay (shared programs and every project program, CPU and cuda:0),
# in parallel, with a cold kernel cache written to $OUT/kc (carried to later calls); then the strata-alloc and
# strata-autograd GPU suites, and strata-alloc's under compute-sanitizer memcheck.
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=$OUT/kc
export STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader >> $T
mkdir -p /tmp/b && tar xJf devbin/s17.tar.xz -C /tmp/b && B=/tmp/b/s17
( s=$(now); timeout 430 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
( s=$(now); timeout 520 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); timeout 90 $B/c1 --include-ignored --test-threads=1 > $OUT/c1.txt 2>&1; echo "c1 (alloc gpu) rc $? $(( $(now) - s )) s" >> $T
s=$(now); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/c1 --include-ignored --test-threads=1 > $OUT/c1_mc.txt 2>&1; echo "c1 memcheck rc $? $(( $(now) - s )) s" >> $T
s=$(now); timeout 200 $B/c3 --include-ignored --test-threads=3 > $OUT/c3.txt 2>&1; echo "c3 (autograd gpu) rc $? $(( $(now) - s )) s" >> $T
wait
for f in c1 c1_mc c2 c3 conf; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|ERROR SUMMARY|conformance on|^FAIL" $OUT/$f.txt | head -30 >> $T; done
du -sh $OUT/kc >> $T; ls $OUT/kc | wc -l >> $T
cat $T
