#!/bin/bash
# Session 10, call 4 (one H200): GPU tests after 76df6c5/7a4471c (own-stream page moves without a fence):
# strata-alloc and strata-tensor GPU tests, compute-sanitizer memcheck on strata-alloc's GPU tests and on a small
# checkpointed GPT run, the full GPT at seed 0 (autocast and f32: loss_last against session 9's), and the
# conformance replays on the CPU and cuda:0 (NVRTC compiles every kernel on first use: ~1-3 s each here).
cd devbin; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
(timeout 420 ./n/conformance --include-ignored --test-threads=3 > $OUT/conformance.txt 2>&1; echo "conformance rc $?" >> $OUT/conformance.txt) &
T=$OUT/tests.txt; : > $T
echo "# alloc_cuda" >> $T; timeout 100 ./n/alloc_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck alloc_cuda" >> $T; timeout 200 compute-sanitizer --tool memcheck --report-api-errors no ./n/alloc_cuda --include-ignored --test-threads=1 2>&1 | tail -3 >> $T
echo "# memcheck small checkpointed gpt" >> $T; timeout 200 compute-sanitizer --tool memcheck --report-api-errors no ./n/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16 2>&1 | tail -4 >> $T
G=$OUT/gpt.txt; : > $G
timeout 90 ./n/gpt --precision autocast-bf16 >> $G 2>&1
timeout 90 ./n/gpt >> $G 2>&1
echo "# tensor_cuda" >> $T; timeout 200 ./n/tensor_cuda --include-ignored --test-threads=8 2>&1 | grep -E "FAILED|panicked|test result" >> $T
wait
grep -E "conformance on|test result|FAIL|rc " $OUT/conformance.txt >> $T
cat $T; tail -c 600 $G
