#!/bin/bash
# Session 66: test executables and replay of the commit in HEAD (clean tree), built on the dev VM with
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-autograd -p strata-tensor --test cuda --test conformance --no-run
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo build --release -p strata-examples --example replay ; stripped, xz.
# Run from the repository root on the device, *.expandable traces moved out of the tree (carry limit): bash <folder>/run.sh 1 | 3 | 4
# 1: strata-tensor's GPU suite (16 threads); conformance of the repository's vectors with strides on every dim (cpu and cuda:0);
#    this session's fresh programs (conf/: seven fuzzers, 8,000) on cpu and cuda:0, each file alone; alloc and autograd GPU suites.
# 3: compute-sanitizer memcheck of the shape, scatter, contraction-view, transfer tests, of one fresh hostile file, of the alloc suite.
# 4: issue 14's replay of the 47 *.default traces (5 passes after 2 warm-up, unpinned and pinned) beside torch_bench.py replay
#    (default, expandable_segments:True), then a 60-pass replay of each.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
O=$OUT/o$1; mkdir -p $O; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader >> $P; head -1 $B/HEAD >> $P; uptime >> $P
if [ "$1" = 1 ]; then
s=$(date +%s); timeout 330 ./t_tensor --include-ignored --test-threads 16 --skip past_2_31 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A4 $O/tensor.txt | head -60 >> $P
grep -E "^test .* \.\.\. " $O/tensor.txt | awk '{print $NF}' | sort | uniq -c >> $P
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 200 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
for F in $B/conf/fuzz_*.json.gz; do mkdir -p /tmp/c1 && rm -f /tmp/c1/* && cp $F /tmp/c1/; s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/c1 timeout 100 ./t_conf --include-ignored --nocapture project > $O/c_$(basename $F .json.gz).txt 2>&1; echo "$(basename $F) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/c_$(basename $F .json.gz).txt | tr '\n' ' ')" >> $P; grep -E "^FAIL|panicked" $O/c_$(basename $F .json.gz).txt | head -4 >> $P; done
s=$(date +%s); timeout 40 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
s=$(date +%s); timeout 40 ./t_alloc --include-ignored --test-threads 4 > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt $O/autograd.txt | head -20 >> $P
fi
if [ "$1" = 3 ]; then
for F in shape_ops:: scatter_ops:: contract::views transfers; do s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_${F//:/_}.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_${F//:/_}.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/tensor_mc_${F//:/_}.txt | head -6 >> $P; done
mkdir -p /tmp/mcconf && cp $B/conf/fuzz_s63_6601.json.gz /tmp/mcconf/
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/mcconf timeout 200 compute-sanitizer --tool memcheck ./t_conf --include-ignored --nocapture project > $O/conf_mc.txt 2>&1; echo "conformance memcheck (fuzz_s63_6601) rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result|conformance on' $O/conf_mc.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/conf_mc.txt | head -6 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $O/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/alloc_mc.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/alloc_mc.txt | sort | uniq -c | head -8 >> $P
fi
if [ "$1" = 4 ]; then
mkdir -p /tmp/ta && cp $R/traces/*.default.json.gz $R/traces/held_out*/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "traces $(ls /tmp/ta | wc -l)" >> $P
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay a rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 130 python3 $B/torch_bench.py /tmp/ta $O/torch_default.json replay > $O/torch.txt 2>&1; echo "torch replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 130 python3 $B/torch_bench.py /tmp/ta $O/torch_expandable.json replay > $O/torch_exp.txt 2>&1; echo "torch replay expandable rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); taskset -c $(( $(nproc) - 2 )) timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_pinned.jsonl 2>&1; echo "replay pinned rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 150 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_60.jsonl 2>&1; echo "replay 60 passes rc $? $(( $(date +%s) - s )) s" >> $P
python3 - $O/replay_a.jsonl $O/replay_pinned.jsonl $O/torch_default.json $O/torch_expandable.json >> $P <<'PY2'
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
    print(f"{name}: {len(x)} traces, ns/op {min(r['ns_per_op'] for r in x.values()):.1f}-{max(r['ns_per_op'] for r in x.values()):.1f}, over 100: {sorted(k for k, r in x.items() if r['ns_per_op'] > 100)}, below both PyTorch: {below}, ratio to the faster PyTorch {min(rat) if rat else 0:.1f}-{max(rat) if rat else 0:.1f}, max warm calls {max(r['warm_memory_calls_per_pass'] for r in x.values()):g}, syncs {max(r['warm_stream_synchronizations_per_pass'] for r in x.values()):g}, L2 probe {min(r['cache_probe_ns_per_load'][0] for r in x.values()):.2f}-{max(r['cache_probe_ns_per_load'][0] for r in x.values()):.2f}")
d = [tn(ta, k) for k in a if tn(ta, k)]; e = [tn(te, k) for k in a if tn(te, k)]
if d and e: print(f"PyTorch default {min(d):.1f}-{max(d):.1f}, expandable {min(e):.1f}-{max(e):.1f} ns/op ({len(d)}, {len(e)} traces)")
PY2
python3 - $O/replay_60.jsonl >> $P <<'PY3'
import json, sys, statistics
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
if r:
    med = [x['ns_per_op'] for x in r]; worst = [max(x['warm_pass_ns_per_op']) for x in r]; n = [len(x['warm_pass_ns_per_op']) for x in r]
    print(f"60-pass: {len(r)} traces, {min(n)}-{max(n)} timed passes, median ns/op {min(med):.1f}-{max(med):.1f}, over 100: {sorted(x['trace'].split('/')[-1].replace('.default.json.gz','') for x in r if x['ns_per_op'] > 100)}, slowest single pass {max(worst):.1f}, passes over 100 in all: {sum(sum(1 for v in x['warm_pass_ns_per_op'] if v > 100) for x in r)} of {sum(n)}, max warm calls {max(x['warm_memory_calls_per_pass'] for x in r):g}, syncs {max(x['warm_stream_synchronizations_per_pass'] for x in r):g}, L2 probe {min(x['cache_probe_ns_per_load'][0] for x in r):.2f}-{max(x['cache_probe_ns_per_load'][0] for x in r):.2f}")
PY3
fi
uptime >> $P
cat $P
