#!/bin/bash
# Session 9, call 5 (one H200): the half-division GPU test with its broadcast divisor expanded on each device, and
# memcheck on it and the huge-logit cross-entropy test.
cd devbin; tar xJf c5.tar.xz
timeout 100 ./n/tensor_cuda --include-ignored half_division 2>&1 | grep -E "^test |test result"
timeout 200 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 half_division cross_entropy_of_huge 2>&1 | grep -E "^test |test result|ERROR SUMMARY"
