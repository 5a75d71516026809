#!/bin/bash
# Session 6, call 1: exploration. Transposed-copy kernel variants (standalone nvcc), launch-cost floor,
# ncu of the cross-entropy/softmax forwards, perf of the small-op host path.
cd devbin; mkdir -p n; tar xJf s6a.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
nvcc -O3 -arch=sm_90 -o n/transpose exp/transpose.cu -lcuda > $OUT/nvcc.txt 2>&1
./n/transpose > $OUT/transpose.txt 2>&1
./n/gpu_bench --only small_op,add_inplace_transposed_f32,contiguous_of_transpose_f32,copy > $OUT/gpu_bench.txt 2>&1
timeout 120 ncu --kernel-name regex:'ce_r|sm_r|reduce|sum' --launch-skip 3 --launch-count 12 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_registers ./n/transformer_ops --iters 5 > $OUT/ncu.txt 2>&1
which perf >> $OUT/gpu_bench.txt 2>&1
nsys --version >> $OUT/gpu_bench.txt 2>&1
timeout 60 nsys profile -o $OUT/ce --force-overwrite true ./n/transformer_ops --iters 5 > /dev/null 2>&1 && nsys stats --report cuda_gpu_trace --format csv $OUT/ce.nsys-rep 2>/dev/null | awk '/ce_r/{f=1} f{print; n++} n>=60{exit}' > $OUT/nsys.txt; rm -f $OUT/ce.nsys-rep $OUT/ce.sqlite
tail -3 $OUT/transpose.txt
