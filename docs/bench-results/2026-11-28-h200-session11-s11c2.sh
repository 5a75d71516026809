#!/bin/bash
# Session 11, call 2 (one H200): after 7ab9394: strata-alloc GPU tests and memcheck, strata-tensor GPU tests,
# memcheck on the small checkpointed GPT; then does a trace's slowness follow its place in the run? The 5-pass
# replay of every trace in reverse order, then in the usual order.
cd devbin
T=$OUT/tests.txt; : > $T
echo "# alloc_cuda" >> $T; timeout 60 ./n/c1 --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck alloc_cuda" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/c1 --include-ignored --test-threads=1 2>&1 | tail -2 >> $T
echo "# tensor_cuda" >> $T; timeout 200 ./n/c2 --include-ignored --test-threads=8 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck small checkpointed gpt" >> $T; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no ./n/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16 2>&1 | grep -o '"loss_last":[0-9.]*\|ERROR SUMMARY.*' >> $T
cat $T
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2 reverse order" >> $P; timeout 60 ./n/replay --device cuda --json --passes 5 --warmup 2 $(ls /tmp/ta/*.default.json.gz | sort -r) >> $P 2>&1
echo "# strata passes 5 warmup 2 usual order" >> $P; timeout 60 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
grep -c ns_per_op $P
