#!/bin/bash
# Session 32, call M2 (one H200, right after M): compute-sanitizer memcheck over PyTorch-oracle programs on cuda:0 with
# this session's conformance binary: the first three fuzz_ops files of each of call G's eight folders (24
# files, 24,000 programs), eight processes at once, each `conformance --exact conformance_runs_on_the_gpu`.
[ -d /tmp/b/f ] || { mkdir -p /tmp/b && tar xJf devbin/s32/f.tar.xz -C /tmp/b; }; B=/tmp/b/f
rm -rf /tmp/m; mkdir -p /tmp/m && tar xJf devbin/s32/m2.tar.xz -C /tmp/m
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  echo "p$i $(ls /tmp/m/mz/p$i | tr '\n' ' ')" >> $P
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/m/mz/p$i timeout 540 compute-sanitizer --tool memcheck --report-api-errors no $B/conformance --exact conformance_runs_on_the_gpu --include-ignored > $OUT/m$i.txt 2>&1; echo "m$i rc $? $(( $(date +%s) - s )) s" >> $P ) &
done
wait
grep -h -E "ERROR SUMMARY|test result" $OUT/m*.txt >> $P
cat $P
