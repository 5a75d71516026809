#!/bin/bash
# Session 41, call 4 (one H200), binaries of the commit in HEAD (after the many-streams fix: lazily made free-index
# bins, a map of stream entries): strata-alloc's GPU suite, then under compute-sanitizer memcheck; the replay of the
# 29 `*.default` traces (`--passes 5 --warmup 2`, one process), twice.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 240 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda-memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/alloc_cuda-memcheck.txt >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
for r in 1 2; do s=$(date +%s); timeout 60 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay_r$r.jsonl 2>&1; echo "replay round $r rc $? $(( $(date +%s) - s )) s" >> $P; done
cat $P
