#!/bin/bash
# Session 47, call 3 (one H200): does transparent huge pages for the replay's heap (glibc's malloc tunable, THP being
# in madvise mode on this guest) change the replay's cost? `replay --device cuda --json --passes 5 --warmup 2` on the
# 29 `*.default` traces eight times in one call, alternating plain runs and runs with
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o; mkdir -p $O /tmp/ta
P=$O/summary.txt; : > $P
cat $B/HEAD >> $P; ldd --version | head -1 >> $P; cat /sys/kernel/mm/transparent_hugepage/enabled >> $P
cp $R/traces/*.default.json.gz $R/traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
for i in 1 2 3 4; do
  s=$(date +%s); timeout 25 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/plain$i.jsonl 2>&1; echo "plain $i rc $? $(( $(date +%s) - s )) s" >> $P
  s=$(date +%s); GLIBC_TUNABLES=glibc.malloc.hugetlb=1 timeout 25 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz > $O/thp$i.jsonl 2>&1; echo "thp $i rc $? $(( $(date +%s) - s )) s $(grep -i AnonHugePages /proc/meminfo)" >> $P
done
cd $O && tar cJf $OUT/c3.tar.xz . && cat $P
