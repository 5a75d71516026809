#!/bin/bash
# Session 35, call A (one H200), binaries of bb2e518 (CUDA sums merge neighbouring lanes first; d5c9021's host-side
# mend underneath): the GPU suites of strata-alloc, strata-autograd, strata-tensor, each then under compute-sanitizer
# memcheck; PyTorch on cuda:0 for session 34's two failing oracle programs; the shared 407 programs on the CPU and
# cuda:0; the project's conformance/ (26,168 programs) on cuda:0, split over 8 processes.
rm -rf /tmp/a; mkdir -p /tmp/a && tar xJf devbin/s35/a.tar.xz -C /tmp && B=/tmp/a
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
python3 $B/torch_cases.py >> $P 2>&1
# the project's conformance/ on cuda:0, 8 processes, in the background while the suites run
mkdir -p /tmp/pc; i=0; for f in $(ls -S conformance/*.json); do mkdir -p /tmp/pc/p$((i % 8)); cp $f /tmp/pc/p$((i % 8))/; i=$((i + 1)); done
s0=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/pc/p$i timeout 300 $B/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > $OUT/pc$i.txt 2>&1; echo "project conformance p$i rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" $OUT/pc$i.txt | tr '\n' ' ')" >> $OUT/pc_summary.txt; grep -h "^FAIL" $OUT/pc$i.txt | head -5 >> $OUT/pc_summary.txt ) &
done
( STRATA_CONFORMANCE_DIR=$B/shared_conformance timeout 300 $B/conformance --exact pytorch_conformance --include-ignored --nocapture > $OUT/shared.txt 2>&1; echo "shared conformance rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" $OUT/shared.txt | tr '\n' ' ')" >> $OUT/pc_summary.txt ) &
for c in alloc autograd; do
  s=$(date +%s); timeout 90 $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda.txt 2>&1; echo "${c}_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/${c}_cuda.txt >> $P
  s=$(date +%s); timeout 90 compute-sanitizer --tool memcheck --report-api-errors no $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda-memcheck.txt 2>&1; echo "${c} memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result" $OUT/${c}_cuda-memcheck.txt >> $P
done
s=$(date +%s); timeout 240 $B/tensor_cuda --include-ignored --test-threads 8 > $OUT/tensor_cuda.txt 2>&1; echo "tensor_cuda (8 threads) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked|cancelling" $OUT/tensor_cuda.txt | head -20 >> $P
wait
cat $OUT/pc_summary.txt >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/tensor_cuda --include-ignored --test-threads 1 > $OUT/tensor_cuda-memcheck.txt 2>&1; echo "tensor memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/tensor_cuda-memcheck.txt >> $P
cat $P
