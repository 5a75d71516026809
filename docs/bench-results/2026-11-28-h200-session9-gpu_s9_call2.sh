#!/bin/bash
# Session 9, call 2 (one H200): new allocator traces of eight PyTorch workloads (benches/anchors/workloads,
# both modes, each trace in its own process, the eight workloads of one mode at a time side by side), replayed
# on the GPU by strata (replay --device cuda) beside PyTorch's allocator (torch_bench.py replay, default and
# expandable); the bare cuLaunchKernel floor beside gpu_bench's small op; the memcheck report of the NCCL tests
# in full; gpt at batch 4 (the per-rank share of ddp_gpt on 2 GPUs).
cd devbin; tar xJf c2.tar.xz; R=$(cd .. && pwd)
W="vit_train t5_varlen unet_diffusion hf_llama_generate bert_finetune_accum gnn_varsize resnet_amp_scaler moe_train"
NT=/tmp/nt; mkdir -p $NT/logs; S=$OUT/record.txt; : > $S
for m in default expandable; do
  for n in $W; do
    ( if [ $m = expandable ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; else unset PYTORCH_CUDA_ALLOC_CONF; fi
      timeout 200 python3 $R/benches/anchors/record_trace.py $NT/$n.$m.json.gz $n $m $R/benches/anchors/workloads/$n.py > $NT/logs/$n.$m.log 2>&1
      echo "$n.$m exit $?" >> $NT/logs/status ) &
  done; wait
done
cat $NT/logs/status >> $S; for f in $NT/logs/*.log; do echo "## $f" >> $S; tail -4 $f >> $S; done
(cd $NT && tar cf $OUT/newtraces.tar *.json.gz)
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 150 ./n/replay --device cuda --json --passes 5 --warmup 2 $NT/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 150 python3 torch_bench.py $NT /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 torch_bench.py $NT /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P
L=$OUT/launch.txt; : > $L
nvcc -O2 -arch=sm_90 launch.cu -lcuda -o /tmp/launch >> $L 2>&1
for i in 1 2; do /tmp/launch >> $L 2>&1; ./n/gpu_bench --only small_op >> $L 2>&1; done
timeout 60 python3 torch_mission.py small_op >> $L 2>&1
G=$OUT/gpt4.txt; : > $G
timeout 90 ./n/gpt --precision autocast-bf16 --steps 10 --warmup 3 --batch 4 >> $G 2>&1
timeout 90 ./n/gpt --steps 10 --warmup 3 --batch 4 >> $G 2>&1
M=$OUT/memcheck.txt; : > $M
timeout 120 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 nccl > /tmp/mc.txt 2>&1
grep -E "^=========" /tmp/mc.txt | grep -v "^=========     " | sort | uniq -c | sort -rn | head -30 >> $M
grep -B2 -A12 -m3 "Program hit" /tmp/mc.txt >> $M
echo "# with --report-api-errors no" >> $M
timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/tensor_cuda --include-ignored --test-threads=1 nccl 2>&1 | tail -3 >> $M
grep -c . $S $P $L $G $M
