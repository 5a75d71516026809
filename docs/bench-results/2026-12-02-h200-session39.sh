#!/bin/bash
# Session 39, one call (one H200), binaries of the commit in b/HEAD: the strata-autograd and strata-tensor GPU
# suites, each then under compute-sanitizer memcheck; the shared 407 programs on the CPU and cuda:0; the project's
# conformance/ and new oracle seeds 3142-3151 (fzs/, PyTorch 2.15 on the dev VM's CPU) on cuda:0, 8 processes
# each, while the suites run. strata-alloc and the replay are unchanged since session 38's call (1bed5ba) and are
# not run again.
rm -rf /tmp/b; mkdir -p /tmp/b && tar xJf devbin/s39/b.tar.xz -C /tmp && B=/tmp/b
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; nproc >> $P; cat $B/HEAD >> $P
i=0; for f in $(ls -S conformance/*.json); do mkdir -p /tmp/pc/p$((i % 8)); cp $f /tmp/pc/p$((i % 8))/; i=$((i + 1)); done
( s0=$(date +%s)
  for i in 0 1 2 3 4 5 6 7; do
    ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/pc/p$i timeout 300 $B/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/b/pc$i.txt 2>&1; echo "project conformance p$i rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/b/pc$i.txt | tr '\n' ' ')" >> /tmp/b/cs.txt; grep -h "^FAIL" /tmp/b/pc$i.txt | head -5 >> /tmp/b/cs.txt ) &
  done
  ( STRATA_CONFORMANCE_DIR=$B/shared_conformance timeout 300 $B/conformance --exact pytorch_conformance --include-ignored --nocapture > /tmp/b/shared.txt 2>&1; echo "shared conformance rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/b/shared.txt | tr '\n' ' ')" >> /tmp/b/cs.txt ) &
  wait
  s0=$(date +%s)
  for i in 0 1 2 3 4 5 6 7; do
    ( STRATA_CONFORMANCE_PROJECT_DIR=$B/fzs/p$i timeout 300 $B/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/b/fz$i.txt 2>&1; echo "new seeds p$i rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/b/fz$i.txt | tr '\n' ' ')" >> /tmp/b/cs.txt; grep -h "^FAIL" /tmp/b/fz$i.txt | head -5 >> /tmp/b/cs.txt ) &
  done
  wait ) &
CONF=$!
for c in autograd tensor; do
  s=$(date +%s); timeout 240 $B/${c}_cuda --include-ignored --test-threads 8 > $OUT/${c}_cuda.txt 2>&1; echo "${c}_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/${c}_cuda.txt | head -20 >> $P
done
wait $CONF
cat /tmp/b/cs.txt >> $P
for c in autograd tensor; do
  s=$(date +%s); timeout 180 compute-sanitizer --tool memcheck --report-api-errors no $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda-memcheck.txt 2>&1; echo "${c} memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/${c}_cuda-memcheck.txt >> $P
done
cat $P
