#!/bin/bash
# Session 17, call 6 (one H200): binaries of 6bdf98b (the history's stream overflow; the tensor fixes of 67ffac8):
# the GPT at seed 0 with bf16 autocast (sessions 12-14: loss_last 7.7947, about 48 ms a step, peak reserved 4215 MB),
# the small checkpointed GPT under compute-sanitizer memcheck, the strata-alloc GPU suite and its memcheck.
mkdir -p /tmp/b && tar xJf devbin/s17d.tar.xz -C /tmp/b && B=/tmp/b/s17d
T=$OUT/tests.txt; : > $T
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
echo "# gpt seed 0 autocast" >> $T; timeout 150 $B/gpt --precision autocast-bf16 > $OUT/gpt.txt 2>&1; echo "rc $?" >> $T; grep -o '"loss_last":[0-9.]*\|"step_ms":[0-9.]*\|"peak_reserved":[0-9]*' $OUT/gpt.txt >> $T
G="$B/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16"
echo "# memcheck small gpt" >> $T; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $G 2>&1 | grep -o '"loss_last":[0-9.]*\|ERROR SUMMARY.*' >> $T
echo "# c1" >> $T; timeout 60 $B/c1 --include-ignored --test-threads=1 > $OUT/c1.txt 2>&1; echo "rc $?" >> $T; grep -E "test result" $OUT/c1.txt >> $T
echo "# memcheck c1" >> $T; timeout 90 compute-sanitizer --tool memcheck --report-api-errors no $B/c1 --include-ignored --test-threads=1 2>&1 | grep -E "test result|ERROR SUMMARY" >> $T
cat $T
