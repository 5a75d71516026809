#!/bin/bash
# Session 47, call 2 (one H200): where the replay's slow stretches come from. The machine's NUMA layout and the GPU's
# affinity, then `replay --device cuda --json --passes 5 --warmup 2` on the 29 `*.default` traces three times
# unpinned, three times bound to NUMA node 0 (CPU and memory), three times bound to the last node.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
lscpu | grep -iE "model name|numa|socket|^cpu\(s\)|thread" >> $P
nvidia-smi topo -m >> $P 2>&1
which numactl >> $P 2>&1; numactl -H >> $P 2>&1
cat /sys/kernel/mm/transparent_hugepage/enabled >> $P 2>&1
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
last=$(( $(ls -d /sys/devices/system/node/node* | wc -l) - 1 ))
for i in 1 2 3; do
  s=$(date +%s); timeout 25 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/free$i.jsonl 2>&1; echo "free $i rc $? $(( $(date +%s) - s )) s" >> $P
  s=$(date +%s); timeout 25 numactl --cpunodebind=0 --membind=0 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/node0_$i.jsonl 2>&1; echo "node0 $i rc $? $(( $(date +%s) - s )) s" >> $P
  s=$(date +%s); timeout 25 numactl --cpunodebind=$last --membind=$last $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/nodeL_$i.jsonl 2>&1; echo "node$last $i rc $? $(( $(date +%s) - s )) s" >> $P
done
cd $O && tar cJf $OUT/c2.tar.xz . && cat $P
