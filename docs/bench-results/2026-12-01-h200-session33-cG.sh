#!/bin/bash
# Session 33, call G (one H200): PyTorch-oracle programs on cuda:0: seeds 2620-2739 of
# fuzz_conformance_core.py (120,000 programs, PyTorch 2.15 on the dev VM's CPU; call G2: fuzz_conformance_ops.py's),
# in 8 parallel processes of `conformance conformance_runs_on_the_gpu` (one folder of 15 files each, binary of a49a1f3, the tensor code of
# this session's head), sharing one kernel cache; then strata-alloc's GPU tests under memcheck with and without
# --report-api-errors no, listing what the sanitizer reports.
rm -rf /tmp/g; mkdir -p /tmp/g; tar xJf devbin/s33/g.tar.xz -C /tmp/g
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/g/g/fzs/p$i timeout ${T:-420} /tmp/g/g/conformance --exact conformance_runs_on_the_gpu --include-ignored > $OUT/p$i.txt 2>&1; echo "p$i rc $? $(( $(date +%s) - s )) s" >> $P ) &
done
wait
grep -h "conformance on\|test result" $OUT/p*.txt >> $P
grep -h -o "fuzz_[a-z]*\.s[0-9]*_[a-z_0-9]*" $OUT/p*.txt | sort -u | head -40 >> $P
ls /tmp/kc | wc -l >> $P
M=$OUT/memcheck.txt; : > $M
echo "# memcheck --report-api-errors no" >> $M; timeout 60 compute-sanitizer --tool memcheck --report-api-errors no /tmp/g/g/alloc_cuda --include-ignored --test-threads 1 2>&1 | grep -E "ERROR SUMMARY|test result" >> $M
echo "# memcheck (default)" >> $M; timeout 60 compute-sanitizer --tool memcheck /tmp/g/g/alloc_cuda --include-ignored --test-threads 1 > /tmp/mc.txt 2>&1; grep -E "Program hit|^test |=========     Host Frame" /tmp/mc.txt | grep -v "Host Frame" | head -60 >> $M; grep -E "ERROR SUMMARY" /tmp/mc.txt >> $M
cat $P $M
