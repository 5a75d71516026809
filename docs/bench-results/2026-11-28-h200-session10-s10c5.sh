#!/bin/bash
# Session 10, call 5 (one H200): after 7c5e214 and the take_lower_bound commit (free index: short bins scanned,
# one search to find and take a block): strata-alloc GPU tests and memcheck; issue 14's replay of every trace, 5
# and 60 warm passes after 2 warm-up passes, beside torch_bench.py replay (default, expandable) in the same call,
# then the simulated device on the same host.
cd devbin
T=$OUT/tests.txt; : > $T
echo "# alloc_cuda" >> $T; timeout 60 ./n/alloc_cuda --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
echo "# memcheck alloc_cuda" >> $T; timeout 120 compute-sanitizer --tool memcheck --report-api-errors no ./n/alloc_cuda --include-ignored --test-threads=1 2>&1 | tail -2 >> $T
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 150 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 170 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 170 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 60 warmup 2" >> $P; timeout 150 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# sim passes 20 warmup 2 (this host)" >> $P; timeout 60 ./n/replay --device sim --json --passes 20 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
cat $T; grep -c ns_per_op $P
