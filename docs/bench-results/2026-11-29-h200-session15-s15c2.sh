#!/bin/bash
# Session 15, call 2 (one H200): the final allocator code (4610451: placements ranked again when a hold is given up;
# expandable/ split): strata-alloc GPU tests and memcheck on them, strata's replay of the 17 traces through the CUDA
# driver (5 passes, 2 warm-up), twice, to show the host's spread.
cd devbin
T=$OUT/tests.txt; : > $T
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
echo "# c1 (strata-alloc cuda tests)" >> $T; timeout 90 ./n/c1 --include-ignored --test-threads=1 > $OUT/c1.txt 2>&1; echo "rc $?" >> $T; grep -E "test result|FAILED|panicked" $OUT/c1.txt | head -5 >> $T
for r in 1 2; do echo "# replay cuda passes 5 warmup 2, run $r" >> $T; timeout 100 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay$r.txt 2>&1; echo "rc $?" >> $T; done
echo "# memcheck c1" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/c1 --include-ignored --test-threads=1 2>&1 | grep -E "test result|ERROR SUMMARY" >> $T
cat $T
