#!/bin/bash
# Session 41, call 2 (one H200), binaries of the commit in HEAD (after helper-43's warm-path changes and helper-45's
# autograd fixes): strata-alloc's and strata-autograd's GPU suites, each then under compute-sanitizer memcheck;
# issue 14's replay beside PyTorch: `replay --device cuda --json --passes 5 --warmup 2` on the 29 `*.default`
# traces (one process), torch_bench.py replay (default, then expandable_segments:True), then strata's 60-pass run.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 240 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda-memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/alloc_cuda-memcheck.txt >> $P
s=$(date +%s); timeout 150 $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda.txt 2>&1; echo "autograd_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/autograd_cuda.txt >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck $B/autograd_cuda --include-ignored --test-threads 1 > $OUT/autograd_cuda-memcheck.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/autograd_cuda-memcheck.txt >> $P
R=$OUT/replay.txt; : > $R
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 5 warmup 2" >> $R; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $R 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R
echo "# torch default" >> $R; timeout 150 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R; cat /tmp/tr1.json >> $R; echo >> $R
echo "# torch expandable" >> $R; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R; cat /tmp/tr2.json >> $R; echo >> $R
R60=$OUT/replay60.txt; s=$(date +%s)
timeout 150 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $R60 2>&1; echo "replay60 rc $? $(( $(date +%s) - s ))" >> $P
grep -E "^rc|^#" $R >> $P
cat $P
