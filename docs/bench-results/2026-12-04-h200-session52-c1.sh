#!/bin/bash
# Session 52, call 1 (one H200), binaries of the HEAD below: strata-tensor's GPU suite (session 52's sweep fixes:
# arange's checks, check orders, matmul of vectors) and memcheck of its matmul and index tests; the conformance
# replay on the CPU and cuda:0 of oracle seeds 3278-3281 (8,000 programs) and of the repo's vectors.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o1; mkdir -p $O /tmp/orf
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
tar xJf $B/oracle_f.tar.xz -C /tmp/orf
s=$(date +%s); timeout 260 ./t_tensor --include-ignored --test-threads 16 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A3 $O/tensor.txt | head -30 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/orf/f timeout 120 ./t_conf --include-ignored --nocapture project_conformance > $O/conf_new.txt 2>&1; echo "conformance (seeds 3278-3281) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf_new.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL" $O/conf_new.txt | head -10 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 100 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL" $O/conf.txt | head -10 >> $P
for F in matmul index; do s=$(date +%s); timeout 50 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 $F > $O/tensor_mc_$F.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_$F.txt | tr '\n' ' ')" >> $P; done
cd $O && tar cJf $OUT/c1.tar.xz . && cat $P
