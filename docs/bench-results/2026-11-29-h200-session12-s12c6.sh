#!/bin/bash
# Session 12, call 6 (one H200): after 0cfd3b0 (planners crate-private) and the cross-entropy target-range record:
# strata-tensor GPU tests (cold kernel cache), the GPT at seed 0 (autocast), memcheck on the small checkpointed GPT.
cd devbin
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
echo "# tensor_cuda" >> $T; s=$(now); timeout 230 ./n/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T
grep -E "test result|FAILED|panicked" $OUT/c2.txt | head -5 >> $T
echo "# gpt seed 0 autocast" >> $T; timeout 60 ./n/gpt --precision autocast-bf16 > $OUT/gpt.txt 2>&1; echo "rc $?" >> $T; grep -o '"loss_last":[0-9.]*\|"step_ms":[0-9.]*\|"peak_reserved":[0-9]*' $OUT/gpt.txt >> $T
G="./n/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16"
echo "# memcheck small gpt" >> $T; timeout 100 compute-sanitizer --tool memcheck --report-api-errors no $G 2>&1 | grep -o '"loss_last":[0-9.]*\|ERROR SUMMARY.*' >> $T
cat $T
