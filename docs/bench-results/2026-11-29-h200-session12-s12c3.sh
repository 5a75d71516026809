#!/bin/bash
# Session 12, call 3 (one H200, the same machine as call 2 when it is still held): the GPU conformance replay with
# the kernel cache that call 2's tests left in /tmp/kc (if the machine is fresh, the cache starts empty), then again
# with it warm.
cd devbin
export STRATA_CONFORMANCE_DIR=$PWD/conformance
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
echo "entries before $(ls /tmp/kc 2>/dev/null | grep -c cubin$)" >> $T
echo "# conformance, cache from the tests" >> $T; s=$(now); timeout 150 ./n/conformance --include-ignored --test-threads=3 > $OUT/conf1.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T
grep -E "test result|FAILED|panicked" $OUT/conf1.txt | head -5 >> $T
echo "entries $(ls /tmp/kc | grep -c cubin$)" >> $T
echo "# conformance, warm cache" >> $T; s=$(now); timeout 100 ./n/conformance --include-ignored --test-threads=3 > $OUT/conf2.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T
grep -E "test result|FAILED|panicked" $OUT/conf2.txt | head -5 >> $T
cat $T
