#!/bin/bash
# Session 21, call 1 (one H200): allocation traces of four more PyTorch workloads (benches/anchors/workloads_held_out/,
# written in session 21 after the allocator's rules were in place, so held out from them), both allocator modes, each
# mode in a fresh process, with benches/anchors/record_trace.py; then their `*.default` sequences replayed by strata
# (binaries of af07c88: the allocator and the replay example are unchanged since) on the GPU and by torch_bench.py
# replay (default, then expandable_segments:True) in the same call.
mkdir -p $OUT/tr/logs /tmp/b && tar xJf devbin/s20a.tar.xz -C /tmp/b && B=/tmp/b/s20a
rec() { n=$1
  for m in default expandable; do
    if [ $m = expandable ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; else unset PYTORCH_CUDA_ALLOC_CONF; fi
    timeout 150 python3 benches/anchors/record_trace.py $OUT/tr/$n.$m.json.gz $n $m benches/anchors/workloads_held_out/$n.py > $OUT/tr/logs/$n.$m.log 2>&1
    echo "$n.$m rc $?" >> $OUT/tr/logs/rc.txt
  done; }
for n in llama_ckpt_train gru_seq2seq bert_mlm_fp16 unet_cfg_sampling; do rec $n & done
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
