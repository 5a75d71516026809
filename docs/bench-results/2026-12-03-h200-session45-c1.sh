#!/bin/bash
# Session 45, call 1: GPU tests at 9221136 (+ experimental softmax kernels, unused unless STRATA_SMX), memcheck of the
# autograd GPU tests (SGD change), softmax forward variants beside PyTorch.
# The STRATA_SMX variants were an uncommitted experiment (extra kernels in the softmax module, picked for rows of
# 1024 without scale or mask): 1 = rows loaded without the per-element scale and mask test, 8 rows per block, grid
# capped at 32 blocks per SM (as before); 1u = 1 with a block for every 8 rows; 2 = plain, 4 rows per block, a block
# for every 4 rows; 2c = 2 with the capped grid; 3 = 1 with __launch_bounds__(256, 5); 4 = 2 with scalar loads;
# 5 = plain, 2 rows per block, uncapped. "base" is the softmax of 9221136. The test binaries ran without
# --include-ignored here, so only their CPU-side tests ran (the GPU suites ran in call 3).
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
./t_tensor --test-threads 1 > $OUT/tensor.txt 2>&1; echo "tensor rc $? $(grep '^test result' $OUT/tensor.txt)" >> $P
./t_autograd --test-threads 1 > $OUT/autograd.txt 2>&1; echo "autograd rc $? $(grep '^test result' $OUT/autograd.txt)" >> $P
for v in 1 1u 2 2c 3 4 5; do
  STRATA_SMX=$v ./t_tensor --test-threads 1 softmax > $OUT/smx_$v.txt 2>&1; echo "smx $v softmax tests rc $? $(grep '^test result' $OUT/smx_$v.txt)" >> $P
done
: > $OUT/sm.jsonl
for round in 1 2; do
  for v in base 1 1u 2 2c 3 4 5; do
    STRATA_SMX=$v ./transformer_ops --iters 50 2>&1 | grep '"softmax"' | sed "s/^/$v $round /" >> $OUT/sm.jsonl
  done
  python3 torch_transformer_ops.py --iters 50 2>&1 | grep '"softmax"' | sed "s/^/torch $round /" >> $OUT/sm.jsonl
done
timeout 300 compute-sanitizer --tool memcheck ./t_autograd --test-threads 1 > $OUT/memcheck_autograd.txt 2>&1; echo "memcheck autograd rc $? $(grep -E 'ERROR SUMMARY|^test result' $OUT/memcheck_autograd.txt | tr '\n' ' ')" >> $P
cat $P
grep fwd $OUT/sm.jsonl | python3 -c "
import sys,json
for l in sys.stdin:
    v,r,j=l.split(' ',2); d=json.loads(j); print(v,r,d['dtype'],d['pass'],d['ms'])
"
