#!/bin/bash
# Session 67, call 4: 68,000 fresh programs (the six older fuzzers' seeds 9917-9924, fuzz_conformance_s63.py seeds
# 6632-6651; PyTorch 2.15 on the dev VM) on cpu and cuda:0, t_conf of ae7286c (strata-tensor unchanged since).
# c1: 16 files (seeds 9917-9918, 6632-6635), first, while the fresh machine compiles its kernels; c2: the other 52.
B=$(cd "$(dirname "$0")" && pwd); R=$(pwd)
cd $B && xz -d -k -f t_conf.xz && chmod +x t_conf
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uptime
for c in $3 $4; do s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$B/$c timeout $1 ./t_conf --include-ignored --nocapture project > $OUT/$c.txt 2>&1; echo "$c rc $? $(( $(date +%s) - s )) s"; grep -E "conformance on|^FAIL|test result" $OUT/$c.txt | head -30; shift; done
uptime
