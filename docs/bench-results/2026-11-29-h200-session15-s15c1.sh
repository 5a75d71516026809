#!/bin/bash
# Session 15, call 1 (one H200): after the fill_span fix (dc6a5f1): strata-alloc GPU tests and memcheck on them,
# strata's replay of the 17 traces through the CUDA driver (5 passes, 2 warm-up), and new PyTorch-oracle programs
# (fuzz_ops seeds 47 and 48, fuzz_core seed 49; PyTorch 2.11 on this machine's CPU) generated meanwhile, to be
# replayed by strata on the dev VM's CPU.
cd devbin
T=$OUT/tests.txt; : > $T
mkdir -p $OUT/fz /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
for s in 47 48; do (timeout 150 python3 ../benches/anchors/fuzz_conformance_ops.py --seed $s --count 1000 --out $OUT/fz/fuzz_ops_seed$s.json > $OUT/fz/gen_ops_$s.txt 2>&1; echo "gen ops $s rc $?" >> $OUT/fz/gen_ops_$s.txt) & done
(timeout 150 python3 ../benches/anchors/fuzz_conformance_core.py --seed 49 --count 1000 --out $OUT/fz/fuzz_core_seed49.json > $OUT/fz/gen_core_49.txt 2>&1; echo "gen core 49 rc $?" >> $OUT/fz/gen_core_49.txt) &
echo "# c1 (strata-alloc cuda tests)" >> $T; timeout 90 ./n/c1 --include-ignored --test-threads=1 > $OUT/c1.txt 2>&1; echo "rc $?" >> $T; grep -E "test result|FAILED|panicked" $OUT/c1.txt | head -5 >> $T
echo "# replay cuda passes 5 warmup 2" >> $T; timeout 100 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay.txt 2>&1; echo "rc $?" >> $T
echo "# memcheck c1" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/c1 --include-ignored --test-threads=1 2>&1 | grep -E "test result|ERROR SUMMARY" >> $T
wait
tail -n 3 $OUT/fz/gen_*.txt >> $T
ls -la $OUT/fz >> $T
cat $T
