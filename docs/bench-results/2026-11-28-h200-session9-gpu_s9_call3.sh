#!/bin/bash
# Session 9, call 3 (one H200): GPU tests (strata-alloc, strata-tensor incl. the new half-division and
# huge-logit cross-entropy tests) and memcheck; conformance on the CPU and cuda:0; gpt at seed 0 (autocast, f32)
# after the cross-entropy change; issue 14's replay of every trace (shared + traces/, 5 and 60 passes) with the
# session-9 rule beside PyTorch's default and expandable allocators.
cd devbin; tar xJf c3.tar.xz; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
T=$OUT/tests.txt; : > $T
echo "# alloc_cuda" >> $T; timeout 150 ./n/alloc_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# tensor_cuda" >> $T; timeout 240 ./n/tensor_cuda --include-ignored --test-threads=8 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# conformance" >> $T; timeout 200 ./n/conformance --include-ignored 2>&1 | grep -E "FAILED|panicked|failed|test result|not run" | head -40 >> $T
echo "# memcheck alloc_cuda" >> $T; timeout 200 compute-sanitizer --tool memcheck --report-api-errors no ./n/alloc_cuda --include-ignored --test-threads=1 2>&1 | tail -3 >> $T
echo "# memcheck tensor_cuda new tests" >> $T; timeout 200 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 half_division cross_entropy 2>&1 | tail -3 >> $T
G=$OUT/gpt.txt; : > $G
timeout 90 ./n/gpt --precision autocast-bf16 >> $G 2>&1
timeout 90 ./n/gpt >> $G 2>&1
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 150 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 200 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 200 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P
echo "# strata passes 60" >> $P; timeout 150 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
cat $T
