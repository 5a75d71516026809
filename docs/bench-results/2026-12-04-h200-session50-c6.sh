#!/bin/bash
# Session 50, call 6 (one H200), binaries of the HEAD below (session 50's hostile-sweep fixes: the history ring's
# resize and dump_snapshot in strata-alloc; matmul's fold rule, bool empty products, f16/bf16 logsumexp, cumsum/softmax
# dtypes in strata-tensor): strata-alloc's GPU suite and the same under compute-sanitizer memcheck; the conformance
# replay (CPU and cuda:0) of oracle seeds 3260-3267; strata-tensor's GPU suite; the repo's conformance vectors.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o6; mkdir -p $O /tmp/orf
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
tar xJf $B/oracle_fall.tar.xz -C /tmp/orf
s=$(date +%s); timeout 30 ./t_alloc --include-ignored > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt | head -20 >> $P
s=$(date +%s); timeout 50 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $O/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/alloc_mc.txt | tr '\n' ' ')" >> $P
grep -E "Program hit" $O/alloc_mc.txt >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/orf/fall timeout 40 ./t_conf --include-ignored --nocapture project_conformance > $O/conf_new.txt 2>&1; echo "conformance (seeds 3260-3267) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf_new.txt | tr '\n' ' ')" >> $P
s=$(date +%s); timeout 230 ./t_tensor --include-ignored --test-threads 16 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A3 $O/tensor.txt | head -30 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 100 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
cd $O && tar cJf $OUT/c6.tar.xz . && cat $P
# Then, on the same machine (calls 7-9, commands as run from the repo root after `cd /tmp/b/c6`):
#   STRATA_CONFORMANCE_DIR=$OLDPWD/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/orf/fall \
#     ./t_conf --include-ignored --nocapture project_conformance          (seeds 3260-3267 again, kernels now cached)
#   compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 F   for F in matmul reductions cumsum softmax
