#!/bin/bash
# Session 25, call B (2 x H200): PyTorch's own two-GPU speed-up on the same GPT (torch_ddp_gpt.py, DDP over NCCL,
# beside torch_gpt.py on one GPU), and more runs of strata's gpt / ddp_gpt (binaries of ff4f3c1) in the same call.
cd devbin/s25; tar xJf n.tar.xz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 STRATA_KERNEL_CACHE_PATH=/tmp/kc
D=$OUT/ddp.txt; : > $D
s=$(date +%s)
for prec in autocast-bf16 f32; do
  G="--precision $prec --steps 10 --warmup 3 --batch 8"
  for r in 1 2; do
    echo "# torch gpt b8 $prec r$r" >> $D; timeout 150 python3 torch_gpt.py $G >> $D 2>&1
    echo "# torch ddp_gpt 2 b8 $prec r$r" >> $D; timeout 150 python3 ../../benches/anchors/torch_ddp_gpt.py --gpus 2 $G >> $D 2>&1
    echo "# strata gpt b8 $prec r$r" >> $D; timeout 120 ./n/gpt $G >> $D 2>&1
    echo "# strata ddp_gpt 2 b8 $prec r$r" >> $D; timeout 120 ./n/ddp_gpt --gpus 2 $G >> $D 2>&1
    echo "# t $(( $(date +%s) - s ))" >> $D
  done
done
grep -c . $D
