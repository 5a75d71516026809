#!/bin/bash
# Built on the dev VM at the HEAD below (clean tree): `cargo build --release -p strata-examples --example replay` (stripped, xz),
# ../shared/traces/*.default.json.gz (straces/) and ../shared/anchors/torch_bench.py.
# plus the GPU test executables: CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-autograd
# -p strata-tensor --test cuda --test conformance --no-run (stripped, xz). Run from the repository root on the device with
# the *.expandable traces moved out of the tree (carry limit): bash <folder>/run.sh  (all), or run.sh 1 (replay),
# run.sh 2 (suites)
# Session 63, call 1 (binaries of 90dd8e5): issue 14's replay of the 47 `*.default` traces (5 passes) beside
# torch_bench.py replay (default, expandable_segments:True), then 60 passes; then the GPU suites at HEAD (session 62's
# CPU changes b7a707f, 8c2a0c1, 3268d6d, f1113ba, 55e7698 never ran on a GPU: pin_memory's expanded-view error, bool
# clamp bounds, repeat/tile on empty dims, the channels-last output helper of roll/pad/cat), conformance with strides
# on every dim, memcheck of the shape, scatter, contraction-view and transfer tests.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
if [ "$1" != 2 ]; then
O=$OUT/o1; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
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
if a: print(f"{len(a)} traces; max {max(r['ns_per_op'] for r in a.values()):.1f}; over 100: {[k for k, r in a.items() if r['ns_per_op'] > 100]}; below both PyTorch figures: {below}")
PY
s=$(date +%s); timeout 200 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_60.jsonl 2>&1; echo "replay 60 passes rc $? $(( $(date +%s) - s )) s" >> $P
python3 - $O/replay_60.jsonl >> $P <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
for r in rows:
    w = r.get('warm_pass_ns_per_op', [])
    print(f"60 passes {r['trace'].split('/')[-1].replace('.default.json.gz', '')}: median {r['ns_per_op']:.1f}, slowest pass {max(w) if w else float('nan'):.1f} ns/op, warm calls {r['warm_memory_calls_per_pass']:g}, syncs {r['warm_stream_synchronizations_per_pass']:g}")
if rows: print(f"60 passes: {len(rows)} traces, max median {max(r['ns_per_op'] for r in rows):.1f}, over 100: {[r['trace'].split('/')[-1] for r in rows if r['ns_per_op'] > 100]}, max warm calls {max(r['warm_memory_calls_per_pass'] for r in rows):g}")
PY
uptime >> $P

cat $P
[ "$1" = 1 ] && exit 0
fi
cd $B && for f in *.xz; do [ -x ${f%.xz} ] || { xz -d -k -f $f; chmod +x ${f%.xz}; }; done
O=$OUT/o2; mkdir -p $O
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 230 ./t_tensor --include-ignored --test-threads 16 --skip past_2_31 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A4 $O/tensor.txt | head -60 >> $P
s=$(date +%s); timeout 40 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -20 >> $P
s=$(date +%s); timeout 40 ./t_alloc --include-ignored --test-threads 4 > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt | head -20 >> $P
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 160 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
for F in shape_ops:: scatter_ops:: contract::views transfers; do s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_${F//:/_}.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_${F//:/_}.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/tensor_mc_${F//:/_}.txt | head -6 >> $P; done
uptime >> $P
cat $P
