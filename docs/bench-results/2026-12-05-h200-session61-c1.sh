#!/bin/bash
# Built on the dev VM at the HEAD below: CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-autograd
# -p strata-tensor --test cuda --test conformance --no-run; test executables stripped and xz-compressed into a carried
# folder with this script; run from the repository root on the device (traces/ moved out of the tree for the call, to fit
# the carry limit): bash <folder>/run.sh
# Session 61, call 1: strata-tensor's GPU suite at df76661 (session 60's three test fixes never ran on a GPU: the rest of
# the scatter family's GPU test, the sort test's edge shapes, the layer-norm bf16 tolerance), memcheck of the sort and
# scatter families and layer norm, strata-autograd GPU suite, conformance.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o1; mkdir -p $O
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 280 ./t_tensor --include-ignored --test-threads 16 --skip past_2_31 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A4 $O/tensor.txt | head -60 >> $P
s=$(date +%s); timeout 40 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -20 >> $P
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 100 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
for F in sort:: scatter_ops:: layer_norm; do s=$(date +%s); timeout 50 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_${F%::}.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_${F%::}.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/tensor_mc_${F%::}.txt | head -6 >> $P; done
cat $P
