#!/bin/bash
# Session 53, call 1 (one H200): records the six held-out set 3 workloads (benches/anchors/workloads_held_out3/) in
# both allocator modes (three workloads at a time, each mode in a fresh process, via record_new_traces.sh), then
# issue 14's replay of the 35 `*.default` traces: strata unpinned, PyTorch default (torch_bench.py replay), strata
# pinned to one core (taskset -c 5), PyTorch pinned to the same core.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o1; mkdir -p $O/held_out3 /tmp/ta
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P; nproc >> $P; uptime >> $P
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $P
cd $B/wl
s=$(date +%s)
(bash record_new_traces.sh $B/wl $O/held_out3 mamba_ssd_scan seq2seq_token_budget > $O/rec1.txt 2>&1) &
(bash record_new_traces.sh $B/wl $O/held_out3 pointnet2_varpoints multi_model_serving > $O/rec2.txt 2>&1) &
(bash record_new_traces.sh $B/wl $O/held_out3 ppo_rollouts sr_tiled_upscale > $O/rec3.txt 2>&1) &
wait
echo "recording $(( $(date +%s) - s )) s" >> $P
grep -hE "events|FAILED" $O/rec?.txt >> $P
grep -h -A3 FAILED $O/rec?.txt | head -30 >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "traces $(ls /tmp/ta | wc -l)" >> $P
cd $B
uptime >> $P
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay a rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 200 python3 $B/torch_bench.py /tmp/ta $O/torch_default.json replay > $O/torch.txt 2>&1; echo "torch replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 60 taskset -c 5 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_b.jsonl 2>&1; echo "replay b (taskset -c 5) rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 200 taskset -c 5 python3 $B/torch_bench.py /tmp/ta $O/torch_default_pinned.json replay > $O/torch_pinned.txt 2>&1; echo "torch replay pinned rc $? $(( $(date +%s) - s )) s" >> $P
uptime >> $P
python3 - $O/replay_a.jsonl $O/replay_b.jsonl $O/torch_default.json $O/torch_default_pinned.json >> $P <<'PY'
import json, sys
def rows(f): return {r['trace'].split('/')[-1].replace('.default.json.gz', ''): r for r in (json.loads(l) for l in open(f) if l.startswith('{'))}
def trows(f):
    try:
        t = json.load(open(f))
        return {k.split('/')[-1].replace('.default.json.gz', ''): v for k, v in (t.get('replay', t)).items()} if isinstance(t, dict) else {}
    except Exception as e:
        print('torch json:', f, e); return {}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
ta, tb = trows(sys.argv[3]), trows(sys.argv[4])
def tn(t, k):
    v = t.get(k, {}); return v.get('ns_per_op_warm') if isinstance(v, dict) else None
for k in sorted(a):
    print(f"{k}: {a[k]['ns_per_op']:.1f} / pinned {b.get(k, {}).get('ns_per_op', float('nan')):.1f} ns/op, warm calls {a[k]['warm_memory_calls_per_pass']:g}/{b.get(k, {}).get('warm_memory_calls_per_pass', -1):g}, syncs {a[k]['warm_stream_synchronizations_per_pass']:g}/{b.get(k, {}).get('warm_stream_synchronizations_per_pass', -1):g}; PyTorch default {tn(ta, k)} / pinned {tn(tb, k)}")
print(f"{len(a)} traces; max a {max(r['ns_per_op'] for r in a.values()):.1f}, max b {max(r['ns_per_op'] for r in b.values()):.1f}")
PY
cd $O && tar cJf $OUT/c1.tar.xz . && cat $P
