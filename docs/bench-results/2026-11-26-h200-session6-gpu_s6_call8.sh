#!/bin/bash
# Session 6, call 8: softmax forward with one division per row (reciprocal multiply) beside PyTorch, twice;
# the GPU tests of softmax and the ops that use it; memcheck.
cd devbin; mkdir -p n; tar xJf s6g.tar.xz -C n; R=$(cd .. && pwd); mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
for i in 1 2; do timeout 60 ./n/transformer_ops | grep softmax; timeout 60 python3 torch_transformer_ops.py | grep softmax; done
timeout 200 ./n/tensor_cuda --include-ignored --test-threads=8 softmax cross_entropy attention 2>&1 | grep -E "^test |test result"
timeout 120 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 softmax_log_softmax 2>&1 | tail -2
