#!/bin/bash
# Session 37, call A (one H200): the strata-alloc, strata-tensor and strata-autograd GPU suites (binaries of the
# commit in b/HEAD: helper-34's class-target loss, layer_norm backward and matmul zero-sign fixes, helper-35's
# extrema ops, helper-36's allocator parity fixes), each then under compute-sanitizer memcheck; the shared 407
# programs on the CPU and cuda:0; the project's conformance/ and new oracle seeds (fzs/, PyTorch 2.15 on the dev
# VM's CPU) on cuda:0, 8 processes each, while the suites run.
rm -rf /tmp/b; mkdir -p /tmp/b && tar xJf devbin/s37/b.tar.xz -C /tmp && B=/tmp/b
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
i=0; for f in $(ls -S conformance/*.json); do mkdir -p /tmp/pc/p$((i % 8)); cp $f /tmp/pc/p$((i % 8))/; i=$((i + 1)); done
( s0=$(date +%s)
  for i in 0 1 2 3 4 5 6 7; do
    ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/pc/p$i timeout 300 $B/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/b/pc$i.txt 2>&1; echo "project conformance p$i rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/b/pc$i.txt | tr '\n' ' ')" >> /tmp/b/cs.txt; grep -h "^FAIL" /tmp/b/pc$i.txt | head -5 >> /tmp/b/cs.txt ) &
  done
  ( STRATA_CONFORMANCE_DIR=$B/shared_conformance timeout 300 $B/conformance --exact pytorch_conformance --include-ignored --nocapture > /tmp/b/shared.txt 2>&1; echo "shared conformance rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/b/shared.txt | tr '\n' ' ')" >> /tmp/b/cs.txt ) &
  wait
  if [ -d $B/fzs ]; then
    s0=$(date +%s)
    for i in 0 1 2 3 4 5 6 7; do
      [ -d $B/fzs/p$i ] || continue
      ( STRATA_CONFORMANCE_PROJECT_DIR=$B/fzs/p$i timeout 300 $B/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/b/fz$i.txt 2>&1; echo "new seeds p$i rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/b/fz$i.txt | tr '\n' ' ')" >> /tmp/b/cs.txt; grep -h "^FAIL" /tmp/b/fz$i.txt | head -5 >> /tmp/b/cs.txt ) &
    done
    wait
  fi ) &
CONF=$!
for c in autograd tensor; do
  s=$(date +%s); timeout 240 $B/${c}_cuda --include-ignored --test-threads 8 > $OUT/${c}_cuda.txt 2>&1; echo "${c}_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/${c}_cuda.txt | head -20 >> $P
done
wait $CONF
cat /tmp/b/cs.txt >> $P
if [ -x $B/alloc_cuda ]; then
  s=$(date +%s); timeout 120 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt | head -20 >> $P
fi
for c in alloc autograd tensor; do
  [ -x $B/${c}_cuda ] || continue
  s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda-memcheck.txt 2>&1; echo "${c} memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/${c}_cuda-memcheck.txt >> $P
done
cat $P
