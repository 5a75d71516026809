#!/bin/bash
# Session 44, call 3 (one H200), binaries of the HEAD below: strata-autograd's GPU suite with the corrected
# clipping test, then under compute-sanitizer memcheck; strata-tensor's Adam tests (the list-step tests after the
# review's shared setup); then issue 14's replay on the 29 `*.default` traces
# (../shared/traces, traces/, traces/held_out/): `replay --device cuda --json --passes 5 --warmup 2`, next to
# torch_bench.py replay (default, then expandable_segments:True), then replay's 60-pass run.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 150 $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda.txt 2>&1; echo "autograd_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" -A3 $OUT/autograd_cuda.txt | head -30 >> $P
s=$(date +%s); timeout 100 compute-sanitizer --tool memcheck $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda-memcheck.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/autograd_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 120 $B/tensor_cuda --include-ignored --test-threads 4 adam > $OUT/tensor_cuda_adam.txt 2>&1; echo "tensor_cuda (adam) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" -A3 $OUT/tensor_cuda_adam.txt | head -30 >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
ls /tmp/ta | wc -l >> $P
s=$(date +%s); timeout 60 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay.jsonl 2>&1; echo "replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 150 python3 $B/torch_bench.py /tmp/ta $OUT/torch_default.json replay > /dev/null 2>&1; echo "torch default rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 170 python3 $B/torch_bench.py /tmp/ta $OUT/torch_expandable.json replay > /dev/null 2>&1; echo "torch expandable rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 100 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay60.jsonl 2>&1; echo "replay60 rc $? $(( $(date +%s) - s )) s" >> $P
cat $P
