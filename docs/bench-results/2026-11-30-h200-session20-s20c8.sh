#!/bin/bash
# Session 20, call 8 (one H200): the four held-out traces (traces/held_out/, `*.default`) replayed by strata
# (binaries of af07c88; the allocator's code is unchanged since) on the GPU and by torch_bench.py replay (default,
# then expandable_segments:True) in the same call.
mkdir -p /tmp/b && tar xJf devbin/s20a.tar.xz -C /tmp/b && B=/tmp/b/s20a
mkdir -p /tmp/th && cp traces/held_out/*.default.json.gz /tmp/th/
P=$OUT/replay.txt; : > $P
echo "# strata passes 5 warmup 2" >> $P; timeout 60 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/th/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
echo "# torch default" >> $P; timeout 100 python3 $B/torch_bench.py /tmp/th /tmp/tr1.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr1.json >> $P; echo >> $P
echo "# torch expandable" >> $P; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 100 python3 $B/torch_bench.py /tmp/th /tmp/tr2.json replay > /dev/null 2>&1; echo "rc $?" >> $P; cat /tmp/tr2.json >> $P; echo >> $P
echo "# strata passes 20 warmup 2" >> $P; timeout 60 $B/replay --device cuda --json --passes 20 --warmup 2 /tmp/th/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
grep "^rc\|^#" $P
