#!/bin/bash
# Session 35, call F (one H200): the session's final code (binaries of HEAD, see the commit in f/HEAD): the GPU suites
# of strata-alloc, strata-autograd and strata-tensor, each then under compute-sanitizer memcheck; the GPT example
# under autocast-bf16 with every block checkpointed; the shared 407 programs on the CPU and cuda:0; the project's
# conformance/ and the oracle programs of seeds 2980-3019 (80,000, PyTorch 2.15 on the dev VM's CPU) on cuda:0,
# 8 processes each, run one after the other while the suites run.
rm -rf /tmp/f; mkdir -p /tmp/f && tar xJf devbin/s35/f.tar.xz -C /tmp && B=/tmp/f
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
i=0; for f in $(ls -S conformance/*.json); do mkdir -p /tmp/pc/p$((i % 8)); cp $f /tmp/pc/p$((i % 8))/; i=$((i + 1)); done
( s0=$(date +%s)
  for i in 0 1 2 3 4 5 6 7; do
    ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/pc/p$i timeout 300 $B/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/f/pc$i.txt 2>&1; echo "project conformance p$i rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/f/pc$i.txt | tr '\n' ' ')" >> /tmp/f/cs.txt; grep -h "^FAIL" /tmp/f/pc$i.txt | head -5 >> /tmp/f/cs.txt ) &
  done
  ( STRATA_CONFORMANCE_DIR=$B/shared_conformance timeout 300 $B/conformance --exact pytorch_conformance --include-ignored --nocapture > /tmp/f/shared.txt 2>&1; echo "shared conformance rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/f/shared.txt | tr '\n' ' ')" >> /tmp/f/cs.txt ) &
  wait
  s0=$(date +%s)
  for i in 0 1 2 3 4 5 6 7; do
    ( STRATA_CONFORMANCE_PROJECT_DIR=$B/fzs/p$i timeout 300 $B/conformance --exact conformance_runs_on_the_gpu --include-ignored --nocapture > /tmp/f/fz$i.txt 2>&1; echo "seeds 2980-3019 p$i rc $? $(( $(date +%s) - s0 )) s: $(grep -h "conformance on" /tmp/f/fz$i.txt | tr '\n' ' ')" >> /tmp/f/cs.txt; grep -h "^FAIL" /tmp/f/fz$i.txt | head -5 >> /tmp/f/cs.txt ) &
  done
  wait ) &
CONF=$!
for c in autograd tensor; do
  s=$(date +%s); timeout 240 $B/${c}_cuda --include-ignored --test-threads 8 > $OUT/${c}_cuda.txt 2>&1; echo "${c}_cuda rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/${c}_cuda.txt | head -20 >> $P
done
wait $CONF
cat /tmp/f/cs.txt >> $P
s=$(date +%s); timeout 90 $B/alloc_cuda --include-ignored --test-threads 1 > $OUT/alloc_cuda.txt 2>&1; echo "alloc_cuda (alone) rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "test result|FAILED|panicked" $OUT/alloc_cuda.txt >> $P
s=$(date +%s); timeout 100 $B/gpt --precision autocast-bf16 --checkpoint every > $OUT/gpt.txt 2>&1; echo "gpt rc $? $(( $(date +%s) - s )) s" >> $P; tail -1 $OUT/gpt.txt | grep -oE '"loss_last":[0-9.]+|"step_ms":[0-9.]+|"peak_reserved":[0-9]+' | tr '\n' ' ' >> $P; echo >> $P
for c in alloc autograd tensor; do
  s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/${c}_cuda --include-ignored --test-threads 1 > $OUT/${c}_cuda-memcheck.txt 2>&1; echo "${c} memcheck rc $? $(( $(date +%s) - s )) s" >> $P; grep -E "ERROR SUMMARY|test result|FAILED" $OUT/${c}_cuda-memcheck.txt >> $P
done
cat $P
