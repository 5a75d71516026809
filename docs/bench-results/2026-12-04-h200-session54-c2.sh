#!/bin/bash
# Session 54, call 2 (one H200), binaries of the HEAD below plus the session's working tree: strata-tensor's GPU
# suite (session 54: CPU cross_entropy f32 in PyTorch's order, outer-dim sums in PyTorch's order, f16/bf16 gelu; the
# CUDA cross-entropy kernel's arguments gained two fields it ignores) and memcheck of its matmul, index and
# cross_entropy tests; the conformance replay on the CPU and cuda:0 of oracle seeds 3296-3301 (12,000 programs,
# gzipped) and of the repo's vectors; strata-alloc's GPU suite (cache_info) and memcheck; strata-autograd's GPU suite
# (first .grad laid out by PyTorch's layout contract, DDP bucket views likewise, GradScaler counts a failed step's
# check) and memcheck.
B=$(cd "$(dirname "$0")" && pwd)
R=$(pwd)
O=/tmp/o2; mkdir -p $O
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 260 ./t_tensor --include-ignored --test-threads 16 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked|has been running" -A3 $O/tensor.txt | head -30 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$B/f timeout 150 ./t_conf --include-ignored --nocapture project_conformance > $O/conf_new.txt 2>&1; echo "conformance (seeds 3296-3301) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf_new.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf_new.txt | head -10 >> $P
s=$(date +%s); STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 120 ./t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked" $O/conf.txt | head -10 >> $P
for F in matmul index cross_entropy; do s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_tensor --include-ignored --test-threads 1 $F > $O/tensor_mc_$F.txt 2>&1; echo "tensor memcheck $F rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/tensor_mc_$F.txt | tr '\n' ' ')" >> $P; done
s=$(date +%s); timeout 40 ./t_alloc --include-ignored > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt | head -20 >> $P
s=$(date +%s); timeout 60 compute-sanitizer --tool memcheck ./t_alloc --include-ignored --test-threads 1 > $O/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/alloc_mc.txt | tr '\n' ' ')" >> $P
grep -E "Program hit" $O/alloc_mc.txt >> $P
s=$(date +%s); timeout 60 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $O/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/autograd_mc.txt | tr '\n' ' ')" >> $P
cd $O && tar cJf $OUT/c2.tar.xz . && cat $P
