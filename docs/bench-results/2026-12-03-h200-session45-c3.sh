#!/bin/bash
# Session 45, call 3: the softmax change (plain rows load as they are; 4 rows per block of the warp-per-row kernels,
# a block for every 4 rows) and the SGD change: GPU suites of strata-tensor and strata-autograd, memcheck of the
# row-kernel tests (softmax, cross-entropy, layer norm) and of the autograd suite, transformer_ops (new and the
# binary of HEAD 9221136, "old") beside PyTorch, 2 rounds.
B=$(cd "$(dirname "$0")" && pwd)
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
timeout 200 ./t_tensor --include-ignored --test-threads 1 > $OUT/tensor.txt 2>&1; echo "tensor rc $? $(grep '^test result' $OUT/tensor.txt)" >> $P
timeout 100 ./t_autograd --include-ignored --test-threads 1 > $OUT/autograd.txt 2>&1; echo "autograd rc $? $(grep '^test result' $OUT/autograd.txt)" >> $P
: > $OUT/ops.jsonl
for round in 1 2; do
  for v in old new; do
    b=./transformer_ops; [ $v = old ] && b=./transformer_ops_old
    timeout 60 $b --iters 50 2>&1 | grep '^{' | sed "s/^/$v $round /" >> $OUT/ops.jsonl
  done
  timeout 60 python3 torch_transformer_ops.py --iters 50 2>&1 | grep '^{' | sed "s/^/torch $round /" >> $OUT/ops.jsonl
done
timeout 150 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 softmax cross_entropy layer_norm > $OUT/memcheck_tensor.txt 2>&1; echo "memcheck tensor rc $? $(grep -E 'ERROR SUMMARY|^test result' $OUT/memcheck_tensor.txt | tr '\n' ' ')" >> $P
timeout 150 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $OUT/memcheck_autograd.txt 2>&1; echo "memcheck autograd rc $? $(grep -E 'ERROR SUMMARY|^test result' $OUT/memcheck_autograd.txt | tr '\n' ' ')" >> $P
python3 - $OUT/ops.jsonl > $OUT/table.txt <<'PY'
import sys,json,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    v,r,j=l.split(' ',2); x=json.loads(j)
    d[(x['op'],x['pass'],x['dtype'],v)].append(x['ms'])
keys=sorted({k[:3] for k in d})
for k in keys:
    print(' '.join(k), ' | '.join(f"{v} " + ' '.join(f"{m:.4f}" for m in d[k+(v,)]) for v in ('old','new','torch')))
PY
cat $P $OUT/table.txt
