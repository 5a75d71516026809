#!/bin/bash
# Session 13, call 5 (one H200, the machine of call 4): issue 14's replay of every trace on the GPU after the
# hostile-input sweep of strata-alloc (RawAllocation carries its allocator's id, 24 -> 32 bytes), 5 warm passes after
# 2 warm-up passes, beside torch_bench.py replay (default, expandable) in the same call, then the simulated device.
cd devbin
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 120 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 170 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 170 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P; echo >> $P
echo "# sim passes 5 warmup 2 (this host)" >> $P; timeout 40 ./n/replay --device sim --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
grep -c ns_per_op $P
