#!/bin/bash
# Session 42, call 3 (one H200): issue 14's replay on the 29 `*.default` traces (../shared/traces, traces/,
# traces/held_out/), `replay --device cuda --json --passes 5 --warmup 2`, the session's starting allocator
# (replay_old, 6f23680) and the warm-path commits (replay_new, HEAD) interleaved, three rounds each; then
# torch_bench.py replay (default, then expandable_segments:True); then replay_new's 60-pass run.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; cat $B/HEAD >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
ls /tmp/ta | wc -l >> $P
for r in 1 2 3; do for v in old new; do s=$(date +%s); timeout 60 $B/replay_$v --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay_${v}_r$r.jsonl 2>&1; echo "replay $v round $r rc $? $(( $(date +%s) - s )) s" >> $P; done; done
s=$(date +%s); timeout 150 python3 $B/torch_bench.py /tmp/ta $OUT/torch_default.json replay > /dev/null 2>&1; echo "torch default rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 170 python3 $B/torch_bench.py /tmp/ta $OUT/torch_expandable.json replay > /dev/null 2>&1; echo "torch expandable rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 100 $B/replay_new --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay60_new.jsonl 2>&1; echo "replay60 new rc $? $(( $(date +%s) - s )) s" >> $P
cat $P
