#!/bin/bash
# Built on the dev VM at the HEAD below: CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-autograd
# -p strata-tensor --test cuda --test conformance --no-run; test executables stripped and xz-compressed into a carried
# folder with this script and probe_strides.py (docs/bench-results/2026-12-05-session60-probe_strides.py); run from the
# repository root on the device (traces/ moved out of the tree for the call, to fit the carry limit): bash <folder>/run.sh
# Session 60, call 4: PyTorch's result strides on the CPU and CUDA (mixed-dtype operands); strata-tensor's GPU suite
# with session 60's new ops (shape ops, sort family, scatter family, contractions; never run on a GPU) and the
# layer-norm test change; strata-autograd's GPU suite; conformance of the repo's vectors (strides compared on every
# dim, the CUDA rule for mixed dtypes); memcheck of the new ops' GPU tests.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=$OUT/o4; mkdir -p $O
P=$O/summary.txt; : > $P
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
timeout 60 python3 $B/probe_strides.py >> $P 2>&1
s=$(date +%s); timeout 270 ./t_tensor --include-ignored --test-threads 16 --skip past_2_31 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A4 $O/tensor.txt | head -60 >> $P
grep -E "topk|ms|GB/s" $O/tensor.txt | grep -v "^test " | head -10 >> $P
s=$(date +%s); timeout 60 ./t_tensor --include-ignored --test-threads 1 past_2_31 > $O/tensor_large.txt 2>&1; echo "tensor past_2_31 rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor_large.txt)" >> $P
s=$(date +%s); timeout 40 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -20 >> $P
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 120 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
for F in shape_ops:: sort:: scatter_ops:: contract::; do s=$(date +%s); timeout 45 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 --skip past_2_31 $F > $O/tensor_mc_${F%::}.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_${F%::}.txt | tr '\n' ' ')" >> $P; grep -E "^test .*ok$|Invalid|Program hit" $O/tensor_mc_${F%::}.txt | head -6 >> $P; done
cat $P
