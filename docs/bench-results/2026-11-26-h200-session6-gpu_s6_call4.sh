#!/bin/bash
# Session 6, call 4: the merged tree's GPT (5 configurations, default --recompute) beside torch_gpt.py;
# transposes and the small op beside torch_bench.py elementwise; transformer ops beside PyTorch's.
cd devbin; mkdir -p n; tar xJf s6c.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
G=$OUT/gpt.jsonl; : > $G
for c in "--precision f32 --checkpoint every" "--precision f32" "--precision bf16" "--precision autocast-bf16" "--precision autocast-bf16 --checkpoint every"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; timeout 45 python3 torch_gpt.py $c >> $G 2>&1
done
B=$OUT/bench.txt; : > $B
for i in 1 2; do ./n/gpu_bench --only copy,add_inplace_transposed,contiguous_of,small_op >> $B 2>&1; done
python3 torch_bench.py traces /tmp/tbe.json elementwise > /dev/null 2>&1; cat /tmp/tbe.json >> $B
timeout 60 ./n/transformer_ops >> $B 2>&1; timeout 60 python3 torch_transformer_ops.py >> $B 2>&1
bash exp/softmax.sh > $OUT/softmax.txt 2>&1
grep -c '"impl"' $G; grep -c . $B
