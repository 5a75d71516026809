#!/bin/bash
# Session 26, call 2 (one H200): private memory pools on the GPU (strata-alloc's cuda suite, the new pool test under
# compute-sanitizer memcheck, the facade's mem_pool test with STRATA_DEVICE=cuda); the conformance replay (shared
# programs and conformance/, CPU and cuda:0) and 60,000 new oracle programs (seeds 2140-2169 of both generators).
mkdir -p /tmp/b && tar xJf devbin/s26/d.tar.xz -C /tmp/b && B=/tmp/b/d
mkdir -p /tmp/fz && tar xJf devbin/s26/fz.tar.xz -C /tmp/fz
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(now); timeout 200 $B/alloc_cuda --include-ignored --test-threads=1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc cuda rc $? $(( $(now) - s )) s" >> $T
s=$(now); timeout 200 compute-sanitizer --tool memcheck $B/alloc_cuda --include-ignored private_pool > $OUT/alloc_memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(now) - s )) s" >> $T
s=$(now); STRATA_DEVICE=cuda timeout 200 $B/mem_pool > $OUT/facade.txt 2>&1; echo "facade rc $? $(( $(now) - s )) s" >> $T
s=$(now); STRATA_DEVICE=cuda timeout 200 compute-sanitizer --tool memcheck $B/mem_pool > $OUT/facade_memcheck.txt 2>&1; echo "facade memcheck rc $? $(( $(now) - s )) s" >> $T
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 200 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fz/s26 timeout 250 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T
for f in alloc_cuda alloc_memcheck facade facade_memcheck conf fz; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|allow-listed cases|ERROR SUMMARY" $OUT/$f.txt | head -20 >> $T; done
cat $T
