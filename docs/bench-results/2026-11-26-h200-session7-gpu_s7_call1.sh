#!/bin/bash
# Session 7, call 1: TF32 entry points; transformer ops fwd+bwd beside PyTorch; GPT autocast with the f32
# softmax gradient (same-state comparison, seeds 0-7 beside torch_gpt.py, --recompute none peaks);
# autograd GPU test + memcheck.
cd devbin; mkdir -p n; tar xJf s7c1.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
( cd exp && nvcc -O2 -arch=sm_90 -o tf32 tf32.cu -lcublas -lcublasLt && ./tf32; python3 tf32_torch.py ) > $OUT/tf32.txt 2>&1
B=$OUT/ops.txt; : > $B
timeout 90 ./n/transformer_ops >> $B 2>&1; timeout 90 python3 torch_transformer_ops.py >> $B 2>&1
S=$OUT/same_state.txt; : > $S
STRATA_GPT_DUMP=/tmp/g timeout 60 ./n/gpt --precision autocast-bf16 > /tmp/g_strata.json 2>>$S; cat /tmp/g_strata.json >> $S
timeout 120 python3 gpt_same_init.py --prefix /tmp/g --precision autocast-bf16 --strata-json /tmp/g_strata.json >> $S 2>&1
G=$OUT/gpt.jsonl; : > $G
for c in "--precision autocast-bf16 --recompute none" "--precision f32 --recompute none"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1
done
for s in 0 1 2 3 4 5 6 7; do
  c="--precision autocast-bf16 --seed $s"
  echo "# gpt $c" >> $G; timeout 40 ./n/gpt $c >> $G 2>&1; timeout 40 python3 torch_gpt.py $c >> $G 2>&1
done
T=$OUT/tests.txt; : > $T
timeout 120 ./n/autograd_cuda --include-ignored >> $T 2>&1
timeout 180 compute-sanitizer --tool memcheck ./n/autograd_cuda --include-ignored >> $T 2>&1
grep -c '"impl"' $G; tail -3 $T
