#!/bin/bash
# Session 25, call D (one H200): ncu's duration of every kernel of one autocast training step of `gpt` and of
# `ddp_gpt --gpus 1` at batch 8 (binaries of ff4f3c1): where DDP's one-GPU overhead goes.
cd devbin/s25; tar xJf d.tar.xz
export NCCL_NVLS_ENABLE=0 STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(date +%s)
G="--precision autocast-bf16 --batch 8 --steps 1 --warmup 0"
timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu_gpt.csv ./d/gpt $G > $OUT/gpt.txt 2>&1
echo "gpt rc $? t $(( $(date +%s) - s ))"
timeout 250 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu_ddp1.csv ./d/ddp_gpt --gpus 1 $G > $OUT/ddp1.txt 2>&1
echo "ddp1 rc $? t $(( $(date +%s) - s ))"
G2="--precision autocast-bf16 --batch 8 --steps 5 --warmup 2"
./d/gpt $G2 | grep -o '"step_ms":[0-9.]*'; ./d/ddp_gpt --gpus 1 $G2 | grep -o '"step_ms":[0-9.]*'
ls -la $OUT
