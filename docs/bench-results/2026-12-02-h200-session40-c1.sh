#!/bin/bash
# Session 40: is the first trace replayed in a process slower (process warm-up) or the first minute of the machine?
B=/tmp/b; P=$OUT/summary.txt; : > $P
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; cat $B/HEAD; uptime
  echo "thp enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
  cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1 | head -1; lscpu | grep -E "Model name|MHz"; ldd --version | head -1; } >> $P
mkdir -p /tmp/ta && cp traces/*.default.json.gz traces/held_out/*.default.json.gz $B/straces/*.default.json.gz /tmp/ta/
ns() { python3 -c "
import json,sys
for l in open(sys.argv[1]):
    l=l.strip()
    if l.startswith('{'):
        d=json.loads(l); print(d.get('workload'), d.get('ns_per_op'), d.get('warm_pass_ns_per_op'))
" $1; }
for round in sep1 one sep2 hugetlb; do
  s=$(date +%s); : > $OUT/$round.txt
  if [ $round = one ]; then
    timeout 120 $B/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $OUT/$round.txt 2>/dev/null
  else
    for f in /tmp/ta/*.default.json.gz; do
      if [ $round = hugetlb ]; then GLIBC_TUNABLES=glibc.malloc.hugetlb=1 timeout 30 $B/replay --device cuda --json --passes 5 --warmup 2 $f >> $OUT/$round.txt 2>/dev/null
      else timeout 30 $B/replay --device cuda --json --passes 5 --warmup 2 $f >> $OUT/$round.txt 2>/dev/null; fi
    done
  fi
  echo "# $round $(( $(date +%s) - s )) s" >> $P; ns $OUT/$round.txt >> $P
done
s=$(date +%s); timeout 60 $B/replay --device cuda --json --passes 30 --warmup 2 /tmp/ta/bert_finetune_accum.default.json.gz > $OUT/long.txt 2>/dev/null
echo "# long30 $(( $(date +%s) - s )) s" >> $P; ns $OUT/long.txt >> $P
uptime >> $P
cat $P
