#!/bin/bash
# Session 66, call 6: strata-alloc's GPU suite with the new random-sequence test (alone, then under compute-sanitizer
# memcheck), then 40,000 fresh programs (conf/: the six older fuzzers' seeds 9902-9906, fuzz_conformance_s63.py seeds
# 6602-6611) on cpu and cuda:0 in one process (the first replay of a fresh machine compiles its kernels).
B=$(cd "$(dirname "$0")" && pwd); R=$(pwd)
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 60 ./t_alloc --include-ignored --test-threads 4 > $OUT/alloc.txt 2>&1; echo "alloc suite rc $? $(( $(date +%s) - s )) s $(grep '^test result' $OUT/alloc.txt)" >> $P
grep -E "^seed|FAILED|panicked" -A2 $OUT/alloc.txt | head -20 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --nocapture random_sequences > $OUT/alloc_mc.txt 2>&1; echo "memcheck random_sequences rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $OUT/alloc_mc.txt | tr '\n' ' ')" >> $P
grep -E "Invalid|Program hit|panicked" $OUT/alloc_mc.txt | head -6 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$B/conf timeout 330 ./t_conf --include-ignored --nocapture project > $OUT/conf.txt 2>&1; echo "fresh programs rc $? $(( $(date +%s) - s )) s" >> $P
grep -E '^test result|conformance on|^FAIL|panicked' $OUT/conf.txt | head -30 >> $P
uptime >> $P
cat $P
