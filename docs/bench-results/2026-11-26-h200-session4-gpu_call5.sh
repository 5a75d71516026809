#!/bin/bash
# Session 4, final call: GPU tests + memcheck; GPT, 48-layer MLP and transformer ops beside PyTorch;
# snapshots (CPU and GPU) through PyTorch's _memory_viz; replay on the GPU (5 and 60 passes) beside PyTorch's.
cd devbin; mkdir -p n; tar xJf n.tar.xz -C n; R=$(cd .. && pwd)
mkdir -p /work && ln -sfn $R /work/main
export STRATA_CONFORMANCE_DIR=$PWD/conformance
T=$OUT/tests.txt; : > $T
run(){ echo "=== $*" >> $T; ( timeout ${TO:-200} "$@" 2>&1 | grep -v '^test .* ok$' | tail -${TAIL:-25} ) >> $T; }
run ./n/tensor_cuda --include-ignored --test-threads=8
TO=240 run compute-sanitizer --tool memcheck --report-api-errors no ./n/tensor_cuda --include-ignored --test-threads=8 short_row softmax_backward gelu_backward masked_select softmax_register embedding_row batched_transposes softmax_log_softmax index_ops
TAIL=10 run ./n/alloc_cuda --include-ignored --test-threads=1
TAIL=10 run ./n/training --include-ignored
TAIL=10 run ./n/conformance --include-ignored
TAIL=10 run ./n/adversarial --include-ignored
G=$OUT/perf.jsonl; : > $G
for c in "--precision f32" "--precision bf16" "--precision autocast-bf16" "--precision autocast-bf16 --checkpoint every" "--precision f32 --checkpoint every"; do
  echo "# gpt $c" >> $G; timeout 60 ./n/gpt $c >> $G 2>&1; timeout 45 python3 torch_gpt.py $c >> $G 2>&1
done
for f in "" "--dtype bf16" "--checkpoint every:4" "--autocast bf16"; do
  echo "# memory_hungry $f" >> $G; timeout 60 ./n/memory_hungry $f >> $G 2>&1
done
timeout 90 python3 torch_mission.py mlp48 >> $G 2>&1
timeout 90 ./n/transformer_ops >> $G 2>&1; timeout 90 python3 torch_transformer_ops.py >> $G 2>&1
echo "=== memory_viz cpu and cuda" >> $T
for d in cpu cuda; do
  ( mkdir -p /tmp/mr_$d && cd /tmp/mr_$d && STRATA_DEVICE=$d timeout 60 $R/devbin/n/memory_report > mr.log 2>&1; \
    echo "--- $d"; timeout 120 python3 $R/examples/check_snapshot.py snapshot.pickle 2>&1 | grep -v RuntimeWarning | grep -E "^(ok|FAIL)|total_|segments:" ) >> $T 2>&1
done
timeout 150 ./n/replay --device cuda --json --passes 5 --warmup 1 traces/*.default.json.gz > $OUT/replay_cuda.jsonl 2>&1
timeout 150 ./n/replay --device cuda --json --passes 60 --warmup 2 traces/*.default.json.gz > $OUT/replay_cuda60.jsonl 2>&1
timeout 150 python3 torch_bench.py traces $OUT/torch_replay.json replay > /dev/null 2>&1
grep -n "test result\|FAILED\|panicked\|ERROR SUMMARY\|^FAIL" $T | head -40
grep -c '"impl"' $G; wc -l $OUT/replay_cuda.jsonl $OUT/replay_cuda60.jsonl
