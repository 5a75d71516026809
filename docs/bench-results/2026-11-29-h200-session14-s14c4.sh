#!/bin/bash
# Session 14, call 4 (one H200): after the parity fixes (fc4163f) and the var fix (1ce839b): strata-alloc GPU tests and
# memcheck (API errors the tests provoke not reported); the 2000 new oracle programs (fuzz_ops 44, 45) on cuda:0.
cd devbin
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
echo "# c1" >> $T; ./n/c1 --include-ignored --test-threads=1 > $OUT/c1.txt 2>&1; grep -E "test result" $OUT/c1.txt >> $T
echo "# c1 memcheck" >> $T; timeout 100 compute-sanitizer --tool memcheck --report-api-errors no ./n/c1 --include-ignored --test-threads=1 > $OUT/c1_memcheck.txt 2>&1; grep -E "test result|ERROR SUMMARY" $OUT/c1_memcheck.txt >> $T
echo "# new oracle programs on cuda:0" >> $T; s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$PWD/newconf14 timeout 440 ./n/conformance conformance_runs_on_the_gpu --include-ignored --nocapture > $OUT/conf.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T; grep -E "conformance on|test result|^FAIL" $OUT/conf.txt | head -20 >> $T
ls /tmp/kc | wc -l >> $T
cat $T
