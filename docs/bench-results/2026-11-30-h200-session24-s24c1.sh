#!/bin/bash
# Session 24, call 1: where gnn_varsize's warm cost goes on the H200 host. replay_opt = replay of HEAD with an
# OPT=1 switch timing each operation (ops over 2 us summed separately).
B=devbin/s24
P=$OUT/c1.txt; : > $P
nproc >> $P; lscpu | grep -E 'Model name|MHz|NUMA node\(s\)|cache|Hypervisor' >> $P
for t in traces/gnn_varsize traces/t5_varlen traces/moe_train traces/gpt_tiny_f32 traces/unet_diffusion traces/bert_finetune_accum; do
  for dev in sim cuda; do
    echo "# $t $dev" >> $P
    taskset -c 5 $B/replay_opt --device $dev --passes 10 --warmup 3 $t.default.json.gz 2>&1 | grep -E "ns per|warm passes" >> $P
  done
  echo "# $t cuda OPT" >> $P
  OPT=1 taskset -c 5 $B/replay_opt --device cuda --passes 10 --warmup 3 $t.default.json.gz 2>&1 | grep -E "OPT|ns per" | tail -4 >> $P
done
cat $P
