#!/bin/bash
# Built on the dev VM at the HEAD below: CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-autograd
# -p strata-tensor --test cuda --test conformance --no-run (cuda is a default feature); test executables stripped and
# xz-compressed into a carried folder with this script; run from the repository root on the device: bash <folder>/run.sh
# Session 60, call 1 (binaries of 159b545: session 59's strides/order/fraction work, never run on a GPU):
# strata-tensor's GPU suite (the tests past 2^31 elements one at a time), memcheck of its matmul, index, strided-copy,
# element-wise, softmax and layer-norm tests, strata-autograd's GPU suite.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o1; mkdir -p $O
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 250 ./t_tensor --include-ignored --test-threads 16 --skip past_2_31 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A3 $O/tensor.txt | head -40 >> $P
s=$(date +%s); timeout 100 ./t_tensor --include-ignored --test-threads 1 past_2_31 > $O/tensor_large.txt 2>&1; echo "tensor past_2_31 rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor_large.txt)" >> $P
grep -E "FAILED|panicked" -A2 $O/tensor_large.txt | head -20 >> $P
s=$(date +%s); timeout 50 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -20 >> $P
for F in matmul index strided binary_ops softmax layer_norm; do s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_$F.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_$F.txt | tr '\n' ' ')" >> $P; done
cat $P
