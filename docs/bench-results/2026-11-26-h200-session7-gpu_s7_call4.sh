#!/bin/bash
# Session 7, call 4 (addmm merged): GPT's five configurations beside torch_gpt.py (seed 0); autocast from
# strata's state beside PyTorch's; autocast and f32 over seeds 1-7 on both sides; --recompute none peaks.
cd devbin; mkdir -p n; tar xJf s7c4.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
G=$OUT/gpt.jsonl; : > $G
for c in "--precision f32 --checkpoint every" "--precision f32" "--precision bf16" "--precision autocast-bf16" "--precision autocast-bf16 --checkpoint every"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; timeout 45 python3 torch_gpt.py $c >> $G 2>&1
done
for c in "--precision autocast-bf16 --recompute none" "--precision f32 --recompute none"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1
done
S=$OUT/same_state.txt; : > $S
for p in autocast-bf16 f32; do
  STRATA_GPT_DUMP=/tmp/g_$p timeout 60 ./n/gpt --precision $p > /tmp/g_$p.json 2>>$S
  timeout 120 python3 gpt_same_init.py --prefix /tmp/g_$p --precision $p --strata-json /tmp/g_$p.json >> $S 2>&1
done
for s in 1 2 3 4 5 6 7; do
  for p in autocast-bf16 f32; do
    c="--precision $p --seed $s"; echo "# gpt $c" >> $G; timeout 40 ./n/gpt $c >> $G 2>&1
    if [ $p = autocast-bf16 ] || [ $s -gt 3 ]; then timeout 40 python3 torch_gpt.py $c >> $G 2>&1; fi
  done
done
grep -c '"impl"' $G; cat $S | cut -c1-300
