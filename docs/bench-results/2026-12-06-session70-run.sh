#!/bin/bash
# Session 70 on the device, from the repository root, *.expandable traces and held_out5 moved out (benches/device_trim.sh out).
# t_conf and replay of 80fea9a (their strata sources are those of ad2482f, the head: later commits changed comments and
# docs only; CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-tensor --test conformance --no-run and
# cargo build --release -p strata-examples --example replay; stripped, xz); t_autograd: strata-autograd's GPU suite
# (--test cuda) of 5c74447 (a leaf's gradients of a pass summed before they are added to .grad).
#   run.sh 1: held-out set 6 recorded (benches/anchors/workloads_held_out6/, both allocator modes, each mode in a fresh
#             process, two workloads at a time in three jobs, via record_new_traces.sh) while the repository's
#             conformance vectors run with strides on every dim (cpu and cuda:0); then issue 14's replay of the new
#             *.default traces (replay --device cuda --json --passes 5 --warmup 2) beside torch_bench.py replay
#             (default and expandable_segments:True) on the quiet machine; then the fresh fuzz files (fz/: seeds
#             7109-7128 of fuzz_conformance_s55/s56/s58/s59/s63, one file per process) on cuda:0 until 470 s.
#   run.sh 2: the fuzz files mode 1 left.
MODE=$1; B=$(cd "$(dirname "$0")" && pwd); R=$(pwd); T0=$(date +%s)
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=/tmp/o$MODE; mkdir -p $O; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; head -1 $B/HEAD >> $P; uptime >> $P
if [ "$MODE" = 1 ]; then
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $P
W=/tmp/wl6; mkdir -p $W $O/held_out6
cp $R/benches/anchors/record_trace.py $R/benches/anchors/record_new_traces.sh $R/benches/anchors/workloads_held_out6/*.py $W/
names=$(cd $W && ls *.py | grep -v record_trace | sed 's/\.py$//' | tr '\n' ' ')
set -- $names
( s=$(date +%s)
  (bash $W/record_new_traces.sh $W $O/held_out6 $1 $2 > $O/rec1.txt 2>&1) &
  (bash $W/record_new_traces.sh $W $O/held_out6 $3 $4 > $O/rec2.txt 2>&1) &
  (bash $W/record_new_traces.sh $W $O/held_out6 $5 $6 > $O/rec3.txt 2>&1) &
  wait; echo "recording $(( $(date +%s) - s )) s" > $O/rec_time.txt ) &
RECPID=$!
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 400 $B/t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked|unexpected" $O/conf.txt | grep -v ' 0 unexpected' | head -20 >> $P
wait $RECPID
cat $O/rec_time.txt >> $P
grep -hE "events|FAILED" $O/rec?.txt >> $P
grep -h -A3 FAILED $O/rec?.txt | head -40 >> $P
for f in $O/held_out6/logs/*.log; do echo "== $(basename $f)"; grep -vE '^\s*$' $f | tail -4; done > $O/logs.txt
uptime >> $P
if ls $O/held_out6/*.default.json.gz > /dev/null 2>&1; then
s=$(date +%s); timeout 60 $B/replay --device cuda --json --passes 5 --warmup 2 $O/held_out6/*.default.json.gz > $O/replay_a.jsonl 2>&1; echo "replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 100 python3 $B/torch_bench.py $O/held_out6 $O/torch_default.json replay > $O/torch.txt 2>&1; echo "torch replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 100 python3 $B/torch_bench.py $O/held_out6 $O/torch_expandable.json replay > $O/torch_exp.txt 2>&1; echo "torch replay expandable rc $? $(( $(date +%s) - s )) s" >> $P
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
    print(k, round(x['ns_per_op'], 1), 'calls', x['warm_memory_calls_per_pass'], 'syncs', x['warm_stream_synchronizations_per_pass'], 'L2', x['cache_probe_ns_per_load'][0], 'torch', d.get(k), e.get(k))
PY
s=$(date +%s); timeout 60 $B/t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd (5c74447) rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -10 >> $P
fi
python3 $B/pack.py $O $OUT; ls -la $OUT
LIM=${FUZZ_END:-470}
fi
if [ "$MODE" = 2 ]; then LIM=500; fi
mkdir -p /tmp/fzdone
for f in $B/fz/*.json.gz; do
  n=$(basename $f); [ -f /tmp/fzdone/$n ] && continue
  left=$(( LIM - ($(date +%s) - T0) )); [ $left -lt 15 ] && break
  rm -rf /tmp/fzone; mkdir -p /tmp/fzone; cp $f /tmp/fzone/
  STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fzone timeout $left $B/t_conf --include-ignored --nocapture project > /tmp/fz1.txt 2>&1; rc=$?
  [ $rc -ne 124 ] && touch /tmp/fzdone/$n
  echo "$n rc $rc $(( $(date +%s) - T0 )) s: $(grep -E 'conformance on cuda:0' /tmp/fz1.txt | tail -1)" >> $O/fuzz.txt
  grep -E '^FAIL' /tmp/fz1.txt | head -5 >> $O/fuzz.txt
done
echo "fuzz files done $(ls /tmp/fzdone | wc -l) of $(ls $B/fz | wc -l)" >> $P
uptime >> $P
cat $P; tail -4 $O/fuzz.txt 2>/dev/null
cp $P $OUT/summary_end.txt; [ -f $O/fuzz.txt ] && cp $O/fuzz.txt $OUT/fuzz.txt; ls -la $OUT
