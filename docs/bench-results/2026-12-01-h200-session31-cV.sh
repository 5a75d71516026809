#!/bin/bash
# Session 31, call V (one H200), after the review: the strata-tensor GPU tests whose bit helper changed (the layer_norm
# sign-of-zero and infinite-hyperparameter adam_step_ tests now use the file's `bits`; half division uses it as before),
# run and then under compute-sanitizer memcheck.
rm -rf /tmp/v; mkdir -p /tmp/v && tar xJf devbin/s31/v.tar.xz -C /tmp && B=/tmp/v
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
T="layer_norm_zeros_have_the_cpus_signs adam_step_with_infinite_hyperparameters_matches_cpu half_division_rounding_matches_cpu_bit_for_bit"
timeout 200 $B/tensor_cuda --include-ignored --test-threads 3 $T 2>&1 | grep -E "^test |test result"
timeout 200 compute-sanitizer --tool memcheck --report-api-errors no $B/tensor_cuda --include-ignored --test-threads 1 $T 2>&1 | grep -E "ERROR SUMMARY|test result"
