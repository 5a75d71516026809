#!/bin/bash
# Session 62, call 5 (binaries: call 1's replay of a1deba4, the allocator unchanged since; clockprobe.rs built with a
# standalone `cargo build --release`): why did call 4's replay, one trace per process pinned to one core between clock
# probes, give 26-48 ns/op on every trace when one process replaying all 47 traces gives 40-134? Five phases on one
# machine, 20 passes after 2 warm-up passes each: A all traces in one process; B one process per trace; C one process
# per trace pinned to core 3 between clock probes (call 4's method); D all traces in one process pinned to core 3;
# E = A again. Run from the repository root (the *.expandable traces moved out): bash run5.sh
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o5; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; chmod +x clockprobe
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $R/traces/held_out3/*.default.json.gz $R/traces/held_out4/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/ 2>/dev/null
echo "traces $(ls /tmp/ta | wc -l)" >> $P
RP="--device cuda --json --passes 20 --warmup 2"
phase() { echo "phase $1 start $(date +%T) probe $(./clockprobe)" >> $P; }
S=$(date +%s)
phase A; timeout 70 ./replay $RP /tmp/ta/*.default.json.gz 2>/dev/null | grep '^{' > $O/A.jsonl
phase B; for t in /tmp/ta/*.default.json.gz; do timeout 30 ./replay $RP $t 2>/dev/null | grep '^{' >> $O/B.jsonl; done
phase C; for t in /tmp/ta/*.default.json.gz; do taskset -c 3 ./clockprobe > /dev/null; taskset -c 3 timeout 30 ./replay $RP $t 2>/dev/null | grep '^{' >> $O/C.jsonl; taskset -c 3 ./clockprobe > /dev/null; done
phase D; taskset -c 3 timeout 70 ./replay $RP /tmp/ta/*.default.json.gz 2>/dev/null | grep '^{' > $O/D.jsonl
phase E; timeout 70 ./replay $RP /tmp/ta/*.default.json.gz 2>/dev/null | grep '^{' > $O/E.jsonl
phase end; echo "phases $(( $(date +%s) - S )) s" >> $P
python3 - $O >> $P <<'PY'
import json, sys, os
d = sys.argv[1]
ph = {}
for p in 'ABCDE':
    f = os.path.join(d, p + '.jsonl')
    ph[p] = {json.loads(l)['trace'].split('/')[-1].replace('.default.json.gz', ''): json.loads(l) for l in open(f) if l.startswith('{')} if os.path.exists(f) else {}
keys = sorted(set().union(*[set(v) for v in ph.values()]))
print("trace: median ns/op in A (one process), B (process per trace), C (B pinned, probes), D (A pinned), E (A again)")
for k in keys:
    print(f"{k[:26]:26s} " + " ".join(f"{ph[p][k]['ns_per_op']:6.1f}" if k in ph[p] else "     -" for p in 'ABCDE'))
for p in 'ABCDE':
    v = sorted(r['ns_per_op'] for r in ph[p].values())
    if v: print(f"phase {p}: {len(v)} traces, min {v[0]:.1f}, median {v[len(v)//2]:.1f}, max {v[-1]:.1f}, over 100: {sum(x > 100 for x in v)}, max warm calls {max(r['warm_memory_calls_per_pass'] for r in ph[p].values()):g}, syncs {max(r['warm_stream_synchronizations_per_pass'] for r in ph[p].values()):g}")
PY
uptime >> $P
cat $P
