#!/bin/bash
# Session 8, call 4: GPU tests (alloc, tensor incl. the conformance replays with the new fuzz programs on cuda:0)
# and memcheck on the merged tree; issue 14's replay on the H200 (shared traces and traces/) beside PyTorch's
# default and expandable allocators, 5 and 60 passes.
cd devbin; mkdir -p n; tar xJf s8c4.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
T=$OUT/tests.txt; : > $T
echo "# alloc_cuda" >> $T; timeout 150 ./n/alloc_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# tensor_cuda" >> $T; timeout 240 ./n/tensor_cuda --include-ignored --test-threads=8 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# conformance" >> $T; timeout 200 ./n/conformance --include-ignored 2>&1 | grep -E "FAILED|panicked|failed|test result|not run" | head -40 >> $T
echo "# memcheck alloc_cuda" >> $T; timeout 200 compute-sanitizer --tool memcheck ./n/alloc_cuda --include-ignored --test-threads=1 2>&1 | tail -3 >> $T
echo "# memcheck conformance" >> $T; timeout 240 compute-sanitizer --tool memcheck ./n/conformance --include-ignored --test-threads=1 project_conformance 2>&1 | tail -3 >> $T
mkdir -p /tmp/ta && cp traces/*.json.gz ../traces/*.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 120 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# strata passes 60" >> $P; timeout 200 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 150 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P
cat $T
