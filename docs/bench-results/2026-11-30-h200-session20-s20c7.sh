#!/bin/bash
# Session 20, call 7 (one H200): allocation traces of four new PyTorch workloads (benches/anchors/workloads_held_out/,
# written after the allocator's rules were fixed, so held out from them), both allocator modes, each mode in a fresh
# process, with benches/anchors/record_trace.py. The four workloads run in parallel (one process per mode at a time).
mkdir -p $OUT/tr/logs
rec() { n=$1
  for m in default expandable; do
    if [ $m = expandable ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; else unset PYTORCH_CUDA_ALLOC_CONF; fi
    timeout 110 python3 benches/anchors/record_trace.py $OUT/tr/$n.$m.json.gz $n $m benches/anchors/workloads_held_out/$n.py > $OUT/tr/logs/$n.$m.log 2>&1
    echo "$n.$m rc $?" >> $OUT/tr/logs/rc.txt
  done; }
for n in encoder_serving cnn_multiscale gpt_sampling vae_train_amp; do rec $n & done
wait
cat $OUT/tr/logs/rc.txt
for f in $OUT/tr/logs/*.log; do tail -1 $f; done
ls -la $OUT/tr
