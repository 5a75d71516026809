#!/bin/bash
# Session 7, call 8: strata's gpt started from torch_gpt.py's own state (torch_gpt_state.py -> STRATA_GPT_INIT)
# beside torch_gpt.py at the same seed, in f32, bf16 and autocast (seed 0) and autocast seeds 1-3.
cd devbin; mkdir -p n; tar xJf s7c8.tar.xz -C n
G=$OUT/gpt_torch_state.jsonl; : > $G
run() { p=$1; s=$2
  echo "# precision $p seed $s" >> $G
  timeout 60 python3 torch_gpt_state.py torch_gpt.py /tmp/ts_${p}_$s --precision $p --seed $s 2>> $G
  STRATA_GPT_INIT=/tmp/ts_${p}_$s timeout 60 ./n/gpt --precision $p --seed $s >> $G 2>&1
  timeout 60 python3 torch_gpt.py --precision $p --seed $s >> $G 2>&1
}
run autocast-bf16 0; run f32 0; run bf16 0; run autocast-bf16 1; run autocast-bf16 2; run autocast-bf16 3
grep -c '"impl"' $G
