#!/bin/bash
# Built on the dev VM at the HEAD below: CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc
# -p strata-autograd -p strata-tensor --test cuda --no-run (t_tensor), and call 1's replay binary (a1deba4, the
# allocator unchanged since); stripped, xz-compressed into a carried folder with this script; run from the repository
# root on the device (the *.expandable traces moved out of the tree for the call): bash <folder>/run3.sh
# Session 62, call 3: pin_memory keeping a view's strides (the transfer tests) and the kron test's fix on the GPU, with
# memcheck; issue 14's replay (5 passes, then 60) with the host's steal time sampled every second (vmstat) and each
# trace's finishing time, to see whether the slow traces coincide with time the hypervisor gave to others.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o3; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 120 ./t_tensor --include-ignored --test-threads 8 --skip past_2_31 transfers contract::views shape_ops::channels_last > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked" -A6 $O/tensor.txt | head -30 >> $P
for F in transfers contract::views; do s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_${F//:/_}.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_${F//:/_}.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/tensor_mc_${F//:/_}.txt | head -6 >> $P; done
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $R/traces/held_out3/*.default.json.gz $R/traces/held_out4/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/ 2>/dev/null
echo "traces $(ls /tmp/ta | wc -l)" >> $P
lscpu | grep -E "Model name|Hypervisor|MHz" >> $P 2>&1
vmstat -n -t 1 > $O/vmstat.txt 2>&1 & VM=$!
stamp() { while IFS= read -r l; do echo "$(date +%s.%N) $l"; done; }
grep -E "^cpu " /proc/stat >> $P
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz 2>&1 | stamp > $O/replay_a.txt; echo "replay 5 rc $? $(( $(date +%s) - s )) s" >> $P
grep -E "^cpu " /proc/stat >> $P
s=$(date +%s); timeout 200 ./replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz 2>&1 | stamp > $O/replay_60.txt; echo "replay 60 rc $? $(( $(date +%s) - s )) s" >> $P
grep -E "^cpu " /proc/stat >> $P
kill $VM
python3 - $O/replay_a.txt $O/replay_60.txt $O/vmstat.txt >> $P <<'PY'
import json, sys, time, calendar
def rows(f):
    out = []
    for l in open(f):
        t, _, j = l.partition(' ')
        if j.startswith('{'):
            r = json.loads(j); out.append((float(t), r))
    return out
# vmstat -t: last two fields are date and time (UTC on the device).
vm = []
for l in open(sys.argv[3]):
    p = l.split()
    if len(p) > 17 and p[0].isdigit():
        ts = calendar.timegm(time.strptime(p[-2] + ' ' + p[-1], '%Y-%m-%d %H:%M:%S'))
        hdr = ['r','b','swpd','free','buff','cache','si','so','bi','bo','in','cs','us','sy','id','wa','st']
        vm.append((ts, dict(zip(hdr, map(int, p[:17])))))
for name, f in (('5 passes', sys.argv[1]), ('60 passes', sys.argv[2])):
    rs = rows(f); prev = None
    print(f"== {name}: trace, median ns/op, fastest pass, finished at, vmstat seconds during it: us/sy/st/id (mean), max st")
    for t, r in rs:
        start = prev if prev is not None else t - 1
        sel = [v for ts, v in vm if start <= ts <= t + 0.5]
        m = lambda k: sum(v[k] for v in sel) / len(sel) if sel else float('nan')
        mx = max((v['st'] for v in sel), default=-1)
        print(f"{r['trace'].split('/')[-1].replace('.default.json.gz','')[:26]:26s} {r['ns_per_op']:7.1f} {r['ns_per_op_fastest_warm_pass']:7.1f} {t:.1f} us {m('us'):.1f} sy {m('sy'):.1f} st {m('st'):.1f} id {m('id'):.1f} maxst {mx} n {len(sel)} calls {r['warm_memory_calls_per_pass']:g}/{r['warm_stream_synchronizations_per_pass']:g}")
        prev = t
    if rs: print(f"{name}: {len(rs)} traces, max median {max(r['ns_per_op'] for _, r in rs):.1f}, over 100: {[r['trace'].split('/')[-1] for _, r in rs if r['ns_per_op'] > 100]}")
PY
uptime >> $P
cat $P
