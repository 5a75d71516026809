#!/bin/bash
# Session 6, call 3: issue 15's history cost before/after (criterion + history_cost), strata-alloc GPU tests,
# issue 14's replay (s6-exp merged) beside PyTorch's default and expandable allocator.
cd devbin; mkdir -p n; tar xJf s6b.tar.xz -C n; R=$(cd .. && pwd); mkdir -p /work && ln -sfn $R /work/main
T=$OUT/tests3.txt; : > $T
H=$OUT/history.txt; : > $H
for i in 1 2; do for w in before after; do echo "# $w $i" >> $H; ./n/history_$w --bench --warm-up-time 1 --measurement-time 2 --noplot 2>&1 | grep -E "time:|^history|^[a-z]" >> $H; done; done
for w in before after; do echo "# history_cost $w" >> $H; ./n/history_cost_$w 21 >> $H 2>&1; done
P=$OUT/replay.txt; : > $P
timeout 120 ./n/alloc_cuda --include-ignored 2>&1 | tail -3 >> $T
for i in 1 2; do echo "# strata passes 5 warmup 2, round $i" >> $P; timeout 100 ./n/replay --device cuda --json --passes 5 --warmup 2 traces/*.default.json.gz >> $P 2>&1; done
echo "# strata passes 60" >> $P; timeout 150 ./n/replay --device cuda --json --passes 60 --warmup 2 traces/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 100 python3 torch_bench.py traces /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 100 python3 torch_bench.py traces /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P
tail -8 $T
