#!/bin/bash
# Session 63, call 6 (binaries of 90dd8e5): does the 60-pass drift of call 1 (later traces slower in one process while
# the clock probe stays at 0.19-0.21 ns/step) follow the trace or its position in the run? vit_finetune_accum alone,
# then all 47 traces in reverse order in one process, then vit_finetune_accum alone again, then three traces each in a
# process of its own; 60 passes after 2 warm-up passes each.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o3; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $R/traces/held_out2/*.default.json.gz $R/traces/held_out3/*.default.json.gz $R/traces/held_out4/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
V=/tmp/ta/vit_finetune_accum.default.json.gz
run() { n=$1; shift; s=$(date +%s); timeout 150 ./replay --device cuda --json --passes 60 --warmup 2 "$@" > $O/$n.jsonl 2>&1; echo "$n rc $? $(( $(date +%s) - s )) s" >> $P; }
run A_vit_alone $V
run B_reverse $(ls /tmp/ta/*.default.json.gz | sort -r)
run C_vit_alone $V
for t in vit_finetune_accum seq2seq_token_budget bert_serving; do run D_$t /tmp/ta/$t.default.json.gz; done
uptime >> $P
python3 - $O >> $P <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + '/*.jsonl')):
    for l in open(f):
        if l.startswith('{'):
            r = json.loads(l)
            print(f"{os.path.basename(f)[:-6]:14s} {r['trace'].split('/')[-1].split('.')[0]:26s} median {r['ns_per_op']:6.1f} fastest {r['ns_per_op_fastest_warm_pass']:6.1f} probe {r['clock_probe_ns_per_step']} warm calls {r['warm_memory_calls_per_pass']:g} syncs {r['warm_stream_synchronizations_per_pass']:g}")
PY
cat $P
