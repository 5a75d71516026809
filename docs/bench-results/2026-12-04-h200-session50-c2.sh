#!/bin/bash
# Session 50, call 2 (one H200), binaries of the HEAD below: strata-autograd's GPU suite (session 49's hostile-sweep
# fixes) and the same under compute-sanitizer memcheck; the conformance replay on the CPU and cuda:0 of the repo's
# vectors (conformance/) and of new oracle seeds 3260-3263 (fuzz_conformance_{core,ops}.py, PyTorch 2.15 CPU).
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o2; mkdir -p $O /tmp/orf
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
tar xJf $B/oracle_f.tar.xz -C /tmp/orf
s=$(date +%s); timeout 60 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $O/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/autograd_mc.txt | tr '\n' ' ')" >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 200 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/orf/f timeout 120 ./t_conf --include-ignored --nocapture project_conformance > $O/conf_new.txt 2>&1; echo "conformance (seeds 3260-3263) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf_new.txt | tr '\n' ' ')" >> $P
cd $O && tar cJf $OUT/c2.tar.xz . && cat $P
