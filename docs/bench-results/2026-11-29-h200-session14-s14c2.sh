#!/bin/bash
# Session 14, call 2 (one H200): issue 14's replay at 20cffdf (growths look their stitched mappings up once; settling)
# beside torch_bench.py replay (default, expandable) in the same call; the simulated device on this host; a 60-pass
# run of every trace; strata-alloc GPU tests, and under compute-sanitizer memcheck.
cd devbin
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 100 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# torch default" >> $P; timeout 170 python3 torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 170 python3 torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 5 warmup 2, again after torch" >> $P; timeout 100 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# sim passes 5 warmup 2 (this host)" >> $P; timeout 40 ./n/replay --device sim --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
echo "# strata cuda passes 60 warmup 2" >> $P; timeout 150 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
./n/c1 --include-ignored --test-threads=1 > $OUT/c1.txt 2>&1; tail -2 $OUT/c1.txt
timeout 150 compute-sanitizer --tool memcheck ./n/c1 --include-ignored --test-threads=1 > $OUT/c1_memcheck.txt 2>&1; tail -4 $OUT/c1_memcheck.txt
grep -c ns_per_op $P
