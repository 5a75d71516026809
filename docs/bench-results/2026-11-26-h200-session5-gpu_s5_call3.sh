#!/bin/bash
# Session 5, call 3: GPT (5 configurations, strata's default --recompute attn,mlp and --recompute none) beside torch_gpt.py;
# transformer ops beside PyTorch's; conformance with masked.json on cuda:0; issue 9's replay, d1779d0 vs 3d76578 (the allocator restructure) alternating.
cd devbin; mkdir -p n; tar xJf s5a.tar.xz -C n; tar xJf s5b.tar.xz -C n; tar xJf s5c.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
G=$OUT/perf.jsonl; : > $G
for c in "--precision f32" "--precision bf16" "--precision autocast-bf16" "--precision autocast-bf16 --checkpoint every" "--precision f32 --checkpoint every"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; timeout 45 python3 torch_gpt.py $c >> $G 2>&1
done
for c in "--precision f32" "--precision autocast-bf16 --checkpoint every"; do
  echo "# gpt $c --recompute none" >> $G; timeout 60 ./n/gpt $c --recompute none >> $G 2>&1
done
timeout 90 ./n/transformer_ops >> $G 2>&1; timeout 90 python3 torch_transformer_ops.py >> $G 2>&1
T=$OUT/tests.txt; : > $T
( timeout 120 ./n/conformance --include-ignored 2>&1 | tail -8 ) >> $T
P=$OUT/replay_9.jsonl; : > $P
for round in 1 2; do
  echo "# d1779d0 round $round" >> $P; timeout 60 ./n/replay_old --device cuda --json --passes 5 traces/*.default.json.gz >> $P 2>&1
  echo "# 3d76578 round $round" >> $P; timeout 60 ./n/replay_3d76578 --device cuda --json --passes 5 traces/*.default.json.gz >> $P 2>&1
done
grep -c '"impl"' $G; grep -c . $P; grep "test result" $T
