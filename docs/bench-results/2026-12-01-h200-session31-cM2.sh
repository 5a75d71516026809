#!/bin/bash
# Session 31, call M (one H200): compute-sanitizer memcheck over PyTorch-oracle programs on cuda:0 — the first file
# of each of G2's eight folders (seeds 2480-2499: 8 files, 8,000 programs; M2: MODE=rest, the other 32 files with empty, expanded, transposed and
# sliced operands), eight processes at once, each `conformance --exact conformance_runs_on_the_gpu`.
rm -rf /tmp/g; mkdir -p /tmp/g /tmp/m && tar xJf devbin/s31/g2.tar.xz -C /tmp/g
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
P=$OUT/summary.txt; : > $P
s=$(date +%s)
for i in 0 1 2 3 4 5 6 7; do
  mkdir -p /tmp/m/p$i; for f in $(ls /tmp/g/fzs/p$i/*.json | tail -n +2); do cp $f /tmp/m/p$i/; echo "p$i $(basename $f)" >> $P; done
  ( STRATA_CONFORMANCE_PROJECT_DIR=/tmp/m/p$i timeout 480 compute-sanitizer --tool memcheck --report-api-errors no /tmp/g/conformance --exact conformance_runs_on_the_gpu --include-ignored > $OUT/m$i.txt 2>&1; echo "m$i rc $? $(( $(date +%s) - s )) s" >> $P ) &
done
wait
grep -h -E "ERROR SUMMARY|test result" $OUT/m*.txt >> $P
cat $P
