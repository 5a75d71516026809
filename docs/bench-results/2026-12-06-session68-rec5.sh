#!/bin/bash
# Session 68, call 3: records held-out set 5 (benches/anchors/workloads_held_out5/, both allocator modes, each mode in a
# fresh process, two workloads at a time in three jobs, via record_new_traces.sh), then issue 14's replay of the six new
# *.default traces: strata (replay --device cuda --json --passes 5 --warmup 2, unpinned then pinned with taskset) beside
# torch_bench.py replay, default and expandable_segments:True.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
cd $B && for f in replay.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
O=/tmp/o3; mkdir -p $O/held_out5 /tmp/wl5; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; head -1 $B/HEAD >> $P; uptime >> $P
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $P
cp $R/benches/anchors/record_trace.py $R/benches/anchors/record_new_traces.sh $R/benches/anchors/workloads_held_out5/*.py /tmp/wl5/
s=$(date +%s)
(bash /tmp/wl5/record_new_traces.sh /tmp/wl5 $O/held_out5 conformer_ctc_asr kmeans_chunked > $O/rec1.txt 2>&1) &
(bash /tmp/wl5/record_new_traces.sh /tmp/wl5 $O/held_out5 dit_aspect_buckets protein_pair_crops > $O/rec2.txt 2>&1) &
(bash /tmp/wl5/record_new_traces.sh /tmp/wl5 $O/held_out5 layer_streaming_offload mae_pretrain_varmask > $O/rec3.txt 2>&1) &
wait
echo "recording $(( $(date +%s) - s )) s" >> $P
grep -hE "events|FAILED" $O/rec?.txt >> $P
grep -h -A3 FAILED $O/rec?.txt | head -40 >> $P
for f in $O/held_out5/logs/*.log; do echo "== $(basename $f)"; grep -vE '^\s*$' $f | tail -4; done >> $O/logs.txt
uptime >> $P
cd $B
if ls $O/held_out5/*.default.json.gz > /dev/null 2>&1; then
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 $O/held_out5/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay a rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 120 python3 $B/torch_bench.py $O/held_out5 $O/torch_default.json replay > $O/torch.txt 2>&1; echo "torch replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 120 python3 $B/torch_bench.py $O/held_out5 $O/torch_expandable.json replay > $O/torch_exp.txt 2>&1; echo "torch replay expandable rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); taskset -c $(( $(nproc) - 2 )) timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 $O/held_out5/*.default.json.gz > $O/replay_pinned.jsonl 2>&1; echo "replay pinned rc $? $(( $(date +%s) - s )) s" >> $P
python3 - $O/replay_a.jsonl $O/replay_pinned.jsonl $O/torch_default.json $O/torch_expandable.json >> $P <<'PY'
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
for k in sorted(a):
    print(f"{k}: {a[k]['ns_per_op']:.1f} / pinned {b.get(k, {}).get('ns_per_op', float('nan')):.1f} ns/op, warm calls {a[k]['warm_memory_calls_per_pass']:g}/{b.get(k, {}).get('warm_memory_calls_per_pass', -1):g}, syncs {a[k]['warm_stream_synchronizations_per_pass']:g}/{b.get(k, {}).get('warm_stream_synchronizations_per_pass', -1):g}; PyTorch default {tn(ta, k)} expandable {tn(te, k)}; L2 probe {a[k]['cache_probe_ns_per_load'][0]:.2f}")
PY
fi
cd $O/held_out5 && tar cf /tmp/t5.tar *.json.gz logs && cd /tmp && split -b 15M t5.tar $OUT/t5.tar.
cp $P $O/logs.txt $OUT/; for f in replay_a.jsonl torch_default.json torch_expandable.json; do [ -f $O/$f ] && cp $O/$f $OUT/; done
ls -la $OUT; cat $P
