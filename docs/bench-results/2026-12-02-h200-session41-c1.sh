#!/bin/bash
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== autograd cuda"; ./autograd_cuda --include-ignored --test-threads 1 2>&1 | grep -E "^test |test result"
echo "== tensor cuda"; ./tensor_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result"
echo "== memcheck autograd"; compute-sanitizer --tool memcheck ./autograd_cuda --include-ignored --test-threads 1 2>&1 | grep -E "ERROR SUMMARY|test result"
