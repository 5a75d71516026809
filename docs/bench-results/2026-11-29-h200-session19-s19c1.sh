#!/bin/bash
# Session 19, call 1 (one H200): test binaries of 9dc67c7 (var/std refine the mean once). In parallel: the
# strata-tensor GPU suite then the same under compute-sanitizer memcheck; the conformance replay (the 407 shared
# programs and conformance/, on the CPU and cuda:0) then 120,000 new fuzz programs (f1: both generators, seeds
# 420-479); the strata-alloc and strata-autograd GPU suites and the interop tests.
mkdir -p /tmp/b && tar xJf devbin/s19a.tar.xz -C /tmp/b && B=/tmp/b/s19a
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
export STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch
(
  s=$(now); timeout 230 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T
  s=$(now); timeout 200 compute-sanitizer --tool memcheck --report-api-errors no $B/c2 --include-ignored --test-threads=8 > /tmp/mc.txt 2>&1; echo "memcheck c2 rc $? $(( $(now) - s )) s" >> $T
  grep -E "test result|FAILED|panicked|ERROR SUMMARY|Invalid|========= [A-Z]" /tmp/mc.txt | head -40 > $OUT/memcheck.txt
) &
(
  s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 200 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T
  s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/f1 timeout 330 $B/conf project_conformance --nocapture > $OUT/f1.txt 2>&1; echo "conf f1 rc $? $(( $(now) - s )) s" >> $T
) &
(
  O=$OUT/gpu_other.txt
  s=$(now); timeout 120 $B/ac --include-ignored --test-threads=4 >> $O 2>&1; echo "alloc gpu rc $? $(( $(now) - s )) s" >> $T
  s=$(now); timeout 200 $B/gc --include-ignored --test-threads=4 >> $O 2>&1; echo "autograd gpu rc $? $(( $(now) - s )) s" >> $T
  s=$(now); timeout 60 $B/ip --include-ignored >> $O 2>&1; echo "interop rc $? $(( $(now) - s )) s" >> $T
) &
wait
for f in c2 conf f1 gpu_other; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL" $OUT/$f.txt | head -20 >> $T; done
echo "## memcheck" >> $T; grep -E "ERROR SUMMARY|test result" $OUT/memcheck.txt >> $T
cat $T
