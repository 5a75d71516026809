#!/bin/bash
# Session 23, call 2 (one H200): allocation traces of four more PyTorch workloads (benches/anchors/workloads_held_out/,
# written in session 23), both allocator modes, each mode in a fresh process, with benches/anchors/record_trace.py;
# then their `*.default` sequences replayed by strata (the allocator as at f017ff5) on the GPU and by torch_bench.py
# replay (default, then expandable_segments:True) in the same call.
B=devbin/s23a
mkdir -p $OUT/tr/logs
rec() { n=$1
  for m in default expandable; do
    if [ $m = expandable ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; else unset PYTORCH_CUDA_ALLOC_CONF; fi
    timeout 200 python3 benches/anchors/record_trace.py $OUT/tr/$n.$m.json.gz $n $m benches/anchors/workloads_held_out/$n.py > $OUT/tr/logs/$n.$m.log 2>&1
    echo "$n.$m rc $?" >> $OUT/tr/logs/rc.txt
  done; }
for n in vit_finetune_accum dlrm_embeddingbag llm_continuous_batching seg_unet_amp; do rec $n & done
wait
cat $OUT/tr/logs/rc.txt
for f in $OUT/tr/logs/*.log; do tail -2 $f; done
mkdir -p /tmp/th && cp $OUT/tr/*.default.json.gz /tmp/th/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/th/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
echo "# torch default" >> $P; timeout 100 python3 $B/torch_bench.py /tmp/th /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 100 python3 $B/torch_bench.py /tmp/th /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 20 warmup 2" >> $P; timeout 90 $B/replay --device cuda --json --passes 20 --warmup 2 /tmp/th/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
grep "^rc\|^#" $P
ls -la $OUT/tr
