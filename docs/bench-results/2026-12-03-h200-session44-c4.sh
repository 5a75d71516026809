#!/bin/bash
# Session 44, call 4 (one H200), the replay binary of call 3 (9e79836) alone: was call 3's 60-pass run above
# 100 ns/op the host's state at the time? `replay --device cuda --json --passes 60 --warmup 2` twice, with a
# 5-pass run before each, on the 29 `*.default` traces; nothing else runs in the call.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; cat $B/HEAD >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
for r in 1 2; do
s=$(date +%s); timeout 60 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay5_r$r.jsonl 2>&1; echo "replay 5 round $r rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 100 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/replay60_r$r.jsonl 2>&1; echo "replay 60 round $r rc $? $(( $(date +%s) - s )) s" >> $P
done
cat $P
