#!/bin/bash
# Session 11, call 8 (one H200): after the review commit 315dd83 (one walk over a placement's stitched mappings,
# shared helpers): strata-alloc GPU tests and memcheck, the 5-pass replay of every trace on the GPU.
cd devbin
T=$OUT/tests.txt; : > $T
echo "# alloc_cuda" >> $T; timeout 60 ./n/c1 --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck alloc_cuda" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/c1 --include-ignored --test-threads=1 2>&1 | tail -2 >> $T
cat $T
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
timeout 60 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay.txt 2>&1
grep -c ns_per_op $OUT/replay.txt
