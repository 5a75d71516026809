#!/bin/bash
# Session 17, call 3 (one H200): issue 14's replay at 67ffac8 (allocator unchanged since session 16's bc4e52d) beside
# torch_bench.py replay (default, then expandable_segments:True) in the same call; strata again after PyTorch; a
# 60-pass run of every trace.
mkdir -p /tmp/b && tar xJf devbin/s17b.tar.xz -C /tmp/b && B=/tmp/b/s17b
mkdir -p /tmp/ta && cp traces/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader >> $P
python3 -c "import torch; print('torch', torch.__version__)" >> $P
echo "# strata passes 5 warmup 2" >> $P; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
echo "# torch default" >> $P; timeout 150 python3 $B/torch_bench.py /tmp/ta /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 150 python3 $B/torch_bench.py /tmp/ta /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 5 warmup 2, again after torch" >> $P; timeout 90 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
echo "# strata cuda passes 60 warmup 2" >> $P; timeout 150 $B/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
grep -c ns_per_op $P
grep "^rc\|^#" $P
