#!/bin/bash
# Session 32, call R2 (one H200): is call R's 60-pass slowdown tied to the traces or to a stretch of time? The same
# 60-pass strata run twice, in reverse alphabetical order, then in alphabetical order as in call R.
rm -rf /tmp/r; mkdir -p /tmp/r && tar xJf devbin/s32/r.tar.xz -C /tmp/r && B=/tmp/r/r
P=$OUT/replay.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s)
echo "# strata passes 60 warmup 2 reverse" >> $P; timeout 140 $B/replay --device cuda --json --passes 60 --warmup 2 $(ls -r /tmp/ta/*.default.json.gz) >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 140 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $? $(( $(date +%s) - s ))" >> $P
grep -E "^rc|^#" $P
