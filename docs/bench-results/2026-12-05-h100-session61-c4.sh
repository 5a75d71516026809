#!/bin/bash
# Built on the dev VM at the HEAD below (+ the working tree it names): CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release
# -p strata-alloc -p strata-autograd -p strata-tensor --test cuda --test conformance --no-run (t_tensor, t_conf), and
# call 2's replay binary and straces/; test executables stripped and xz-compressed into a carried folder with this
# script; run from the repository root on the device (the *.expandable traces moved out of the tree for the call, to fit
# the carry limit): bash <folder>/run.sh
# Session 61, call 4: strata-tensor's GPU tests (the scatter, sort, transfer, unary and layer-norm ones) with the fixes of calls 1 and 3's failures (the scatter family's wide
# path for index_put with more positions than elements; the scatter test's tolerances), clamp's layout on the GPU, and
# to(device) keeping PyTorch's layout; memcheck of the scatter, transfer and clamp tests; conformance with strides on
# every dim (clamp's results now compared on the GPU too); issue 14's replay unpinned and pinned to one core (taskset).
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o4; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P; nproc >> $P
lscpu | grep -E "Model name|^CPU\(s\)|NUMA|MHz|L3" >> $P 2>&1; cat /sys/kernel/mm/transparent_hugepage/enabled >> $P 2>&1; taskset -p $$ >> $P 2>&1
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $R/traces/held_out3/*.default.json.gz $R/traces/held_out4/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay unpinned rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 60 taskset -c 5 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay_p.jsonl 2>&1; echo "replay pinned (taskset -c 5) rc $? $(( $(date +%s) - s )) s" >> $P
python3 - $O/replay_a.jsonl $O/replay_p.jsonl >> $P <<'PY'
import json, sys
def rows(f): return {r['trace'].split('/')[-1].replace('.default.json.gz', ''): r for r in (json.loads(l) for l in open(f) if l.startswith('{'))}
a, p = rows(sys.argv[1]), rows(sys.argv[2])
for k in sorted(a):
    print(f"{k}: unpinned {a[k]['ns_per_op']:.1f}, pinned {p[k]['ns_per_op'] if k in p else float('nan'):.1f} ns/op; warm calls {a[k]['warm_memory_calls_per_pass']:g}/{p.get(k, {}).get('warm_memory_calls_per_pass', -1):g}, syncs {a[k]['warm_stream_synchronizations_per_pass']:g}")
for n, t in (('unpinned', a), ('pinned', p)):
    if t: print(f"{n}: {len(t)} traces, max {max(r['ns_per_op'] for r in t.values()):.1f}, over 100: {[k for k, r in t.items() if r['ns_per_op'] > 100]}")
PY
s=$(date +%s); timeout 200 ./t_tensor --include-ignored --test-threads 16 --skip past_2_31 scatter_ops:: transfers clamp_to sort:: unary layer_norm > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|^Error" -A4 $O/tensor.txt | head -40 >> $P
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 100 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
for F in scatter_ops:: transfers clamp_to; do s=$(date +%s); timeout 50 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_${F%::}.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_${F%::}.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/tensor_mc_${F%::}.txt | head -6 >> $P; done
uptime >> $P
cat $P
