#!/bin/bash
# Session 40, call 2: why is a trace replayed in its own process often slower than in a shared process?
B=/tmp/b; P=$OUT/summary.txt; : > $P
{ lscpu -e; numactl -H 2>&1 | head -5; uptime; } >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
T=/tmp/ta/moe_train.default.json.gz
ns() { python3 -c "
import json,sys
print(' '.join(str(json.loads(l)['ns_per_op']) for l in sys.stdin if l.startswith('{')))"; }
R() { "$@" 2>/dev/null | ns; }
echo "# B plain x12" >> $P; for i in $(seq 12); do R $B/replay --device cuda --json --passes 5 --warmup 2 $T >> $P; done
echo "# C setarch -R x12" >> $P; for i in $(seq 12); do R setarch x86_64 -R $B/replay --device cuda --json --passes 5 --warmup 2 $T >> $P; done
echo "# D taskset per cpu 0-15, twice" >> $P; for r in 1 2; do for c in $(seq 0 15); do echo -n "cpu$c " >> $P; R taskset -c $c $B/replay --device cuda --json --passes 5 --warmup 2 $T >> $P; done; done
echo "# E three in one process x6" >> $P; for i in $(seq 6); do R $B/replay --device cuda --json --passes 5 --warmup 2 $T $T $T >> $P; done
echo "# F sim x12" >> $P; for i in $(seq 12); do R $B/replay --device sim --json --passes 5 --warmup 2 $T >> $P; done
echo "# G sim, three in one process x6" >> $P; for i in $(seq 6); do R $B/replay --device sim --json --passes 5 --warmup 2 $T $T $T >> $P; done
uptime >> $P
cat $P
