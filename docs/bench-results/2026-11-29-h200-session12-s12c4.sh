#!/bin/bash
# Session 12, call 4 (one H200): new PyTorch-oracle programs. The project's two fuzzers, with seeds they were not
# run with before (fuzz_core seed 32, fuzz_ops seed 31, 1000 programs each), answered by PyTorch 2.11 on the CPU; then strata's conformance
# replay of every project program (the new ones included) on the CPU and cuda:0.
cd devbin
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_CONFORMANCE_DIR=$PWD/conformance
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s0=$(now); timeout 100 python3 ../benches/anchors/fuzz_conformance_core.py --seed 32 --count 1000 --out ../conformance/zz_fuzz_core_32.json > $OUT/gen_core.txt 2>&1; echo "gen core 32 rc $? $(el $s0) s" >> $T
s0=$(now); timeout 100 python3 ../benches/anchors/fuzz_conformance_ops.py --seed 31 --count 1000 --out ../conformance/zz_fuzz_ops_31.json > $OUT/gen_ops.txt 2>&1; echo "gen ops 31 rc $? $(el $s0) s" >> $T
mkdir -p $OUT/fz; cp ../conformance/zz_*.json $OUT/fz/ 2>/dev/null
s0=$(now); timeout 330 ./n/conformance project_conformance --test-threads=1 > $OUT/proj.txt 2>&1; echo "project_conformance rc $? $(el $s0) s" >> $T
grep -E "conformance on|test result" $OUT/proj.txt >> $T
grep -c "^FAIL" $OUT/proj.txt >> $T
cat $T
