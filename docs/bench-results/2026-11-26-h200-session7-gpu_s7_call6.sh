#!/bin/bash
# Session 7, call 6: every GPU test (tensor, autograd, alloc, conformance) and memcheck on autograd; issue 14's
# replay beside PyTorch's default and expandable allocators; the small op beside torch_mission.py small_op.
cd devbin; mkdir -p n; tar xJf s7c5.tar.xz -C n; tar xJf s7c6.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
T=$OUT/tests.txt; : > $T
timeout 240 ./n/tensor_cuda --include-ignored --test-threads=8 2>&1 | grep -E "FAILED|panicked|test result" >> $T
for t in autograd_cuda recompute training attention_memory checkpoint_memory alloc_cuda; do echo "# $t" >> $T; timeout 120 ./n/$t --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T; done
echo "# conformance" >> $T; timeout 120 ./n/conformance --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck autograd" >> $T; timeout 120 compute-sanitizer --tool memcheck ./n/autograd_cuda --include-ignored --test-threads=1 2>&1 | tail -3 >> $T
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 100 ./n/replay --device cuda --json --passes 5 --warmup 2 traces/*.default.json.gz >> $P 2>&1
echo "# strata passes 60" >> $P; timeout 150 ./n/replay --device cuda --json --passes 60 --warmup 2 traces/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 100 python3 torch_bench.py traces /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 100 python3 torch_bench.py traces /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P
B=$OUT/small_op.txt; : > $B
for i in 1 2; do ./n/gpu_bench --only small_op >> $B 2>&1; python3 torch_mission.py small_op >> $B 2>&1; done
cat $T
