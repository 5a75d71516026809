#!/bin/bash
# Session 9, call 4 (one H200): the half-division GPU test again (its divisor fixed) with memcheck; issue 14's
# replay of every trace (shared + traces/, 5 and 60 passes) after d9e05b5 (FxHash page tables) beside PyTorch's
# default and expandable allocators.
cd devbin; tar xJf c4.tar.xz
T=$OUT/tests.txt; : > $T
echo "# tensor_cuda half_division + cross_entropy" >> $T; timeout 100 ./n/tensor_cuda --include-ignored half_division cross_entropy 2>&1 | grep -E "^test |FAILED|panicked|Error|test result" >> $T
echo "# memcheck" >> $T; timeout 150 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 half_division 2>&1 | tail -3 >> $T
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 150 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 200 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 200 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P
echo "# strata passes 60" >> $P; timeout 150 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
cat $T
