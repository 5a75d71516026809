#!/bin/bash
# Session 24, call 2 (2 x H200): issue 17's 2-GPU measurements again, with each step's phases timed (forward,
# backward, DDP finish, optimizer: CUDA events on the compute stream, and host time), at the default global batch
# (8) and at 16; the NCCL GPU tests and memcheck.
cd devbin/s24; tar xJf n.tar.xz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 STRATA_KERNEL_CACHE_PATH=/tmp/kc
D=$OUT/ddp.txt; : > $D
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $D 2>&1; nvidia-smi topo -m >> $D 2>&1
python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())' >> $D 2>&1
s=$(date +%s)
echo "# strata allreduce" >> $D; timeout 60 ./n/allreduce_bench --gpus 2 >> $D 2>&1
echo "# torch allreduce" >> $D; timeout 90 python3 ../../benches/anchors/torch_allreduce.py --spawn 2 >> $D 2>&1
echo "# t $(( $(date +%s) - s ))" >> $D
G="--precision autocast-bf16 --steps 10 --warmup 3"
for r in 1 2; do
  echo "# gpt b8 autocast r$r" >> $D; timeout 120 ./n/gpt --batch 8 $G >> $D 2>&1
  echo "# ddp_gpt 2 b8 autocast r$r" >> $D; timeout 120 ./n/ddp_gpt --gpus 2 --batch 8 $G >> $D 2>&1
done
echo "# t $(( $(date +%s) - s ))" >> $D
echo "# gpt b4 autocast" >> $D; timeout 90 ./n/gpt --batch 4 $G >> $D 2>&1
echo "# ddp_gpt 1 b8 autocast" >> $D; timeout 90 ./n/ddp_gpt --gpus 1 --batch 8 $G >> $D 2>&1
echo "# gpt b16 autocast" >> $D; timeout 90 ./n/gpt --batch 16 $G >> $D 2>&1
echo "# ddp_gpt 2 b16 autocast" >> $D; timeout 90 ./n/ddp_gpt --gpus 2 --batch 16 $G >> $D 2>&1
echo "# t $(( $(date +%s) - s ))" >> $D
F="--steps 10 --warmup 3"
echo "# gpt b8 f32" >> $D; timeout 90 ./n/gpt --batch 8 $F >> $D 2>&1
echo "# ddp_gpt 2 b8 f32" >> $D; timeout 90 ./n/ddp_gpt --gpus 2 --batch 8 $F >> $D 2>&1
echo "# gpt b16 f32" >> $D; timeout 90 ./n/gpt --batch 16 $F >> $D 2>&1
echo "# ddp_gpt 2 b16 f32" >> $D; timeout 90 ./n/ddp_gpt --gpus 2 --batch 16 $F >> $D 2>&1
echo "# t $(( $(date +%s) - s ))" >> $D
T=$OUT/tests.txt; : > $T
if [ -x n/tensor_cuda ]; then
echo "# tensor_cuda nccl" >> $T; timeout 120 ./n/tensor_cuda --include-ignored nccl 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
echo "# tensor distributed" >> $T; timeout 60 ./n/tensor_distributed --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# autograd distributed" >> $T; timeout 120 ./n/autograd_distributed --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck tensor_cuda nccl" >> $T; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no ./n/tensor_cuda --include-ignored --test-threads=1 nccl 2>&1 | tail -4 >> $T
echo "# memcheck autograd distributed" >> $T; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no ./n/autograd_distributed --include-ignored --test-threads=1 2>&1 | tail -4 >> $T
fi
echo "# t $(( $(date +%s) - s ))" >> $D
grep -c . $D $T
