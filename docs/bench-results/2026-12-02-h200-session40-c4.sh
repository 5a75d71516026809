#!/bin/bash
# Session 40, call 4 (one H200), binaries of the commit in h/HEAD (after helper-42's fix: a page whose release fails is
# kept and retried): strata-alloc's GPU suite, then under compute-sanitizer memcheck; issue 14's replay beside
# PyTorch: `replay --device cuda --json --passes 5 --warmup 2` on the 29 `*.default` traces (one process), then
# torch_bench.py replay (default, then expandable_segments:True).
rm -rf /tmp/b /tmp/h; tar xJf devbin/s40/h.tar.xz -C /tmp && mv /tmp/h /tmp/b && B=/tmp/b
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 240 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt | head -20 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda-memcheck.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/alloc_cuda-memcheck.txt >> $P
R=$OUT/replay.txt; : > $R
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 5 warmup 2" >> $R; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $R 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R
echo "# torch default" >> $R; timeout 150 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R; cat /tmp/tr1.json >> $R; echo >> $R
echo "# torch expandable" >> $R; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R; cat /tmp/tr2.json >> $R; echo >> $R
grep -E "^rc|^#" $R >> $P
cat $P
