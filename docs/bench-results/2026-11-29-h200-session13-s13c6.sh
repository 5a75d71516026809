#!/bin/bash
# Session 13, call 6 (one H200): what call 4 left out: the strata-autograd GPU test after the two hostile-input
# sweeps, and conformance/fuzz_ops_seed41.json (seed 41 drawn again with the generator's exact-sum check) on cuda:0.
cd devbin
T=$OUT/tests.txt; : > $T
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
echo "# c3 (strata-autograd cuda)" >> $T; timeout 200 ./n/c3 --include-ignored > $OUT/c3.txt 2>&1; echo "rc $?" >> $T; grep -E "test result|FAILED|panicked" $OUT/c3.txt | head -5 >> $T
echo "# fuzz_ops_seed41.json on cuda:0" >> $T; STRATA_CONFORMANCE_PROJECT_DIR=$PWD/newconf41 timeout 200 ./n/conformance conformance_runs_on_the_gpu --include-ignored --nocapture > $OUT/conf.txt 2>&1; echo "rc $?" >> $T; grep -E "conformance on|test result|^FAIL" $OUT/conf.txt | head -10 >> $T
cat $T
