#!/bin/bash
# Session 8, call 2: the tiny GPT state oracle; where a small op's host time goes (launch bursts vs sustained,
# strata and PyTorch); TF32 with and without expandable segments, alternated with PyTorch alone.
cd devbin; mkdir -p n; tar xJf s8c2.tar.xz -C n
python3 exp/gpt_oracle.py > $OUT/gpt_oracle.json 2>$OUT/gpt_oracle.err
L=$OUT/launch.txt; : > $L
(cd exp && nvcc -O2 -arch=sm_90 launch.cu -lcuda -o /tmp/launch) >> $L 2>&1
for i in 1 2; do /tmp/launch >> $L 2>&1; ./n/gpu_bench --only small_op >> $L 2>&1; python3 exp/small_op_burst.py >> $L 2>&1; done
python3 torch_mission.py small_op >> $L 2>&1
T=$OUT/tf32.txt; : > $T
for i in 1 2; do
  ./n/gpu_bench --only matmul8192_tf32 >> $T 2>&1
  STRATA_ALLOC_CONF=expandable_segments:False ./n/gpu_bench --only matmul8192_tf32 >> $T 2>&1
  python3 exp/tf32_alone.py >> $T 2>&1
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 exp/tf32_alone.py >> $T 2>&1
done
