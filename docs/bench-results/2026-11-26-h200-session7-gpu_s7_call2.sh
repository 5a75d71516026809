#!/bin/bash
# Session 7, call 2: issue 11's table in one run (gpu_bench beside torch_mission.py small_op/sum/matmul,
# torch_matmul_extra.py and torch_bench.py elementwise; memory_hungry beside torch_mission.py mlp48);
# strata's TF32 kernel name (ncu); GPT autocast loss sensitivity from one state (gpt_same_init.py --perturb).
cd devbin; mkdir -p n; tar xJf s7c2.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
B=$OUT/issue11.txt; : > $B
./n/gpu_bench >> $B 2>&1
python3 torch_mission.py small_op sum matmul >> $B 2>&1
python3 torch_matmul_extra.py >> $B 2>&1
python3 torch_bench.py traces /tmp/tbe.json elementwise > /dev/null 2>&1; cat /tmp/tbe.json >> $B; echo >> $B
./n/gpu_bench --only matmul8192 >> $B 2>&1
M=$OUT/mlp48.txt; : > $M
for f in "--dtype f32" "--dtype bf16"; do echo "# memory_hungry $f" >> $M; timeout 60 ./n/memory_hungry $f >> $M 2>&1; done
timeout 150 python3 torch_mission.py mlp48 >> $M 2>&1
timeout 60 ncu --metrics gpu__time_duration.sum -k regex:"gemm|xmma|cutlass" --launch-skip 13 --launch-count 2 ./n/gpu_bench --only matmul8192 --iters 10 > $OUT/ncu_tf32.txt 2>&1
S=$OUT/chaos.txt; : > $S
STRATA_GPT_DUMP=/tmp/g timeout 60 ./n/gpt --precision autocast-bf16 > /tmp/g_strata.json 2>>$S
for p in 0 0 1e-6 1e-5; do timeout 90 python3 gpt_same_init.py --prefix /tmp/g --precision autocast-bf16 --perturb $p >> $S 2>&1; done
for p in 0 1e-6 1e-5; do timeout 120 python3 gpt_same_init.py --prefix /tmp/g --precision f32 --perturb $p >> $S 2>&1; done
grep -c . $B $M $S
