#!/bin/bash
# Session 5, call 4: loss_last over seeds, strata's gpt beside torch_gpt.py (f32 and autocast-bf16, seeds 1-3).
cd devbin; mkdir -p n; tar xJf s5b.tar.xz -C n
G=$OUT/seeds.jsonl; : > $G
for s in 1 2 3; do for p in f32 autocast-bf16; do
  echo "# seed $s $p" >> $G; timeout 40 ./n/gpt --precision $p --seed $s >> $G 2>&1; timeout 40 python3 torch_gpt.py --precision $p --seed $s >> $G 2>&1
done; done
grep -c '"impl"' $G
