#!/bin/bash
# Session 41, call 5 (one H200), binary of the commit in HEAD (the review mend of the autograd hooks): strata-autograd's
# GPU suite, then under compute-sanitizer memcheck.
B=$(cd "$(dirname "$0")" && pwd)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat $B/HEAD
$B/autograd_cuda --include-ignored --test-threads 1 2>&1 | grep -E "^test |test result"
compute-sanitizer --tool memcheck $B/autograd_cuda --include-ignored --test-threads 1 2>&1 | grep -E "ERROR SUMMARY|test result"
