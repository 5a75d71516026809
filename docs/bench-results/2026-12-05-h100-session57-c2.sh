#!/bin/bash
# Built on the dev VM at e0f44f5: CARGO_TARGET_DIR=/tmp/tgt_gpu cargo test --release -p strata-alloc -p strata-autograd
# -p strata-tensor --features strata-alloc/cuda,strata-autograd/cuda,strata-tensor/cuda --test cuda --test conformance --no-run;
# the test executables stripped, xz-compressed (t_alloc, t_tensor, t_conf / t_autograd) into a carried folder with this script;
# run from the repository root on the device: bash <folder>/run.sh
# Session 57, call 2: strata-autograd GPU suite + memcheck (HEAD below); forward oracle seeds 3314-3323 replayed by t_conf of call 1 if still present.
B=$(cd "$(dirname "$0")" && pwd)
O=$OUT/o2; mkdir -p $O
P=$O/summary.txt; : > $P
cd $B && xz -d -k -f t_autograd.xz && chmod +x t_autograd
nvidia-smi --query-gpu=name --format=csv,noheader >> $P; cat $B/HEAD >> $P
s=$(date +%s); timeout 90 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $O/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/autograd_mc.txt | tr '\n' ' ')" >> $P
cat $P
