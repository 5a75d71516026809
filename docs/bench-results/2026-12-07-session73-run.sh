#!/bin/bash
# Session 73, call 1: binaries of the HEAD in HEAD (built on the dev VM with
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-tensor -p strata-autograd --no-run ; stripped, xz):
# strata-autograd's grad_args_s73 on cuda:0 (first: a warm-up for the kernels' first-use compile), strata-tensor's GPU
# suite, the hostile-argument fixtures on cuda:0 (view_args_s72, reduce_args_s72, index_args_s73, contract_args_s73,
# nn_args_s73), compute-sanitizer memcheck of index_args_s73 on cuda:0 and of the GPU suite's scatter/index tests, then
# conformance/ with strides on every dim on cuda:0 and cpu, and 14 fresh fuzz files (fz/, all passing on the dev VM's CPU).
T0=$(date +%s); B=$(cd "$(dirname "$0")" && pwd); R=$(pwd); LIM=${LIM:-560}
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=$OUT; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 150 $B/t_agsuite --include-ignored --test-threads 4 grad_args_s73 > $O/gfix.txt 2>&1; echo "grad fixture gpu (first, a warm-up for the kernels' first-use compile) rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/gfix.txt)" >> $P; grep -E "FAILED|panicked|differ" -A12 $O/gfix.txt | head -30 >> $P
s=$(date +%s); timeout 150 $B/t_tcuda --include-ignored --test-threads 8 > $O/tcuda.txt 2>&1; echo "tensor gpu rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tcuda.txt)" >> $P; grep -E "FAILED|panicked" -A3 $O/tcuda.txt | head -20 >> $P
s=$(date +%s); timeout 90 $B/t_tsuite --include-ignored --test-threads 4 _on_a_gpu > $O/fix.txt 2>&1; echo "fixtures gpu rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/fix.txt)" >> $P; grep -E "FAILED|panicked|differ" -A12 $O/fix.txt | head -40 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck $B/t_tsuite --include-ignored --test-threads 1 index_args_s73 > $O/mc1.txt 2>&1; echo "memcheck index_args rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/mc1.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/mc1.txt | sort | uniq -c | head -5 >> $P
s=$(date +%s); timeout 100 compute-sanitizer --tool memcheck $B/t_tcuda --include-ignored --test-threads 1 scatter index > $O/mc2.txt 2>&1; echo "memcheck tensor gpu scatter/index rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/mc2.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/mc2.txt | sort | uniq -c | head -5 >> $P
left=$(( LIM - ($(date +%s) - T0) - 60 )); s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout $left $B/t_conf --include-ignored --nocapture project > $O/conf.txt 2>&1
echo "conformance/ strides=all rc $? $(( $(date +%s) - s )) s (limit $left): $(grep -E 'conformance on' $O/conf.txt | tr '\n' ' ')" >> $P; grep -E '^FAIL' $O/conf.txt | head >> $P
left=$(( LIM - ($(date +%s) - T0) )); s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout $left $B/t_conf --include-ignored --nocapture project > $O/fz.txt 2>&1
echo "fz rc $? $(( $(date +%s) - s )) s (limit $left): $(grep -E 'conformance on' $O/fz.txt | tr '\n' ' ')" >> $P; grep -E '^FAIL' $O/fz.txt | head -20 >> $P
uptime >> $P; cat $P
