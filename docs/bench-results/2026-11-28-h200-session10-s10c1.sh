#!/bin/bash
# Session 10, call 1 (one H200): conformance on the CPU and cuda:0 (per-case times, to find what was slow in
# session 9's call 6); GPU tests of strata-tensor and strata-alloc; t5_varlen and three other traces replayed
# over 60 warm passes with each pass's cost and the warm passes' driver calls of every kind.
cd devbin; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
T=$OUT/tests.txt; : > $T
echo "# conformance" >> $T; STRATA_CONFORMANCE_VERBOSE=1 timeout 240 ./n/conformance --include-ignored --test-threads=3 > $OUT/conf_stdout.txt 2> $OUT/conf_stderr.txt; echo "rc $?" >> $T
grep -E "conformance on|test result|FAIL" $OUT/conf_stdout.txt | head -20 >> $T
mkdir -p /tmp/ta && cp ../traces/t5_varlen.default.json.gz ../traces/gpt_ckpt.default.json.gz ../traces/unet_diffusion.default.json.gz straces/bert_serving.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 60 warmup 2" >> $P; timeout 120 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.json.gz >> $P 2>&1
echo "# sim" >> $P; timeout 60 ./n/replay --device sim --json --passes 20 --warmup 2 /tmp/ta/t5_varlen.default.json.gz >> $P 2>&1
echo "# tensor_cuda" >> $T; timeout 200 ./n/tensor_cuda --include-ignored --test-threads=8 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# alloc_cuda" >> $T; timeout 100 ./n/alloc_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
cat $T
