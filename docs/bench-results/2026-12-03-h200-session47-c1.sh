#!/bin/bash
# Session 47, call 1 (one H200), binaries of the HEAD below: the GPU suites of strata-alloc, strata-autograd (the
# clip change of session 46 unrun on a GPU) and strata-tensor (the softmax-backward kernel's fused multiply-adds,
# the unified reg_load), compute-sanitizer memcheck on strata-alloc, the row-kernel tests and strata-autograd; then
# issue 14's replay on the 29 `*.default` traces beside torch_bench.py replay (default, expandable_segments:True)
# and replay's 60-pass run; then the GPT example beside torch_gpt.py, f32 and autocast-bf16, default sizes.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 20 ./t_alloc --include-ignored > $OUT/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $OUT/alloc.txt)" >> $P
s=$(date +%s); timeout 25 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $OUT/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $OUT/alloc_mc.txt | tr '\n' ' ')" >> $P
s=$(date +%s); timeout 80 ./t_autograd --include-ignored --test-threads 8 > $OUT/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $OUT/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $OUT/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 200 ./t_tensor --include-ignored --test-threads 16 > $OUT/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $OUT/tensor.txt)" >> $P
grep -E "FAILED|panicked" -A3 $OUT/tensor.txt | head -30 >> $P
s=$(date +%s); timeout 45 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 4 softmax cross_entropy layer_norm > $OUT/tensor_mc.txt 2>&1; echo "tensor memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $OUT/tensor_mc.txt | tr '\n' ' ')" >> $P
s=$(date +%s); timeout 25 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $OUT/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $OUT/autograd_mc.txt | tr '\n' ' ')" >> $P
mkdir -p /tmp/ta && cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "traces $(ls /tmp/ta | wc -l)" >> $P
s=$(date +%s); timeout 20 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay.jsonl 2>&1; echo "replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 70 python3 ./torch_bench.py /tmp/ta $OUT/torch_default.json replay > /dev/null 2>&1; echo "torch default rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 70 python3 ./torch_bench.py /tmp/ta $OUT/torch_expandable.json replay > /dev/null 2>&1; echo "torch expandable rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 40 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay60.jsonl 2>&1; echo "replay60 rc $? $(( $(date +%s) - s )) s" >> $P
for pr in f32 autocast-bf16; do
s=$(date +%s); STRATA_DEVICE=cuda timeout 30 ./gpt --precision $pr > $OUT/gpt_strata_$pr.txt 2>&1; echo "gpt strata $pr rc $? $(( $(date +%s) - s )) s" >> $P; tail -1 $OUT/gpt_strata_$pr.txt | head -c 300 >> $P; echo >> $P
s=$(date +%s); timeout 40 python3 ./torch_gpt.py --precision $pr > $OUT/gpt_torch_$pr.txt 2>&1; echo "gpt torch $pr rc $? $(( $(date +%s) - s )) s" >> $P; tail -1 $OUT/gpt_torch_$pr.txt >> $P
done
cat $P
