#!/bin/bash
# Session 41, call 3 (one H200): the warm path before (25710a3's allocator, replay_old) and after helper-43's changes
# (923dbc6, replay_new), interleaved: 4 rounds of old then new, each
# `replay --device cuda --json --passes 5 --warmup 2` on the 29 `*.default` traces in one process.
B=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2 3 4; do
  for v in old new; do
    s=$(date +%s); timeout 60 $B/replay_$v --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $OUT/r${r}_$v.jsonl 2>&1; echo "round $r $v rc $? $(( $(date +%s) - s )) s"
  done
done
