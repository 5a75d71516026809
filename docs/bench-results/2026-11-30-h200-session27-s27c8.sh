#!/bin/bash
# Session 27, call 8 (one H200): strata-alloc's GPU suite at f9cf884 (saturating segment reserve, fallible page
# table, fits_fraction, config validation, Device::parse), and memcheck on it.
mkdir -p /tmp/b && tar xJf devbin/s27d/g.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s); timeout 200 /tmp/b/g8/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc-cuda.txt 2>&1; echo "alloc cuda rc $? $(( $(date +%s) - s )) s"; grep -E "test result|FAILED|panicked" $OUT/alloc-cuda.txt
s=$(date +%s); timeout 300 compute-sanitizer --tool memcheck --report-api-errors no /tmp/b/g8/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc-memcheck.txt 2>&1; echo "memcheck rc $? $(( $(date +%s) - s )) s"; grep -E "ERROR SUMMARY|test result" $OUT/alloc-memcheck.txt
