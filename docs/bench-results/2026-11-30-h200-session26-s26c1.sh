#!/bin/bash
# Session 26, call 1 (one H200): the Adam kernels with one shared update loop and one hyper-parameter struct:
# strata-tensor's whole GPU suite, the autograd CUDA test, memcheck of the adam tests, and gpt's phase timings
# (this tree's binary and the one from 33e9908, alternating) under autocast and f32.
cd devbin/s26; tar xJf c.tar.xz
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
T=$OUT/tests.txt; : > $T
s=$(date +%s)
echo "# tensor_cuda all" >> $T; timeout 300 ./c/tensor_cuda --include-ignored 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
echo "# t $(( $(date +%s) - s ))" >> $T
echo "# autograd_cuda" >> $T; timeout 120 ./c/autograd_cuda --include-ignored 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
echo "# memcheck tensor adam" >> $T; timeout 150 compute-sanitizer --tool memcheck ./c/tensor_cuda --include-ignored adam --test-threads=1 2>&1 | tail -4 >> $T
echo "# t $(( $(date +%s) - s ))" >> $T
for r in 1 2; do for b in gpt_old gpt; do for p in "--precision autocast-bf16" "--precision f32"; do
  echo "## $b $p round $r" >> $OUT/gpt.txt
  timeout 100 ./c/$b --steps 10 --warmup 3 $p >> $OUT/gpt.txt 2>&1
done; done; done
echo "# t $(( $(date +%s) - s ))" >> $T
