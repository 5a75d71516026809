#!/bin/bash
# Built as call 1's binaries (see devbin/s59a/run.sh's header), plus `cargo build --release -p strata-examples --example replay`.
# Session 59, call 2 (binaries of the HEAD below): strata-alloc's GPU suite and memcheck (session 58's reporters,
# annotations, OOM observers); conformance replay on the CPU and cuda:0 of the repo's vectors and of ../shared/conformance.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o2; mkdir -p $O
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 40 ./t_alloc --include-ignored > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt | head -20 >> $P
s=$(date +%s); timeout 70 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $O/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/alloc_mc.txt | tr '\n' ' ')" >> $P
grep -E "Program hit" $O/alloc_mc.txt | head >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 120 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$B/shared_conformance timeout 60 ./t_conf --include-ignored --nocapture > $O/conf_shared.txt 2>&1; echo "conformance (shared) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf_shared.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf_shared.txt | head -10 >> $P
cat $P
