#!/bin/bash
# Session 66, call 4: the conformance replay (built from b7a926b plus the two allow-listed cases and the two new vector
# files of conformance/) over the repository's vectors with strides compared on every dim, on cpu and cuda:0; then
# PyTorch's own CPU and CUDA answers to the two cases (probe_known.py).
B=$(cd "$(dirname "$0")" && pwd); R=$(pwd)
cd $B && xz -d -k -f t_conf.xz && chmod +x t_conf
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 200 ./t_conf --include-ignored --nocapture > $OUT/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s" >> $P
grep -E '^test result|conformance on|^FAIL|panicked' $OUT/conf.txt | head -20 >> $P
python3 $B/probe_known.py >> $P 2>&1
cat $P
