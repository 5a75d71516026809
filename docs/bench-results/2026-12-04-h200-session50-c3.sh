#!/bin/bash
# Session 50, call 3 (one H200), the replay binary of the HEAD below (allocator code unchanged since 31a64d4 but for
# the settings parser): issue 14's 60-pass run, `replay --device cuda --json --passes 60 --warmup 2`, of the 35
# `*.default` traces (shared, traces/, traces/held_out/, and the six new ones of traces/held_out2/).
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o3; mkdir -p $O /tmp/ta3
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta3/
echo "traces $(ls /tmp/ta3 | wc -l)" >> $P
cd $B
s=$(date +%s); timeout 150 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta3/*.default.json.gz > $O/replay60.jsonl 2>&1; echo "replay60 rc $? $(( $(date +%s) - s )) s" >> $P
python3 - $O/replay60.jsonl >> $P <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
for r in rows:
    print(f"{r['trace'].split('/')[-1].replace('.default.json.gz', '')}: {r['ns_per_op']:.1f} ns/op (slowest warm pass {max(r['warm_pass_ns_per_op']):.1f}), warm memory calls/pass {r['warm_memory_calls_per_pass']:g}, syncs/pass {r['warm_stream_synchronizations_per_pass']:g}")
print(f"{len(rows)} traces; max {max(r['ns_per_op'] for r in rows):.1f} ns/op; over 100: {[r['trace'] for r in rows if r['ns_per_op'] > 100]}")
PY
cd $O && tar cJf $OUT/c3.tar.xz . && cat $P
# Then, on the same machine, two more calls (commands as run):
#   call 4: timeout 60 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta3/*.default.json.gz > $OUT/replay60b.jsonl
#   call 5: timeout 200 python3 devbin/c/torch_bench.py /tmp/ta3 $OUT/torch60_default.json replay   (PyTorch default)
#           timeout 60 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta3/*.default.json.gz > $OUT/replay60c.jsonl
