#!/bin/bash
# Session 26, call 6 (one H200): strata-alloc's GPU suite at the review commit (release_free_segments), and the
# private-pool and empty_cache tests under compute-sanitizer memcheck.
mkdir -p /tmp/b && tar xJf devbin/s26/f.tar.xz -C /tmp/b
timeout 100 /tmp/b/f/alloc_cuda --include-ignored --test-threads=1 2>&1 | grep -E "test result|FAILED|panicked"
timeout 100 compute-sanitizer --tool memcheck /tmp/b/f/alloc_cuda --include-ignored --test-threads=1 private_pool 2>&1 | grep -E "test result|ERROR SUMMARY"
timeout 100 compute-sanitizer --tool memcheck /tmp/b/f/alloc_cuda --include-ignored --test-threads=1 allocate_free_reuse 2>&1 | grep -E "test result|ERROR SUMMARY"
