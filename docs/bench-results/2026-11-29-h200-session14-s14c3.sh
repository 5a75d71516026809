#!/bin/bash
# Session 14, call 3 (one H200): new PyTorch-oracle programs from the project's fuzzers with seeds never run before
# (fuzz_ops 44 and 45, fuzz_core 46; 1000 programs each), answered by the machine's PyTorch 2.11, then strata's
# conformance replay of exactly those files on the CPU and cuda:0 (strata-tensor unchanged since a5df53f; binary of
# session 13's call 4).
cd devbin
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
mkdir -p $OUT/fz
for s in 44 45; do s0=$(now); timeout 90 python3 ../benches/anchors/fuzz_conformance_ops.py --seed $s --count 1000 --out $OUT/fz/fuzz_ops_seed$s.json > $OUT/gen_ops_$s.txt 2>&1; echo "gen ops $s rc $? $(el $s0) s" >> $T; done
for s in 46; do s0=$(now); timeout 90 python3 ../benches/anchors/fuzz_conformance_core.py --seed $s --count 1000 --out $OUT/fz/fuzz_core_seed$s.json > $OUT/gen_core_$s.txt 2>&1; echo "gen core $s rc $? $(el $s0) s" >> $T; done
ls -la $OUT/fz >> $T
s0=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$OUT/fz timeout 330 ./n/conformance project_conformance --test-threads=1 --nocapture > $OUT/proj.txt 2>&1; echo "project_conformance rc $? $(el $s0) s" >> $T
grep -E "conformance on|test result" $OUT/proj.txt >> $T
grep -c "^FAIL" $OUT/proj.txt >> $T
grep "^FAIL" $OUT/proj.txt | head -40 >> $T
cat $T
