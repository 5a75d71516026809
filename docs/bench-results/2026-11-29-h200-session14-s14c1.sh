#!/bin/bash
# Session 14, call 1 (one H200): A/B of the replay before (session 13 build, replay_old) and after 8beb34f (a growth
# looks its stitched mappings up once), cuda and the simulated device on this host, alternating; strata-alloc GPU tests.
cd devbin
mkdir -p /tmp/ta && cp ../traces/*.default.json.gz straces/*.default.json.gz /tmp/ta/
P=$OUT/ab.txt; : > $P
for i in 1 2; do
 for b in replay_old replay; do
  echo "# $b cuda round $i" >> $P; timeout 100 ./n/$b --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
 done
done
for b in replay_old replay; do
 echo "# $b sim" >> $P; timeout 40 ./n/$b --device sim --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1
done
echo "# 60 passes new cuda gnn" >> $P; timeout 60 ./n/replay --device cuda --json --passes 60 --warmup 2 /tmp/ta/gnn_varsize.default.json.gz >> $P 2>&1
./n/c1 --include-ignored --test-threads=1 > $OUT/c1.txt 2>&1; tail -3 $OUT/c1.txt
grep -c ns_per_op $P
