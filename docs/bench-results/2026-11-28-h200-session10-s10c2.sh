#!/bin/bash
# Session 10, call 2 (one H200): which conformance case hangs or is slow on the GPU (each test alone, one thread,
# every case named with its time); t5_varlen replayed after 1ab3f24.
cd devbin; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance STRATA_CONFORMANCE_VERBOSE=1
for t in pytorch_conformance project_conformance; do
  timeout 100 ./n/conformance --exact $t --nocapture --test-threads=1 > $OUT/$t.out 2> $OUT/$t.err; echo "$t rc $?"
  tail -c 300 $OUT/$t.err; echo; grep -E "conformance on|test result|FAIL" $OUT/$t.out | head
done
timeout 100 ./n/replay --device cuda --json --passes 60 --warmup 2 ../traces/t5_varlen.default.json.gz > $OUT/t5.json 2>&1
timeout 60 ./n/replay --device sim --json --passes 20 --warmup 2 ../traces/t5_varlen.default.json.gz >> $OUT/t5.json 2>&1
