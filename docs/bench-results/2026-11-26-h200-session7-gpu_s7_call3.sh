#!/bin/bash
# Session 7, call 3: what moves PyTorch's autocast losses from strata's state (Linear's bias added after a
# rounded product; bf16 reduced-precision reductions off; a bf16-sized perturbation); TF32 alone, alternating.
cd devbin; mkdir -p n; tar xJf s7c3.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
S=$OUT/autocast.txt; : > $S
STRATA_GPT_DUMP=/tmp/g timeout 60 ./n/gpt --precision autocast-bf16 > /tmp/g_strata.json 2>>$S; cat /tmp/g_strata.json >> $S
for o in "--linear-unfused" "--no-reduced-precision-reduction" "--perturb 3e-3" "--perturb 1e-3"; do
  timeout 90 python3 gpt_same_init.py --prefix /tmp/g --precision autocast-bf16 $o >> $S 2>&1
done
T=$OUT/tf32.txt; : > $T
for i in 1 2; do ./n/gpu_bench --only matmul8192_tf32 >> $T 2>&1; python3 exp/tf32_alone.py >> $T 2>&1; done
grep -c . $S $T
