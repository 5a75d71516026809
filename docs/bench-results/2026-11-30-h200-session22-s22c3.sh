#!/bin/bash
# Session 22, call 3 (one H200): binaries of 0d931d3+ (history options, metadata, segment-event call sites; the
# allocator's placement rules unchanged). strata-alloc GPU tests and under compute-sanitizer memcheck; the
# strata-tensor GPU suite (filling the kernel cache) beside a 60-pass replay of the 25 traces; then 90,000 new oracle
# programs (seeds 1480-1524 of both generators, PyTorch 2.15 on the dev VM) on the CPU and cuda:0 with the cache warm.
# devbin/s22c.tar.xz (git-ignored, carried): alloc_cuda, c2, conf (test binaries), replay, torch_bench.py, straces/
# (the shared traces), fz/ (the programs).
mkdir -p /tmp/b && tar xJf devbin/s22c.tar.xz -C /tmp/b && B=/tmp/b/s22c
T=$OUT/tests.txt; P=$OUT/replay60.txt; : > $T; : > $P
now() { date +%s; }
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee -a $P >> $T
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(now); timeout 60 $B/alloc_cuda --include-ignored --test-threads=4 > $OUT/alloc.txt 2>&1; echo "alloc rc $? $(( $(now) - s )) s" >> $T
s=$(now); timeout 120 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads=4 > $OUT/alloc_memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(now) - s )) s" >> $T
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "# strata cuda passes 60 warmup 2" >> $P; s=$(now); timeout 250 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(now) - s )) s" >> $P
s=$(now); timeout 250 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T
s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 150 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T
for f in alloc alloc_memcheck c2 fz; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|ERROR SUMMARY" $OUT/$f.txt | head -20 >> $T; done
grep -c ns_per_op $P >> $T; grep "^rc" $P >> $T
cat $T
