#!/bin/bash
# Session 6, call 5: GPU tests of the merged tree (tensor, autograd, conformance) and compute-sanitizer memcheck on the new kernels.
cd devbin; mkdir -p n; tar xJf s6c.tar.xz -C n; tar xJf s6d.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
T=$OUT/tests.txt; : > $T
timeout 240 ./n/tensor_cuda --include-ignored --test-threads=8 2>&1 | grep -E "FAILED|panicked|test result" >> $T
for t in autograd_cuda recompute training attention_memory checkpoint_memory; do echo "# $t" >> $T; timeout 120 ./n/$t --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T; done
echo "# conformance" >> $T; timeout 120 ./n/conformance --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck" >> $T
timeout 200 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 vectorised_transposes cross_entropy softmax_backward strided_copies 2>&1 | tail -4 >> $T
timeout 120 compute-sanitizer --tool memcheck ./n/autograd_cuda --include-ignored --test-threads=1 2>&1 | tail -3 >> $T
cat $T
