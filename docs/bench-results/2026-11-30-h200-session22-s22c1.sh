#!/bin/bash
# Session 22, call 1 (one H200): binaries of 99eb920 (HEAD: allocator as at 7dbc871, tensor review 6628734).
# strata-alloc GPU tests, then under compute-sanitizer memcheck (in parallel with the strata-tensor GPU suite and the
# conformance replay: shared programs and conformance/, CPU and cuda:0); then 100,000 new oracle programs (PyTorch 2.15
# on the dev VM, both generators, seeds 1400-1449) on the CPU and cuda:0.
# devbin/s22a.tar.xz (git-ignored, carried): c2 and conf (strata-tensor test binaries cuda and conformance), alloc_cuda
# (strata-alloc test binary cuda), replay, and fz/ (the 100 program files).
mkdir -p /tmp/b && tar xJf devbin/s22a.tar.xz -C /tmp/b && B=/tmp/b/s22a
T=$OUT/tests.txt; : > $T
now() { date +%s; }
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader >> $T
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(now); timeout 60 $B/alloc_cuda --include-ignored --test-threads=4 > $OUT/alloc.txt 2>&1; echo "alloc rc $? $(( $(now) - s )) s" >> $T
( s=$(now); timeout 250 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads=4 > $OUT/alloc_memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(now) - s )) s" >> $T ) &
( s=$(now); timeout 250 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$PWD/conformance timeout 250 $B/conf --include-ignored --test-threads=2 --nocapture > $OUT/conf.txt 2>&1; echo "conf rc $? $(( $(now) - s )) s" >> $T
wait
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 200 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T
for f in alloc alloc_memcheck c2 conf fz; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|allow-listed cases|ERROR SUMMARY" $OUT/$f.txt | head -20 >> $T; done
cat $T
