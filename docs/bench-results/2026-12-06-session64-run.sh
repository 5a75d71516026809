#!/bin/bash
# Session 64 (binaries of the HEAD below, clean tree; built on the dev VM with
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-autograd -p strata-tensor --test cuda --test conformance --no-run
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo build --release -p strata-examples --example replay ; stripped),
# ../shared/traces/*.default.json.gz (straces/), ../shared/anchors/torch_bench.py, fresh conformance programs (conf/:
# fuzz_conformance_s63.py seeds 6350-6352, the six older fuzzers' seed 9734). Run from the repository root on the
# device with the *.expandable traces moved out of the tree (carry limit): bash <folder>/run.sh 1 | 2
# 1: issue 14's replay (5 passes) of the 47 *.default traces beside torch_bench.py replay (default and
#    expandable_segments:True); then the 60-pass drift experiment (vit_finetune_accum alone, all 47 in file order,
#    all 47 reversed, vit_finetune_accum alone again, all 47 pinned to one CPU with taskset), the replay's CPU sampled
#    every second; the alloc and autograd GPU suites; conformance of the fresh programs (cpu and cuda:0).
# 2: strata-tensor's GPU suite (16 threads); conformance of the repository's vectors with strides on every dim.
# 3: compute-sanitizer memcheck of the shape, scatter, contraction-view and transfer tests and of the conformance
#    replay of one fresh hostile file (fuzz_s63_6350).
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
if [ "$1" = 1 ]; then
O=$OUT/o1; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P; nproc >> $P
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $R/traces/held_out3/*.default.json.gz $R/traces/held_out4/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
echo "traces $(ls /tmp/ta | wc -l)" >> $P
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay a rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 130 python3 $B/torch_bench.py /tmp/ta $O/torch_default.json replay > $O/torch.txt 2>&1; echo "torch replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 130 python3 $B/torch_bench.py /tmp/ta $O/torch_expandable.json replay > $O/torch_exp.txt 2>&1; echo "torch replay expandable rc $? $(( $(date +%s) - s )) s" >> $P
uptime >> $P
python3 - $O/replay_a.jsonl $O/torch_default.json $O/torch_expandable.json >> $P <<'PY'
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
a, ta, te = rows(sys.argv[1]), trows(sys.argv[2]), trows(sys.argv[3])
def tn(t, k):
    v = t.get(k, {}); return v.get('ns_per_op_warm') if isinstance(v, dict) else None
below = 0
for k in sorted(a):
    d, e = tn(ta, k), tn(te, k)
    ok = d is not None and e is not None and a[k]['ns_per_op'] < min(d, e)
    below += ok
    print(f"{k}: {a[k]['ns_per_op']:.1f} ns/op, warm calls {a[k]['warm_memory_calls_per_pass']:g}, syncs {a[k]['warm_stream_synchronizations_per_pass']:g}; PyTorch default {d} / expandable {e}{'' if ok else '  <-- not below both'}")
if a: print(f"{len(a)} traces; max {max(r['ns_per_op'] for r in a.values()):.1f}; over 100: {[k for k, r in a.items() if r['ns_per_op'] > 100]}; below both PyTorch figures: {below}; ratio to the faster PyTorch {min(min(tn(ta,k),tn(te,k))/a[k]['ns_per_op'] for k in a if tn(ta,k) and tn(te,k)):.1f}-{max(min(tn(ta,k),tn(te,k))/a[k]['ns_per_op'] for k in a if tn(ta,k) and tn(te,k)):.1f}")
PY
V=/tmp/ta/vit_finetune_accum.default.json.gz
lscpu | grep -E "^CPU\(s\)|NUMA|Model name|Socket" >> $P
run() { n=$1; shift; s=$(date +%s); $PIN timeout 150 ./replay --device cuda --json --passes 60 --warmup 2 "$@" > $O/d_$n.jsonl 2>&1 & pid=$!; while kill -0 $pid 2>/dev/null; do echo "$(date +%s) $(ps -L -o psr=,pcpu= -C replay | head -1 | tr '\n' ' ') $(cut -d' ' -f1 /proc/loadavg) $(head -1 /proc/stat)" >> $O/psr_$n.txt; sleep 1; done; wait $pid; echo "$n rc $? $(( $(date +%s) - s )) s $(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader) $(cut -d' ' -f1-3 /proc/loadavg)" >> $P; }
run A_vit_alone $V
run B_forward /tmp/ta/*.default.json.gz
run C_reverse $(ls /tmp/ta/*.default.json.gz | sort -r)
run D_vit_alone $V
PIN="taskset -c $(( $(nproc) - 2 ))" run F_forward_pinned /tmp/ta/*.default.json.gz
for n in B_forward C_reverse F_forward_pinned; do echo "$n cpus seen: $(awk '{print $2}' $O/psr_$n.txt | uniq -c | tr '\n' ' ')" >> $P; done
python3 - $O >> $P <<'PY'
import glob, os, sys
for f in sorted(glob.glob(sys.argv[1] + '/psr_*.txt')):
    rows = [l.split() for l in open(f) if ' cpu ' in l]
    if len(rows) < 2: continue
    def vals(r):
        i = r.index('cpu'); return [int(x) for x in r[i + 1:i + 9]]
    a, b = vals(rows[0]), vals(rows[-1]); d = [y - x for x, y in zip(a, b)]; t = sum(d) or 1
    print(f"{os.path.basename(f)[4:-4]}: host CPU over the run: busy {100 * (d[0] + d[1] + d[2] + d[5] + d[6]) / t:.1f} %, steal {100 * d[7] / t:.2f} %, iowait {100 * d[4] / t:.1f} %; replay %CPU samples {' '.join(r[2] for r in rows[::max(1, len(rows) // 12)])}")
PY
python3 - $O >> $P <<'PY'
import json, sys, glob, os, statistics
for f in sorted(glob.glob(sys.argv[1] + '/d_*.jsonl')):
    rows = [json.loads(l) for l in open(f) if l.startswith('{')]
    n = os.path.basename(f)[2:-6]
    if len(rows) > 3:
        h = len(rows) // 2
        print(f"{n}: {len(rows)} traces, max median {max(r['ns_per_op'] for r in rows):.1f}, over 100: {[r['trace'].split('/')[-1].split('.')[0] for r in rows if r['ns_per_op'] > 100]}, max warm calls {max(r['warm_memory_calls_per_pass'] for r in rows):g}, syncs {max(r['warm_stream_synchronizations_per_pass'] for r in rows):g}; probe first/last {rows[0]['clock_probe_ns_per_step']} {rows[-1]['clock_probe_ns_per_step']}, memory probe first/last {rows[0].get('memory_probe_ns_per_load')} {rows[-1].get('memory_probe_ns_per_load')}")
        print('  by position (ns/op / memory probe / L2 probe / clock probe):', ' '.join(f"{r['ns_per_op']:.0f}/{r.get('memory_probe_ns_per_load', [0])[0]:.0f}/{r.get('cache_probe_ns_per_load', [0])[0]:.1f}/{r['clock_probe_ns_per_step'][0]:.2f}" for r in rows))
    for r in rows:
        if len(rows) <= 3 or r['trace'].split('/')[-1].split('.')[0] in ('vit_finetune_accum', 'seq2seq_token_budget', 'bert_serving', 'vit_train', 'alexnet_train'):
            print(f"  {n:12s} {r['trace'].split('/')[-1].split('.')[0]:26s} median {r['ns_per_op']:6.1f} fastest {r['ns_per_op_fastest_warm_pass']:6.1f} probe {r['clock_probe_ns_per_step']} mem {r.get('memory_probe_ns_per_load')} l2 {r.get('cache_probe_ns_per_load')} warm calls {r['warm_memory_calls_per_pass']:g} syncs {r['warm_stream_synchronizations_per_pass']:g}")
PY
s=$(date +%s); timeout 40 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -20 >> $P
s=$(date +%s); timeout 40 ./t_alloc --include-ignored --test-threads 4 > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt | head -20 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$B/conf timeout 100 ./t_conf --include-ignored --nocapture project > $O/conf_fresh.txt 2>&1; echo "conformance (fresh programs) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf_fresh.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf_fresh.txt | head -10 >> $P
uptime >> $P
cat $P
fi
if [ "$1" = 2 ]; then
O=$OUT/o2; mkdir -p $O
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 330 ./t_tensor --include-ignored --test-threads 16 --skip past_2_31 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A4 $O/tensor.txt | head -60 >> $P
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 150 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
uptime >> $P
cat $P
fi
if [ "$1" = 3 ]; then
O=$OUT/o3; mkdir -p $O
P=$O/summary.txt; : > $P
cat $B/HEAD >> $P; uptime >> $P
for F in shape_ops:: scatter_ops:: contract::views transfers; do s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_${F//:/_}.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_${F//:/_}.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/tensor_mc_${F//:/_}.txt | head -6 >> $P; done
mkdir -p /tmp/mcconf && cp $B/conf/fuzz_s63_6350.json.gz /tmp/mcconf/
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/mcconf timeout 150 compute-sanitizer --tool memcheck ./t_conf --include-ignored --nocapture project > $O/conf_mc.txt 2>&1; echo "conformance memcheck (fuzz_s63_6350) rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result|conformance on' $O/conf_mc.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/conf_mc.txt | head -6 >> $P
uptime >> $P
cat $P
fi
