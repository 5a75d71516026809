#!/bin/bash
# Session 8, call 1: PyTorch's random streams reproduced (--rng torch): oracle values, the initial state beside
# torch_gpt_state.py's, then the GPT's five configurations beside torch_gpt.py and autocast seeds 1-3 both sides.
cd devbin; mkdir -p n; tar xJf s8c1.tar.xz -C n
python3 exp/rng_oracle.py > $OUT/rng_oracle.json 2>&1
S=$OUT/same_start.txt; : > $S
T="--layers 2 --d-model 64 --heads 4 --seq 32 --batch 2 --vocab 256"
for c in "$T" "$T --seed 5" "--seed 0" "--seed 1" "--precision bf16 --seed 2"; do
  STRATA_GPT_DUMP=/tmp/s timeout 60 ./n/gpt $c --steps 1 --warmup 0 > /dev/null 2>>$S
  timeout 120 python3 torch_gpt_state.py torch_gpt.py /tmp/t $c 2>>$S
  echo "# $c" >> $S; python3 exp/compare_init.py /tmp/s_init.safetensors /tmp/t_init.safetensors >> $S 2>&1
done
G=$OUT/gpt.jsonl; : > $G
for c in "--precision f32 --checkpoint every" "--precision f32" "--precision bf16" "--precision autocast-bf16" "--precision autocast-bf16 --checkpoint every" "--precision autocast-bf16 --seed 1" "--precision autocast-bf16 --seed 2" "--precision autocast-bf16 --seed 3" "--precision f32 --seed 1"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; timeout 45 python3 torch_gpt.py $c >> $G 2>&1
done
for c in "--precision autocast-bf16 --recompute none" "--precision autocast-bf16 --recompute none --checkpoint every"; do echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; done
grep -c '"impl"' $G
