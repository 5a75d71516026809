#!/bin/bash
# Session 13, call 2 (one H200): new PyTorch-oracle programs from the project's two fuzzers with seeds never run
# before (fuzz_ops 40 and 41, fuzz_core 42 and 43, 1000 programs each), answered by PyTorch 2.11; then strata's
# conformance replay of every project program (the new ones included) on the CPU and cuda:0 (binary of ec5865f).
cd devbin
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_CONFORMANCE_DIR=$PWD/conformance
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
python3 -c "import torch; print('torch', torch.__version__)" >> $T
for s in 40 41; do s0=$(now); timeout 100 python3 ../benches/anchors/fuzz_conformance_ops.py --seed $s --count 1000 --out ../conformance/zz_fuzz_ops_$s.json > $OUT/gen_ops_$s.txt 2>&1; echo "gen ops $s rc $? $(el $s0) s" >> $T; done
for s in 42 43; do s0=$(now); timeout 100 python3 ../benches/anchors/fuzz_conformance_core.py --seed $s --count 1000 --out ../conformance/zz_fuzz_core_$s.json > $OUT/gen_core_$s.txt 2>&1; echo "gen core $s rc $? $(el $s0) s" >> $T; done
mkdir -p $OUT/fz; cp ../conformance/zz_*.json $OUT/fz/ 2>/dev/null
s0=$(now); timeout 300 ./n/conformance project_conformance --test-threads=1 --nocapture > $OUT/proj.txt 2>&1; echo "project_conformance rc $? $(el $s0) s" >> $T
grep -E "conformance on|test result" $OUT/proj.txt >> $T
grep -c "^FAIL" $OUT/proj.txt >> $T
grep "^FAIL" $OUT/proj.txt | head -40 >> $T
cat $T
