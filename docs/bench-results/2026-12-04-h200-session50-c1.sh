#!/bin/bash
# Session 50, call 1 (one H200), binaries of the HEAD below: records the six new held-out workloads
# (benches/anchors/workloads_held_out2, both allocator modes, each mode in a fresh process), replays their `*.default`
# traces through strata's `replay --device cuda --json --passes 5 --warmup 2` beside torch_bench.py replay (default,
# then expandable_segments:True); then strata-tensor's GPU suite (the CPU f16 pow change of session 49).
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o; mkdir -p $O /tmp/tr /tmp/ta
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
cp $B/record_trace.py $B/wl/
s=$(date +%s); bash $B/record_new_traces.sh $B/wl /tmp/tr $(cat $B/wl/NAMES) > $O/record.txt 2>&1; echo "record rc $? $(( $(date +%s) - s )) s" >> $P
grep -v '^-\|^total\|^d' $O/record.txt >> $P
cp -r /tmp/tr/logs $O/
(cd /tmp/tr && tar cf $OUT/traces_default.tar *.default.json.gz && tar cf $OUT/traces_expandable.tar *.expandable.json.gz)
cp /tmp/tr/*.default.json.gz /tmp/ta/
s=$(date +%s); timeout 60 ./replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/replay.jsonl 2>&1; echo "replay rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 70 python3 ./torch_bench.py /tmp/ta $O/torch_default.json replay > /dev/null 2>&1; echo "torch default rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 70 python3 ./torch_bench.py /tmp/ta $O/torch_expandable.json replay > /dev/null 2>&1; echo "torch expandable rc $? $(( $(date +%s) - s )) s" >> $P
s=$(date +%s); timeout 200 ./t_tensor --include-ignored --test-threads 16 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/tensor.txt | head -30 >> $P
cd $O && tar cJf $OUT/c1.tar.xz . && cat $P
