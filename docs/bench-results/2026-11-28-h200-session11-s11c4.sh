#!/bin/bash
# Session 11, call 4 (one H200): after 9daa06d (placements over runs of free blocks and holes): strata-alloc GPU
# tests and memcheck, strata-tensor GPU tests, memcheck on the small checkpointed GPT, the GPT at seed 0 (autocast),
# then issue 14's replay of every trace (5 and 60 warm passes after 2 warm-up passes) beside torch_bench.py replay
# (default, expandable), then the simulated device on this host.
cd devbin
T=$OUT/tests.txt; : > $T
echo "# alloc_cuda" >> $T; timeout 60 ./n/c1 --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck alloc_cuda" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/c1 --include-ignored --test-threads=1 2>&1 | tail -2 >> $T
echo "# tensor_cuda" >> $T; timeout 120 ./n/c2 --include-ignored --test-threads=8 2>&1 | grep -E "FAILED|panicked|test result" >> $T; echo "rc ${PIPESTATUS[0]}" >> $T
echo "# memcheck small checkpointed gpt" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16 2>&1 | grep -o '"loss_last":[0-9.]*\|ERROR SUMMARY.*' >> $T
echo "# gpt seed 0 autocast" >> $T; timeout 60 ./n/gpt --precision autocast-bf16 2>&1 | grep -o '"loss_last":[0-9.]*\|"ms_per_step":[0-9.]*\|"peak_reserved[a-z_]*":[0-9]*' >> $T
cat $T
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 60 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 100 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 100 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 100 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# sim passes 20 warmup 2 (this host)" >> $P; timeout 40 ./n/replay --device sim --json --passes 20 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
grep -c ns_per_op $P
