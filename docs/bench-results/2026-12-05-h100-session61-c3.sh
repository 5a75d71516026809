#!/bin/bash
# Built on the dev VM at the HEAD below: CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-autograd
# -p strata-tensor --test cuda --test conformance --no-run; test executables stripped and xz-compressed into a carried
# folder with this script; run from the repository root on the device (traces/ moved out of the tree for the call, to fit
# the carry limit): bash <folder>/run.sh
# Session 61, call 3: strata-tensor's GPU suite with to(device) keeping PyTorch's layout (and its new test) and the
# scatter_reduce/index_put tolerances of call 1's failure; memcheck of the transfer and scatter tests; strata-autograd's
# GPU suite; conformance (strides on every dim; the GPU inputs now laid out as PyTorch lays them out).
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o3; mkdir -p $O
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 280 ./t_tensor --include-ignored --test-threads 16 --skip past_2_31 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A4 $O/tensor.txt | head -60 >> $P
s=$(date +%s); timeout 40 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -20 >> $P
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 100 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
for F in transfers scatter_ops::; do s=$(date +%s); timeout 50 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_${F%::}.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_${F%::}.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/tensor_mc_${F%::}.txt | head -6 >> $P; done
cat $P
