#!/bin/bash
# Session 12, call 5 (one H200, the machine of call 4): fuzz_core with another seed (33; seed 32 made PyTorch die
# of a floating-point exception), then the project's conformance replay (with call 4's fuzz_ops seed 31 in
# conformance/) on the CPU and cuda:0, three threads, the kernel cache of call 4 in /tmp/kc.
cd devbin
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_CONFORMANCE_DIR=$PWD/conformance
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
echo "cache entries $(ls /tmp/kc 2>/dev/null | grep -c cubin$)" >> $T
s0=$(now); timeout 60 python3 ../benches/anchors/fuzz_conformance_core.py --seed 33 --count 1000 --out ../conformance/zz_fuzz_core_33.json > $OUT/gen_core.txt 2>&1; echo "gen core 33 rc $? $(el $s0) s" >> $T
mkdir -p $OUT/fz; cp ../conformance/zz_fuzz_core_33.json $OUT/fz/ 2>/dev/null
s0=$(now); timeout 400 ./n/conformance project_conformance --test-threads=1 --nocapture > $OUT/proj.txt 2>&1; echo "project_conformance rc $? $(el $s0) s" >> $T
grep -E "conformance on|test result" $OUT/proj.txt >> $T
grep "^FAIL" $OUT/proj.txt | head -30 >> $T
echo "cache entries $(ls /tmp/kc 2>/dev/null | grep -c cubin$)" >> $T
cat $T
