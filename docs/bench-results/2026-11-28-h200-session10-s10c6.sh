#!/bin/bash
# Session 10, call 6 (one H200): is the first replay of a call slower? The same 5-pass replay of every trace
# three times in a row (binary of e50ba05), nothing else.
cd devbin
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
for i in 1 2 3; do echo "# strata passes 5 warmup 2 run $i" >> $P; timeout 100 ./n/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; done
grep -c ns_per_op $P
