#!/bin/bash
# Session 51, call 3 (one H200), binaries of the HEAD below: strata-autograd's GPU suite (session 51's sweep fixes)
# and the same under compute-sanitizer memcheck; issue 14's replay, `replay --device cuda --json --passes 5 --warmup 2`
# of the 35 `*.default` traces (shared, traces/, traces/held_out/, traces/held_out2/), then `torch_bench.py replay`
# (PyTorch default) over the same 35, then strata's replay again.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o2; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "traces $(ls /tmp/ta | wc -l)" >> $P
cd $B
s=$(date +%s); timeout 60 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $O/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/autograd_mc.txt | tr '\n' ' ')" >> $P
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay a rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 200 python3 $B/torch_bench.py /tmp/ta $O/torch_default.json replay > $O/torch.txt 2>&1; echo "torch replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_b.jsonl 2>&1; echo "replay b rc $? $(( $(date +%s) - s )) s" >> $P
python3 - $O/replay_a.jsonl $O/replay_b.jsonl $O/torch_default.json >> $P <<'PY'
import json, sys
def rows(f): return {r['trace'].split('/')[-1].replace('.default.json.gz', ''): r for r in (json.loads(l) for l in open(f) if l.startswith('{'))}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
try:
    t = json.load(open(sys.argv[3]))
    tr = {k.split('/')[-1].replace('.default.json.gz', ''): v for k, v in (t.get('replay', t)).items()} if isinstance(t, dict) else {}
except Exception as e:
    tr = {}; print('torch json:', e)
for k in sorted(a):
    tv = tr.get(k, {})
    tns = tv.get('ns_per_op_warm') if isinstance(tv, dict) else None
    print(f"{k}: {a[k]['ns_per_op']:.1f} / {b.get(k, {}).get('ns_per_op', float('nan')):.1f} ns/op, warm calls {a[k]['warm_memory_calls_per_pass']:g}/{b.get(k, {}).get('warm_memory_calls_per_pass', -1):g}, syncs {a[k]['warm_stream_synchronizations_per_pass']:g}; PyTorch default {tns}")
print(f"{len(a)} traces; max a {max(r['ns_per_op'] for r in a.values()):.1f}, max b {max(r['ns_per_op'] for r in b.values()):.1f}")
PY
cd $O && tar cJf $OUT/c2.tar.xz . && cat $P
