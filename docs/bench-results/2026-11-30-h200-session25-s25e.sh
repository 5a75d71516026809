#!/bin/bash
# Session 25, call E (one H200): binaries of 4aff05d (tensor side as at 97b4560). The whole strata-tensor GPU suite,
# and under compute-sanitizer memcheck in parallel; the conformance replay (shared programs and conformance/, CPU and
# cuda:0); then the 120,000 oracle programs of seeds 2020-2079 (both generators) on the CPU and cuda:0.
mkdir -p /tmp/b && tar xJf devbin/s25/e.tar.xz -C /tmp/b && B=/tmp/b/e
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(now); timeout 200 $B/tensor_cuda --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "tensor gpu rc $? $(( $(now) - s )) s" >> $T
( s=$(now); timeout 400 compute-sanitizer --tool memcheck $B/tensor_cuda --include-ignored --test-threads=4 > $OUT/c2_memcheck.txt 2>&1; echo "tensor memcheck rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 200 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 250 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T
wait
for f in c2 c2_memcheck conf fz; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|allow-listed cases|ERROR SUMMARY" $OUT/$f.txt | head -20 >> $T; done
cat $T
