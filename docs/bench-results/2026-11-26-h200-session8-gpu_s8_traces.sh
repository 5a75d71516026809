#!/bin/bash
# Records new allocation traces (shared/traces format) of PyTorch workloads on the H200, both modes.
cd devbin; mkdir -p $OUT/newtraces
rec() { n=$1; shift
  for m in default expandable; do
    if [ $m = expandable ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; else unset PYTORCH_CUDA_ALLOC_CONF; fi
    timeout 150 python3 exp/record_trace.py $OUT/newtraces/$n.$m.json.gz $n $m "$@" 2>&1 | tail -2
  done; unset PYTORCH_CUDA_ALLOC_CONF; }
rec gpt_ckpt torch_gpt.py --layers 6 --d-model 512 --heads 8 --seq 512 --batch 8 --vocab 8192 --precision autocast-bf16 --checkpoint every --steps 6 --warmup 2
rec gpt_tiny_f32 torch_gpt.py --layers 2 --d-model 128 --heads 4 --seq 128 --batch 4 --vocab 1024 --steps 8 --warmup 2
rec lstm_tbptt exp/lstm_tbptt.py
rec mlp_small exp/mlp_small.py
ls -la $OUT/newtraces
