#!/bin/bash
# Session 25, call C (one H200): adam_step_list's kernel with the guarded __grid_constant__ (97b4560): its GPU tests
# and memcheck; then ncu's duration of every kernel of one f32 training step of `gpt` at batch 4 and batch 8
# (which kernels lose efficiency at half the batch, the f32 shortfall of ddp_gpt --gpus 2).
cd devbin/s25; tar xJf c.tar.xz
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
T=$OUT/tests.txt; : > $T
s=$(date +%s)
echo "# tensor_cuda adam" >> $T; timeout 120 ./c/tensor_cuda --include-ignored adam 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
echo "# memcheck tensor adam" >> $T; timeout 150 compute-sanitizer --tool memcheck ./c/tensor_cuda --include-ignored adam --test-threads=1 2>&1 | tail -4 >> $T
echo "# t $(( $(date +%s) - s ))" >> $T
for b in 4 8; do
  timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu_b$b.csv ./c/gpt --batch $b --steps 1 --warmup 0 > $OUT/gpt_b$b.txt 2>&1
  echo "# ncu b$b rc $? t $(( $(date +%s) - s ))" >> $T
done
ls -la $OUT
