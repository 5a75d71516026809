#!/bin/bash
# Session 10, call 3 (one H200): issue 14's replay of every trace (5 shared + 12 of traces/, *.default sequences)
# after 1ab3f24 (reverse map of live pages) and 76df6c5 (own-stream pages move without a fence), 5 and 60 warm
# passes after 2 warm-up passes, beside torch_bench.py replay (PyTorch default, then expandable) in the same call.
cd devbin
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 150 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 170 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 170 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 150 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# sim passes 20 warmup 2 (this host)" >> $P; timeout 60 ./n/replay --device sim --json --passes 20 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
grep -c ns_per_op $P
