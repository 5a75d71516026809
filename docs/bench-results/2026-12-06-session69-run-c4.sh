#!/bin/bash
# Session 69, call 4: fuzz_s63_seed7103 on cuda:0 with its case allow-listed (t_conf of 80fea9a), then issue 14's replay
# of held-out set 5's six *.default traces (t5/, replay of ece6cda) beside torch_bench.py replay (default and
# expandable_segments:True). Run from the repository root with benches/device_trim.sh out: bash <folder>/run.sh
B=$(cd "$(dirname "$0")" && pwd); R=$(pwd)
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=$OUT/o; mkdir -p $O; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; head -1 $B/HEAD >> $P; uptime >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$B/cf timeout 200 $B/t_conf --include-ignored --nocapture project > $O/conf.txt 2>&1; echo "conformance fuzz_s63_seed7103 rc $? $(( $(date +%s) - s )) s $(grep -E 'conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL" $O/conf.txt | head -5 >> $P
s=$(date +%s); timeout 40 $B/replay --device cuda --json --passes 5 --warmup 2 $B/t5/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 80 python3 $B/torch_bench.py $B/t5 $O/torch_default.json replay > /tmp/torch.txt 2>&1; echo "torch rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 80 python3 $B/torch_bench.py $B/t5 $O/torch_expandable.json replay > /tmp/torch_e.txt 2>&1; echo "torch expandable rc $? $(( $(date +%s) - s )) s" >> $P
python3 - $O/replay_a.jsonl $O/torch_default.json $O/torch_expandable.json >> $P <<'PY'
import json, sys
a = {x['trace'].split('/')[-1].replace('.default.json.gz', ''): x for x in (json.loads(l) for l in open(sys.argv[1]) if l.startswith('{'))}
def t(f):
    try:
        d = json.load(open(f)); return {k.split('/')[-1].replace('.default.json.gz', ''): v['ns_per_op_warm'] for k, v in d.get('replay', d).items()}
    except Exception as e:
        print('torch', f, e); return {}
d, e = t(sys.argv[2]), t(sys.argv[3])
for k, x in sorted(a.items()):
    print(k, round(x['ns_per_op'], 1), 'calls', x['warm_memory_calls_per_pass'], 'syncs', x['warm_stream_synchronizations_per_pass'], 'torch', d.get(k), e.get(k))
PY
uptime >> $P; cat $P
