#!/bin/bash
# Session 56, call 2 (one H200), binaries of the HEAD below (sessions 54 and 55, never run on a GPU before): strata-tensor's
# GPU suite and memcheck of its matmul, index and cross_entropy tests; the conformance replay on the CPU and cuda:0 of
# oracle seeds 3302-3305 and 3310-3311 (gzipped; session 55's scripts) and of the repo's vectors.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o2; mkdir -p $O
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 260 ./t_tensor --include-ignored --test-threads 16 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A3 $O/tensor.txt | head -30 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$B/f timeout 280 ./t_conf --include-ignored --nocapture project_conformance > $O/conf_new.txt 2>&1; echo "conformance (seeds 3302-3313) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf_new.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf_new.txt | head -10 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 120 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
for F in matmul index cross_entropy; do s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 $F > $O/tensor_mc_$F.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_$F.txt | tr '\n' ' ')" >> $P; done
cd $O && tar cJf $OUT/c2.tar.xz . && cat $P
