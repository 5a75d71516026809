#!/bin/bash
# Session 9, call 1 (2 x H200): issue 17's 2-GPU runs (topology, all-reduce bus bandwidth beside PyTorch's,
# ddp_gpt on 2 GPUs against gpt on one, NCCL GPU tests, memcheck); issue 11's table in one run
# (gpu_bench beside torch_mission.py small_op/sum/matmul, torch_matmul_extra.py, torch_bench.py elementwise;
# memory_hungry beside torch_mission.py mlp48).
cd devbin; tar xJf c1.tar.xz; export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
D=$OUT/ddp.txt; : > $D
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $D 2>&1; nvidia-smi topo -m >> $D 2>&1
python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())' >> $D 2>&1
for r in 1 2; do
  echo "# strata allreduce round $r" >> $D; timeout 60 ./n/allreduce_bench --gpus 2 >> $D 2>&1
  echo "# torch allreduce round $r" >> $D; timeout 90 python3 torch_allreduce.py --spawn 2 >> $D 2>&1
done
timeout 60 ./n/allreduce_bench --gpus 2 --dtype bf16 >> $D 2>&1
G="--precision autocast-bf16 --steps 10 --warmup 3"
echo "# gpt 1 gpu" >> $D; timeout 90 ./n/gpt $G >> $D 2>&1
echo "# ddp_gpt 1 gpu" >> $D; timeout 90 ./n/ddp_gpt --gpus 1 $G >> $D 2>&1
echo "# ddp_gpt 2 gpus" >> $D; timeout 90 ./n/ddp_gpt --gpus 2 $G >> $D 2>&1
echo "# ddp_gpt 2 gpus f32" >> $D; timeout 90 ./n/ddp_gpt --gpus 2 --steps 10 --warmup 3 >> $D 2>&1
echo "# gpt 1 gpu f32" >> $D; timeout 90 ./n/gpt --steps 10 --warmup 3 >> $D 2>&1
T=$OUT/tests.txt; : > $T
echo "# tensor_cuda nccl" >> $T; timeout 120 ./n/tensor_cuda --include-ignored nccl 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
echo "# tensor distributed" >> $T; timeout 60 ./n/tensor_distributed --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# autograd distributed" >> $T; timeout 120 ./n/autograd_distributed --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck tensor_cuda nccl" >> $T; timeout 150 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 nccl 2>&1 | tail -4 >> $T
echo "# memcheck autograd distributed" >> $T; timeout 150 compute-sanitizer --tool memcheck ./n/autograd_distributed --include-ignored --test-threads=1 2>&1 | tail -4 >> $T
B=$OUT/issue11.txt; : > $B
export CUDA_VISIBLE_DEVICES=0
./n/gpu_bench >> $B 2>&1
python3 torch_mission.py small_op sum matmul >> $B 2>&1
python3 torch_matmul_extra.py >> $B 2>&1
python3 torch_bench.py traces /tmp/tbe.json elementwise > /dev/null 2>&1; cat /tmp/tbe.json >> $B; echo >> $B
for r in 1 2; do ./n/gpu_bench --only matmul8192_tf32,small_op >> $B 2>&1; python3 tf32_alone.py >> $B 2>&1; done
M=$OUT/mlp48.txt; : > $M
for f in "--dtype bf16" "--dtype f32"; do echo "# memory_hungry $f" >> $M; timeout 60 ./n/memory_hungry $f >> $M 2>&1; done
timeout 150 python3 torch_mission.py mlp48 >> $M 2>&1
grep -c . $D $T $B $M
