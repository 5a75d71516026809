#!/bin/bash
# Session 34, call D (one H200): the GPU suites at the session's final code (helper-27's strata-alloc fixes and
# helper-28's strata-autograd fixes since a016e75; strata-tensor unchanged): strata-alloc and strata-autograd each run,
# then under compute-sanitizer memcheck; the GPT example under autocast-bf16 with every block checkpointed (the
# paths helper-28's checkpoint and autocast changes touch; strata only, to compare with session 33's loss); then
# issue 14's replay beside PyTorch: `replay --device cuda --json --passes 5 --warmup 2` on the 29 `*.default` traces,
# then torch_bench.py replay (default, then expandable_segments:True).
rm -rf /tmp/d; mkdir -p /tmp/d && tar xJf devbin/s34/d.tar.xz -C /tmp/d && B=/tmp/d/d
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P
for c in alloc autograd; do
  s=$(date +%s); timeout 90 $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda.txt 2>&1; echo "${c}_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/${c}_cuda.txt >> $P
  s=$(date +%s); timeout 90 compute-sanitizer --tool memcheck --report-api-errors no $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda-memcheck.txt 2>&1; echo "${c} memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result" $OUT/${c}_cuda-memcheck.txt >> $P
done
s=$(date +%s); timeout 100 $B/gpt --precision autocast-bf16 --checkpoint every > $OUT/gpt.txt 2>&1; echo "gpt rc $? $(( $(date +%s) - s )) s" >> $P; tail -3 $OUT/gpt.txt >> $P
R=$OUT/replay.txt; : > $R
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 5 warmup 2" >> $R; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $R 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R
echo "# torch default" >> $R; timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R; cat /tmp/tr1.json >> $R; echo >> $R
echo "# torch expandable" >> $R; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $R; cat /tmp/tr2.json >> $R; echo >> $R
grep -E "^rc|^#" $R >> $P
cat $P
