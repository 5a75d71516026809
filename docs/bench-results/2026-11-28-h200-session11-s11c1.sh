#!/bin/bash
# Session 11, call 1 (one H200): after 7ab9394 (a block's hot fields in one cache line): issue 14's replay of every
# trace (5 warm passes after 2 warm-up passes, twice, the second pinned to one CPU with taskset; then 60 passes),
# beside torch_bench.py replay (default, expandable) in the same call, then the simulated device on this host.
cd devbin
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
nproc >> $OUT/host.txt; lscpu | grep -E "Model name|NUMA|Thread|MHz" >> $OUT/host.txt
echo "# strata passes 5 warmup 2" >> $P; timeout 100 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# strata passes 5 warmup 2 pinned" >> $P; timeout 100 taskset -c 3 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 150 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 120 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# sim passes 20 warmup 2 (this host)" >> $P; timeout 40 ./n/replay --device sim --json --passes 20 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
grep -c ns_per_op $P
