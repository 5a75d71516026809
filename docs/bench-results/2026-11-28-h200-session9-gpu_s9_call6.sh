#!/bin/bash
# Session 9, call 6 (one H200): after 361cdf3 (half mul by a one-element tensor) and 472d230 (var's corrected
# two-pass, empty batched products): the conformance replays on the CPU and cuda:0, and the GPU reduction,
# matmul and binary-op tests.
cd devbin; tar xJf c6.tar.xz; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
timeout 150 ./n/conformance --include-ignored 2>&1 | grep -E "FAILED|panicked|failed|test result|not run" | head -20
timeout 150 ./n/tensor_cuda --include-ignored --test-threads=8 reduc matmul binary unary half 2>&1 | grep -E "^test |test result"
