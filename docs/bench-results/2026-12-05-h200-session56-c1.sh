#!/bin/bash
# Session 56, call 1 (one H200): issue 14's replay of the 47 `*.default` traces (shared five, traces/, held_out 1-4):
# strata 5 passes unpinned, PyTorch default (torch_bench.py replay), strata 5 passes pinned to one core (taskset -c 5),
# PyTorch expandable_segments:True, then strata 60 passes unpinned; then strata-alloc's GPU suite and memcheck (session 55:
# thread-local reentry, StatArray, release_block) and strata-autograd's GPU suite and memcheck. Binaries of the HEAD below.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o1; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P; nproc >> $P; uptime >> $P
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $R/traces/held_out3/*.default.json.gz $R/traces/held_out4/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "traces $(ls /tmp/ta | wc -l)" >> $P
cd $B
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay a rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 150 python3 $B/torch_bench.py /tmp/ta $O/torch_default.json replay > $O/torch.txt 2>&1; echo "torch replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 60 taskset -c 5 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_b.jsonl 2>&1; echo "replay b (taskset -c 5) rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 $B/torch_bench.py /tmp/ta $O/torch_expandable.json replay > $O/torch_exp.txt 2>&1; echo "torch replay expandable rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 170 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_c.jsonl 2>&1; echo "replay c (60 passes) rc $? $(( $(date +%s) - s )) s" >> $P
uptime >> $P
python3 - $O/replay_a.jsonl $O/replay_b.jsonl $O/replay_c.jsonl $O/torch_default.json $O/torch_expandable.json >> $P <<'PY'
import json, sys
def rows(f):
    try: return {r['trace'].split('/')[-1].replace('.default.json.gz', ''): r for r in (json.loads(l) for l in open(f) if l.startswith('{'))}
    except Exception as e: print('rows', f, e); return {}
def trows(f):
    try:
        t = json.load(open(f))
        return {k.split('/')[-1].replace('.default.json.gz', '').replace('.expandable.json.gz', ''): v for k, v in (t.get('replay', t)).items()} if isinstance(t, dict) else {}
    except Exception as e:
        print('torch json:', f, e); return {}
a, b, c = rows(sys.argv[1]), rows(sys.argv[2]), rows(sys.argv[3])
ta, te = trows(sys.argv[4]), trows(sys.argv[5])
def tn(t, k):
    v = t.get(k, {}); return v.get('ns_per_op_warm') if isinstance(v, dict) else None
def g(d, k, f): return d.get(k, {}).get(f, float('nan'))
for k in sorted(a):
    print(f"{k}: {a[k]['ns_per_op']:.1f} / pinned {g(b,k,'ns_per_op'):.1f} / 60p {g(c,k,'ns_per_op'):.1f} (60p slowest {max(c.get(k,{}).get('warm_pass_ns_per_op',[float('nan')])):.1f}) ns/op, warm calls {a[k]['warm_memory_calls_per_pass']:g}/{g(b,k,'warm_memory_calls_per_pass'):g}/{g(c,k,'warm_memory_calls_per_pass'):g}, syncs {a[k]['warm_stream_synchronizations_per_pass']:g}/{g(b,k,'warm_stream_synchronizations_per_pass'):g}/{g(c,k,'warm_stream_synchronizations_per_pass'):g}; PyTorch default {tn(ta, k)} / expandable {tn(te, k)}")
for n, d in (('a', a), ('b', b), ('c', c)):
    if d: print(f"{n}: {len(d)} traces; max {max(r['ns_per_op'] for r in d.values()):.1f}; over 100: {[k for k, r in d.items() if r['ns_per_op'] > 100]}")
PY
cd $B
s=$(date +%s); timeout 40 ./t_alloc --include-ignored > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt | head -20 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $O/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/alloc_mc.txt | tr '\n' ' ')" >> $P
grep -E "Program hit" $O/alloc_mc.txt >> $P
s=$(date +%s); timeout 60 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $O/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/autograd_mc.txt | tr '\n' ' ')" >> $P
cd $O && tar cJf $OUT/c1.tar.xz . && cat $P
