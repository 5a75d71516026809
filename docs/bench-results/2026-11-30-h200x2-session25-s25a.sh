#!/bin/bash
# Session 25, call A (2 x H200): DDP's first gradients written into the buckets (no zeroing, no add), cast gradients
# converted where they are accumulated, AdamW over lists of parameters (one kernel per 64 tensors), against the
# binaries of 9d99a50 (b/) in the same call; GPU tests; memcheck.
cd devbin/s25; tar xJf n.tar.xz; tar xJf b.tar.xz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 STRATA_KERNEL_CACHE_PATH=/tmp/kc
D=$OUT/ddp.txt; : > $D
nvidia-smi --query-gpu=name,driver_version --format=csv >> $D 2>&1
s=$(date +%s)
G="--precision autocast-bf16 --steps 10 --warmup 3 --batch 8"
for r in 1 2 3; do
  echo "# new gpt b8 autocast r$r" >> $D; timeout 120 ./n/gpt $G >> $D 2>&1
  echo "# new ddp_gpt 2 b8 autocast r$r" >> $D; timeout 120 ./n/ddp_gpt --gpus 2 $G >> $D 2>&1
  if [ $r -le 2 ]; then
    echo "# base gpt b8 autocast r$r" >> $D; timeout 120 ./b/gpt $G >> $D 2>&1
    echo "# base ddp_gpt 2 b8 autocast r$r" >> $D; timeout 120 ./b/ddp_gpt --gpus 2 $G >> $D 2>&1
  fi
done
echo "# new ddp_gpt 1 b8 autocast" >> $D; timeout 120 ./n/ddp_gpt --gpus 1 $G >> $D 2>&1
F="--steps 10 --warmup 3 --batch 8"
echo "# new gpt b8 f32" >> $D; timeout 90 ./n/gpt $F >> $D 2>&1
echo "# new ddp_gpt 2 b8 f32" >> $D; timeout 90 ./n/ddp_gpt --gpus 2 $F >> $D 2>&1
echo "# t $(( $(date +%s) - s ))" >> $D
echo "# strata allreduce" >> $D; timeout 60 ./n/allreduce_bench --gpus 2 >> $D 2>&1
echo "# torch allreduce" >> $D; timeout 90 python3 ../../benches/anchors/torch_allreduce.py --spawn 2 >> $D 2>&1
echo "# t $(( $(date +%s) - s ))" >> $D
T=$OUT/tests.txt; : > $T
echo "# tensor_cuda adam + nccl" >> $T; timeout 150 ./n/tensor_cuda --include-ignored adam nccl 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
echo "# tensor distributed" >> $T; timeout 60 ./n/tensor_distributed --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# autograd distributed" >> $T; timeout 120 ./n/autograd_distributed --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# autograd cuda" >> $T; timeout 240 ./n/autograd_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# t $(( $(date +%s) - s ))" >> $D
echo "# memcheck tensor adam" >> $T; timeout 150 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored adam --test-threads=1 2>&1 | tail -4 >> $T
echo "# memcheck autograd distributed" >> $T; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no ./n/autograd_distributed --include-ignored --test-threads=1 2>&1 | tail -4 >> $T
echo "# memcheck autograd cuda" >> $T; timeout 200 compute-sanitizer --tool memcheck ./n/autograd_cuda --include-ignored --test-threads=1 2>&1 | tail -4 >> $T
echo "# t $(( $(date +%s) - s ))" >> $D
grep -c . $D $T
