#!/bin/bash
# Session 64, call 2 (H100, after call 1's run.sh 1): the fresh hostile-argument programs (fuzz_conformance_s63.py
# seeds 6350-6352, 4,500) on cpu and cuda:0, then compute-sanitizer memcheck of one of them (seed 6350).
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
cd $B && xz -d -k -f t_conf.xz && chmod +x t_conf
O=$OUT/o4; mkdir -p $O /tmp/h63 /tmp/h63mc
P=$O/summary.txt; : > $P
cat $B/HEAD >> $P; uptime >> $P
cp $B/conf/fuzz_s63_*.json.gz /tmp/h63/; cp $B/conf/fuzz_s63_6350.json.gz /tmp/h63mc/
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/h63 timeout 150 ./t_conf --include-ignored --nocapture project > $O/conf_h63.txt 2>&1; echo "conformance (s63 hostile 6350-6352) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf_h63.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf_h63.txt | head -10 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/h63mc timeout 90 compute-sanitizer --tool memcheck ./t_conf --include-ignored --nocapture project > $O/conf_mc.txt 2>&1; echo "conformance memcheck (6350) rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result|conformance on' $O/conf_mc.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/conf_mc.txt | head -6 >> $P
uptime >> $P
cat $P
