#!/bin/bash
# Session 6, call 2: transposes (standalone variants + strata's tiled_v), launch floor, cross-entropy without the
# smoothing registers beside PyTorch, GPU tests of the changed kernels + memcheck, issue 15's history cost before/after.
cd devbin; mkdir -p n; tar xJf s6b.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
nvcc -O3 -arch=sm_90 -o n/transpose exp/transpose.cu -lcuda > $OUT/nvcc.txt 2>&1
B=$OUT/bench.txt; : > $B
./n/transpose >> $B 2>&1
for i in 1 2; do ./n/gpu_bench --only copy,add_inplace_transposed_f32,contiguous_of_transpose_f32,small_op >> $B 2>&1; done
python3 torch_bench.py traces /tmp/tbe.json elementwise > /dev/null 2>&1; cat /tmp/tbe.json >> $B
timeout 90 ./n/transformer_ops >> $B 2>&1; timeout 90 python3 torch_transformer_ops.py >> $B 2>&1
T=$OUT/tests.txt; : > $T
timeout 200 ./n/tensor_cuda --include-ignored --test-threads=8 vectorised_transposes strided_copies cross_entropy short_row large_transposed binary_ops losses 2>&1 | tail -15 >> $T
timeout 250 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 vectorised_transposes cross_entropy 2>&1 | tail -6 >> $T
tail -8 $T
