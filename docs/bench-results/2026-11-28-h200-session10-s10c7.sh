#!/bin/bash
# Session 10, call 7 (one H200): after the review commit 912cba2: strata-alloc GPU tests and memcheck, the
# strata-tensor cross-entropy GPU tests (their argument helper), memcheck on the small checkpointed GPT.
cd devbin
T=$OUT/tests.txt; : > $T
echo "# alloc_cuda" >> $T; timeout 60 ./n/alloc_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck alloc_cuda" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/alloc_cuda --include-ignored --test-threads=1 2>&1 | tail -2 >> $T
echo "# tensor_cuda cross_entropy" >> $T; timeout 150 ./n/tensor_cuda --include-ignored cross_entropy 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
echo "# memcheck small checkpointed gpt" >> $T; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no ./n/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16 2>&1 | grep -o '"loss_last":[0-9.]*\|ERROR SUMMARY.*' >> $T
cat $T
