#!/bin/bash
# Session 74, call 2: binaries of the HEAD in HEAD (built on the dev VM with
#   CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-tensor -p strata-autograd --no-run ; stripped, xz):
# the activations_s74 and losses_s74 fixtures on cuda:0 (first: a warm-up for the kernels' first-use compile), strata-autograd's
# activations_grad_s74, losses_grad_s74, math_grad_s74 and norms_s74 on cuda:0, compute-sanitizer memcheck of the session-74
# fixtures on cuda:0 (tests named *_match_pytorch_on_a_gpu), then
# conformance/ with strides on every dim on cuda:0 and cpu (the element-wise table gained rows).
T0=$(date +%s); B=$(cd "$(dirname "$0")" && pwd); R=$(pwd); LIM=${LIM:-560}
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=$OUT; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 240 $B/t_tsuite --include-ignored --test-threads 8 activations_s74 losses_s74 > $O/act.txt 2>&1; echo "activations_s74 + losses_s74 gpu+cpu (first: warm-up compile) rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/act.txt)" >> $P; grep -E "FAILED|panicked|differ|^case" -A2 $O/act.txt | cut -c1-600 | head -20 >> $P
s=$(date +%s); timeout 150 $B/t_agsuite --include-ignored --test-threads 8 activations_grad_s74 losses_grad_s74 math_grad_s74 norms_s74 > $O/gact.txt 2>&1; echo "activations_grad + losses_grad + math_grad + norms gpu+cpu rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/gact.txt)" >> $P; grep -E "FAILED|panicked|differ" -A2 $O/gact.txt | cut -c1-600 | head -20 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck $B/t_tsuite --include-ignored --test-threads 1 _match_pytorch_on_a_gpu > $O/mc1.txt 2>&1; echo "memcheck activations, losses, math gpu rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/mc1.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/mc1.txt | sort | uniq -c | head -5 >> $P
[ -x $B/t_conf ] && left=$(( LIM - ($(date +%s) - T0) )); s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout $left $B/t_conf --include-ignored --nocapture project > $O/conf.txt 2>&1
echo "conformance/ strides=all rc $? $(( $(date +%s) - s )) s (limit $left): $(grep -E 'conformance on' $O/conf.txt | tr '\n' ' ')" >> $P; grep -E '^FAIL' $O/conf.txt | head >> $P
uptime >> $P; cat $P
