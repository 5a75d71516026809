#!/bin/bash
# Session 74, call 2: binaries of the working tree after the session-74 element-wise math (built on the dev VM with
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-tensor -p strata-autograd --no-run ; stripped, xz):
# the math_s74 fixture on cuda:0 (first: a warm-up for the kernels' first-use compile), strata-autograd's math_grad_s74,
# prod_s73 and grad_args_s73 on cuda:0, strata-tensor's GPU suite, the other hostile-argument fixtures on cuda:0,
# compute-sanitizer memcheck of math_s74 on cuda:0, then conformance/ with strides on every dim on cuda:0 and cpu.
T0=$(date +%s); B=$(cd "$(dirname "$0")" && pwd); R=$(pwd); LIM=${LIM:-560}
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=$OUT; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; uptime >> $P
s=$(date +%s); timeout 200 $B/t_tsuite --include-ignored --test-threads 8 math_s74 > $O/math.txt 2>&1; echo "math_s74 gpu+cpu (first: warm-up compile) rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/math.txt)" >> $P; grep -E "FAILED|panicked|differ|^case" -A2 $O/math.txt | head -30 >> $P
s=$(date +%s); timeout 200 $B/t_agsuite --include-ignored --test-threads 8 math_grad_s74 prod_s73 grad_args_s73 > $O/gfix.txt 2>&1; echo "math_grad + prod + grad_args gpu+cpu rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/gfix.txt)" >> $P; grep -E "FAILED|panicked|differ|^case" -A2 $O/gfix.txt | head -30 >> $P
s=$(date +%s); timeout 150 $B/t_tcuda --include-ignored --test-threads 16 > $O/tcuda.txt 2>&1; echo "tensor gpu rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tcuda.txt)" >> $P; grep -E "FAILED|panicked" -A3 $O/tcuda.txt | head -20 >> $P
s=$(date +%s); timeout 90 $B/t_tsuite --include-ignored --test-threads 8 _on_a_gpu > $O/fix.txt 2>&1; echo "tensor fixtures gpu rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/fix.txt)" >> $P; grep -E "FAILED|panicked|differ" -A12 $O/fix.txt | head -40 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck $B/t_tsuite --include-ignored --test-threads 1 element_wise_math_matches_pytorch_on_a_gpu > $O/mc1.txt 2>&1; echo "memcheck math_s74 gpu rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/mc1.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/mc1.txt | sort | uniq -c | head -5 >> $P
[ -x $B/t_conf ] && left=$(( LIM - ($(date +%s) - T0) )); s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout $left $B/t_conf --include-ignored --nocapture project > $O/conf.txt 2>&1
echo "conformance/ strides=all rc $? $(( $(date +%s) - s )) s (limit $left): $(grep -E 'conformance on' $O/conf.txt | tr '\n' ' ')" >> $P; grep -E '^FAIL' $O/conf.txt | head >> $P
uptime >> $P; cat $P
