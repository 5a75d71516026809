#!/bin/bash
# Built on the dev VM at e0f44f5: CARGO_TARGET_DIR=/tmp/tgt_gpu cargo test --release -p strata-alloc -p strata-autograd
# -p strata-tensor --features strata-alloc/cuda,strata-autograd/cuda,strata-tensor/cuda --test cuda --test conformance --no-run;
# the test executables stripped, xz-compressed (t_alloc, t_tensor, t_conf / t_autograd) into a carried folder with this script;
# run from the repository root on the device: bash <folder>/run.sh
# Session 57, call 1 (binaries of the HEAD below = e0f44f5): strata-tensor GPU suite (layer_norm zeros fix, CPU
# layer_norm backward), memcheck of its layer_norm/matmul/index tests; strata-alloc GPU suite + memcheck (helper-107's
# changes); conformance replay of the repo's vectors on CPU and cuda:0.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o1; mkdir -p $O
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 40 ./t_alloc --include-ignored > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt | head -20 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $O/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/alloc_mc.txt | tr '\n' ' ')" >> $P
grep -E "Program hit" $O/alloc_mc.txt >> $P
s=$(date +%s); timeout 240 ./t_tensor --include-ignored --test-threads 16 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A3 $O/tensor.txt | head -30 >> $P
for F in layer_norm matmul index; do s=$(date +%s); timeout 70 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 $F > $O/tensor_mc_$F.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_$F.txt | tr '\n' ' ')" >> $P; done
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 120 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
cat $P
