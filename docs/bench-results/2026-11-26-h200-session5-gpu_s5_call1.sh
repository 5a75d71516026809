#!/bin/bash
# Session 5, call 1: fused Adam GPU test + memcheck; issue 9's replay before (d1779d0) and after, alternating;
# memory_hungry and gpt (f32, bf16) beside PyTorch with the fused Adam/AdamW.
cd devbin; mkdir -p n; tar xJf s5a.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
T=$OUT/tests.txt; : > $T
run(){ echo "=== $*" >> $T; ( timeout ${TO:-200} "$@" 2>&1 | grep -v '^test .* ok$' | tail -${TAIL:-25} ) >> $T; }
run ./n/tensor_cuda --include-ignored adam_step
run compute-sanitizer --tool memcheck --report-api-errors no ./n/tensor_cuda --include-ignored adam_step
G=$OUT/perf.jsonl; : > $G
for f in "" "--dtype bf16"; do
  echo "# memory_hungry $f" >> $G; timeout 60 ./n/memory_hungry $f >> $G 2>&1
done
timeout 120 python3 torch_mission.py mlp48 >> $G 2>&1
for c in "--precision f32" "--precision bf16"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; timeout 45 python3 torch_gpt.py $c >> $G 2>&1
done
P=$OUT/replay_old_new.jsonl; : > $P
for round in 1 2; do
  echo "# old round $round" >> $P; timeout 100 ./n/replay_old --device cuda --json --passes 5 traces/*.default.json.gz >> $P 2>&1
  echo "# new round $round" >> $P; timeout 100 ./n/replay --device cuda --json --passes 5 traces/*.default.json.gz >> $P 2>&1
done
grep -n "test result\|FAILED\|panicked\|ERROR SUMMARY" $T | head -20
grep -c '"impl"' $G; grep -c . $P
