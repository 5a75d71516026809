#!/bin/bash
# Session 47, call 4 (one H200), binaries of 1533ab6 (the rule after a run at the peak): strata-alloc's GPU suite
# and the same under compute-sanitizer memcheck; then issue 14's replay of the 29 `*.default` traces,
# `replay --device cuda --json --passes 5 --warmup 2`, beside torch_bench.py replay (default, then
# expandable_segments:True), then `--passes 60`. Every output goes back in one archive.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 30 ./t_alloc --include-ignored > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt | head -20 >> $P
s=$(date +%s); timeout 40 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $O/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/alloc_mc.txt | tr '\n' ' ')" >> $P
grep -E "Program hit" $O/alloc_mc.txt >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "traces $(ls /tmp/ta | wc -l)" >> $P
s=$(date +%s); timeout 25 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay.jsonl 2>&1; echo "replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 80 python3 ./torch_bench.py /tmp/ta $O/torch_default.json replay > /dev/null 2>&1; echo "torch default rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 80 python3 ./torch_bench.py /tmp/ta $O/torch_expandable.json replay > /dev/null 2>&1; echo "torch expandable rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay60.jsonl 2>&1; echo "replay60 rc $? $(( $(date +%s) - s )) s" >> $P
cd $O && tar cJf $OUT/c4.tar.xz . && cat $P
