#!/bin/bash
# Built on the dev VM: t_tensor at the HEAD below (CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc
# -p strata-autograd -p strata-tensor --test cuda --no-run), call 1's replay (a1deba4; the allocator is unchanged), and
# clockprobe (clockprobe.rs, a standalone `cargo build --release`: a fixed chain of dependent integer steps, whose time
# per step follows the core's clock). Run from the repository root (the *.expandable traces moved out): bash run4.sh
# Session 62, call 4: the transfer tests after the pin_memory test fix, with memcheck; then issue 14's replay one trace
# per process, 20 passes after 2 warm-up passes, each between two clock probes on the same core (taskset -c 3), twice
# over the 47 traces: does a trace's ns/op follow the core's clock from run to run?
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o4; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; chmod +x clockprobe
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 90 ./t_tensor --include-ignored --test-threads 4 --skip past_2_31 transfers > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked" -A6 $O/tensor.txt | head -30 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 transfers > $O/tensor_mc.txt 2>&1; echo "tensor memcheck transfers rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc.txt | tr '\n' ' ')" >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $R/traces/held_out3/*.default.json.gz $R/traces/held_out4/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/ 2>/dev/null
echo "traces $(ls /tmp/ta | wc -l)" >> $P
s=$(date +%s)
for round in 1 2; do
  for t in /tmp/ta/*.default.json.gz; do
    [ $(( $(date +%s) - s )) -gt 200 ] && break 2
    c0=$(taskset -c 3 ./clockprobe)
    l=$(taskset -c 3 timeout 30 ./replay --device cuda --json --passes 20 --warmup 2 $t 2>/dev/null | grep '^{')
    c1=$(taskset -c 3 ./clockprobe)
    echo "$round|$c0|$c1|$l" >> $O/rounds.txt
  done
done
echo "rounds $(( $(date +%s) - s )) s" >> $P
python3 - $O/rounds.txt >> $P <<'PY'
import json, sys
rows = {}
for l in open(sys.argv[1]):
    rnd, c0, c1, j = l.rstrip('\n').split('|', 3)
    if not j.startswith('{'): continue
    r = json.loads(j)
    k = r['trace'].split('/')[-1].replace('.default.json.gz', '')
    p = (float(c0.split()[3]) + float(c1.split()[3])) / 2
    rows.setdefault(k, {})[rnd] = (r['ns_per_op'], r['ns_per_op_fastest_warm_pass'], p, r['warm_memory_calls_per_pass'], r['warm_stream_synchronizations_per_pass'])
print("trace: round 1 median/fastest ns/op, probe ns/step | round 2 ... | ratio of ns/op (2/1), ratio of probe (2/1)")
xs, ys = [], []
for k in sorted(rows):
    a, b = rows[k].get('1'), rows[k].get('2')
    f = lambda v: f"{v[0]:6.1f}/{v[1]:6.1f} probe {v[2]:.4f} calls {v[3]:g}/{v[4]:g}" if v else "-"
    extra = ""
    if a and b:
        xs.append(b[2] / a[2]); ys.append(b[0] / a[0]); extra = f" | ratio {b[0]/a[0]:.2f} probe {b[2]/a[2]:.2f}"
    print(f"{k[:26]:26s} {f(a)} | {f(b)}{extra}")
allv = [v for d in rows.values() for v in d.values()]
if allv:
    print(f"probe ns/step: min {min(v[2] for v in allv):.4f} max {max(v[2] for v in allv):.4f}; ns/op max {max(v[0] for v in allv):.1f}; over 100 (median): {sum(v[0] > 100 for v in allv)} of {len(allv)}")
    cyc = [v[0] / v[2] for v in allv]
    print(f"ns/op divided by probe ns/step (clock-free cost): min {min(cyc):.0f} max {max(cyc):.0f}")
if len(xs) > 2:
    n = len(xs); mx, my = sum(xs)/n, sum(ys)/n
    cov = sum((x-mx)*(y-my) for x, y in zip(xs, ys)); vx = sum((x-mx)**2 for x in xs); vy = sum((y-my)**2 for y in ys)
    print(f"correlation of the round-2/round-1 ratios over {n} traces: {cov / (vx*vy) ** 0.5 if vx and vy else float('nan'):.2f}")
PY
uptime >> $P
cat $P
