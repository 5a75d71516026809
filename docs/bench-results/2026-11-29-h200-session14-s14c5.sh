#!/bin/bash
# Session 14, call 5 (one H200): the final commit (c142484): strata-tensor and strata-alloc GPU tests
# (kernel cache cold), the GPT at seed 0 with autocast, memcheck on the small checkpointed GPT and on the alloc tests.
cd devbin
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
for b in c2 c1; do echo "# $b" >> $T; s=$(now); timeout 240 ./n/$b --include-ignored --test-threads=8 > $OUT/$b.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T; grep -E "test result|FAILED|panicked" $OUT/$b.txt | head -5 >> $T; done
echo "# gpt seed 0 autocast" >> $T; timeout 60 ./n/gpt --precision autocast-bf16 > $OUT/gpt.txt 2>&1; echo "rc $?" >> $T; grep -o '"loss_last":[0-9.]*\|"step_ms":[0-9.]*\|"peak_reserved":[0-9]*' $OUT/gpt.txt >> $T
G="./n/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16"
echo "# memcheck small gpt" >> $T; timeout 100 compute-sanitizer --tool memcheck --report-api-errors no $G 2>&1 | grep -o '"loss_last":[0-9.]*\|ERROR SUMMARY.*' >> $T
echo "# memcheck c1" >> $T; timeout 60 compute-sanitizer --tool memcheck --report-api-errors no ./n/c1 --include-ignored --test-threads=1 2>&1 | grep -E "test result|ERROR SUMMARY" >> $T
cat $T
