#!/bin/bash
# Session 71, call 1: the allocator of b78fed7 (f7f0d7e's hold-chunk rule after a run at the peak, first run on a GPU):
# strata-alloc's GPU suite and its memcheck, strata-tensor's GPU suite, issue 14's replay of every *.default trace
# (traces/, traces/held_out{,2,3,4}/ in the tree; the five shared ones and held_out5/held_out6, moved out by
# benches/device_trim.sh, carried xz-compressed in straces/) beside torch_bench.py replay (default and
# expandable_segments:True), then 60 passes of each. Binaries of b78fed7, built on the dev VM with
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-tensor --test cuda --test conformance --no-run
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo build --release -p strata-examples --example replay ; stripped, xz.
# Run from the repository root on the device with benches/device_trim.sh out: bash <folder>/run.sh
T0=$(date +%s)
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
O=$OUT/o; mkdir -p $O; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader >> $P; head -1 $B/HEAD >> $P; uptime >> $P
mkdir -p /tmp/ta && cp $R/traces/*.default.json.gz $R/traces/held_out*/*.default.json.gz /tmp/ta/
( for f in $B/straces/*.json.xz; do n=$(basename $f .xz); xz -dc $f | gzip -1 > /tmp/ta/$n.gz & done; wait ) &
UNPACK=$!
s=$(date +%s); timeout 60 ./t_alloc --include-ignored --test-threads 4 > /tmp/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' /tmp/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 /tmp/alloc.txt | head -20 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > /tmp/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' /tmp/alloc_mc.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" /tmp/alloc_mc.txt | sort | uniq -c | head -8 >> $P
s=$(date +%s); timeout 100 ./t_tcuda --include-ignored --test-threads 8 > /tmp/tcuda.txt 2>&1; echo "tensor cuda rc $? $(( $(date +%s) - s )) s $(grep '^test result' /tmp/tcuda.txt)" >> $P
grep -E "FAILED|panicked" -A3 /tmp/tcuda.txt | head -20 >> $P
wait $UNPACK
echo "traces $(ls /tmp/ta | wc -l)" >> $P
s=$(date +%s); timeout 90 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay a rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 200 python3 $B/torch_bench.py /tmp/ta $O/torch_default.json replay > /tmp/torch.txt 2>&1; echo "torch replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 200 python3 $B/torch_bench.py /tmp/ta $O/torch_expandable.json replay > /tmp/torch_exp.txt 2>&1; echo "torch replay expandable rc $? $(( $(date +%s) - s )) s" >> $P
left=$(( 585 - ($(date +%s) - T0) )); s=$(date +%s); timeout $left ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_60.jsonl 2>&1; echo "replay 60 passes rc $? $(( $(date +%s) - s )) s (limit $left)" >> $P
python3 - $O/replay_a.jsonl /dev/null $O/torch_default.json $O/torch_expandable.json >> $P <<'PY2'
import json, sys
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
a, b, ta, te = rows(sys.argv[1]), rows(sys.argv[2]), trows(sys.argv[3]), trows(sys.argv[4])
def tn(t, k):
    v = t.get(k, {}); return v.get('ns_per_op_warm') if isinstance(v, dict) else None
for name, x in (('unpinned', a), ('pinned', b)):
    if not x: continue
    below = sum(1 for k in x if tn(ta, k) and tn(te, k) and x[k]['ns_per_op'] < min(tn(ta, k), tn(te, k)))
    rat = [min(tn(ta, k), tn(te, k)) / x[k]['ns_per_op'] for k in x if tn(ta, k) and tn(te, k)]
    top = sorted(x, key=lambda k: -x[k]['ns_per_op'])[:3]
    print(f"{name}: {len(x)} traces, ns/op {min(r['ns_per_op'] for r in x.values()):.1f}-{max(r['ns_per_op'] for r in x.values()):.1f} (top {[(k, round(x[k]['ns_per_op'], 1)) for k in top]}), over 100: {sorted(k for k, r in x.items() if r['ns_per_op'] > 100)}, below both PyTorch: {below}, ratio to the faster PyTorch {min(rat) if rat else 0:.1f}-{max(rat) if rat else 0:.1f}, max warm calls {max(r['warm_memory_calls_per_pass'] for r in x.values()):g}, syncs {max(r['warm_stream_synchronizations_per_pass'] for r in x.values()):g}, L2 probe {min(r['cache_probe_ns_per_load'][0] for r in x.values()):.2f}-{max(r['cache_probe_ns_per_load'][0] for r in x.values()):.2f}")
d = [tn(ta, k) for k in a if tn(ta, k)]; e = [tn(te, k) for k in a if tn(te, k)]
if d and e: print(f"PyTorch default {min(d):.1f}-{max(d):.1f}, expandable {min(e):.1f}-{max(e):.1f} ns/op ({len(d)}, {len(e)} traces)")
PY2
python3 - $O/replay_60.jsonl >> $P <<'PY3'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
if r:
    med = [x['ns_per_op'] for x in r]; worst = [max(x['warm_pass_ns_per_op']) for x in r]; n = [len(x['warm_pass_ns_per_op']) for x in r]
    over = {x['trace'].split('/')[-1].replace('.default.json.gz',''): sum(1 for v in x['warm_pass_ns_per_op'] if v > 100) for x in r}
    print(f"60-pass: {len(r)} traces, {min(n)}-{max(n)} timed passes, median ns/op {min(med):.1f}-{max(med):.1f}, over 100: {sorted(x['trace'].split('/')[-1].replace('.default.json.gz','') for x in r if x['ns_per_op'] > 100)}, slowest single pass {max(worst):.1f}, passes over 100 in all: {sum(over.values())} of {sum(n)} {dict((k, v) for k, v in over.items() if v)}, max warm calls {max(x['warm_memory_calls_per_pass'] for x in r):g}, syncs {max(x['warm_stream_synchronizations_per_pass'] for x in r):g}, L2 probe {min(x['cache_probe_ns_per_load'][0] for x in r):.2f}-{max(x['cache_probe_ns_per_load'][0] for x in r):.2f}")
PY3
uptime >> $P; cat $P; cp $P $OUT/summary.txt
