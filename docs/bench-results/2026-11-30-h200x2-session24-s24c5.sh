#!/bin/bash
# Session 24, call 5 (2 x H200): the binaries of 5082578 (backward in PyTorch's node order; communicators on a
# plain stream). ddp_gpt --gpus 2 beside gpt, three rounds under autocast at the default global batch 8, f32 at 8
# and 16; all-reduce beside PyTorch's; the NCCL, stream and autograd GPU tests; memcheck.
cd devbin/s24; tar xJf n.tar.xz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 STRATA_KERNEL_CACHE_PATH=/tmp/kc
D=$OUT/ddp.txt; : > $D
nvidia-smi --query-gpu=name,driver_version --format=csv >> $D 2>&1
s=$(date +%s)
echo "# strata allreduce" >> $D; timeout 60 ./n/allreduce_bench --gpus 2 >> $D 2>&1
echo "# torch allreduce" >> $D; timeout 90 python3 ../../benches/anchors/torch_allreduce.py --spawn 2 >> $D 2>&1
G="--precision autocast-bf16 --steps 10 --warmup 3"
for r in 1 2 3; do
  echo "# gpt b8 autocast r$r" >> $D; timeout 120 ./n/gpt --batch 8 $G >> $D 2>&1
  echo "# ddp_gpt 2 b8 autocast r$r" >> $D; timeout 120 ./n/ddp_gpt --gpus 2 --batch 8 $G >> $D 2>&1
done
F="--steps 10 --warmup 3"
echo "# gpt b8 f32" >> $D; timeout 90 ./n/gpt --batch 8 $F >> $D 2>&1
echo "# ddp_gpt 2 b8 f32" >> $D; timeout 90 ./n/ddp_gpt --gpus 2 --batch 8 $F >> $D 2>&1
echo "# gpt b16 f32" >> $D; timeout 90 ./n/gpt --batch 16 $F >> $D 2>&1
echo "# ddp_gpt 2 b16 f32" >> $D; timeout 90 ./n/ddp_gpt --gpus 2 --batch 16 $F >> $D 2>&1
echo "# t $(( $(date +%s) - s ))" >> $D
T=$OUT/tests.txt; : > $T
echo "# tensor_cuda nccl + priorities + streams" >> $T; timeout 150 ./n/tensor_cuda --include-ignored nccl stream_priorities streams_events 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
echo "# tensor distributed" >> $T; timeout 60 ./n/tensor_distributed --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# autograd distributed" >> $T; timeout 120 ./n/autograd_distributed --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# autograd cuda" >> $T; timeout 240 ./n/autograd_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# t $(( $(date +%s) - s ))" >> $D
echo "# memcheck autograd distributed" >> $T; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no ./n/autograd_distributed --include-ignored --test-threads=1 2>&1 | tail -4 >> $T
echo "# memcheck autograd cuda" >> $T; timeout 200 compute-sanitizer --tool memcheck ./n/autograd_cuda --include-ignored --test-threads=1 2>&1 | tail -4 >> $T
echo "# t $(( $(date +%s) - s ))" >> $D
grep -c . $D $T
