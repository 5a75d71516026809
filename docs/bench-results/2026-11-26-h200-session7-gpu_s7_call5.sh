#!/bin/bash
# Session 7, call 5 (addmm in f32 on the GPU for half types): GPU tests of matmul/addmm + memcheck; GPT's five
# configurations beside torch_gpt.py; autocast and bf16 from strata's state beside PyTorch's; autocast seeds 1-7.
cd devbin; mkdir -p n; tar xJf s7c5.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
T=$OUT/tests.txt; : > $T
timeout 120 ./n/tensor_cuda --include-ignored matmul addmm 2>&1 | grep -E "^test |FAILED|panicked|test result" >> $T
timeout 150 compute-sanitizer --tool memcheck ./n/tensor_cuda --include-ignored --test-threads=1 addmm 2>&1 | tail -3 >> $T
S=$OUT/same_state.txt; : > $S
for p in autocast-bf16 bf16; do
  STRATA_GPT_DUMP=/tmp/g_$p timeout 60 ./n/gpt --precision $p > /tmp/g_$p.json 2>>$S
  timeout 120 python3 gpt_same_init.py --prefix /tmp/g_$p --precision $p --strata-json /tmp/g_$p.json >> $S 2>&1
done
G=$OUT/gpt.jsonl; : > $G
for c in "--precision f32 --checkpoint every" "--precision f32" "--precision bf16" "--precision autocast-bf16" "--precision autocast-bf16 --checkpoint every"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; timeout 45 python3 torch_gpt.py $c >> $G 2>&1
done
for s in 1 2 3 4 5 6 7; do c="--precision autocast-bf16 --seed $s"; echo "# gpt $c" >> $G; timeout 40 ./n/gpt $c >> $G 2>&1; done
for c in "--precision autocast-bf16 --recompute none"; do echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; done
cat $T; grep -c '"impl"' $G
