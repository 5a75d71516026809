#!/bin/bash
# Session 20, call 4 (one H200): PyTorch 2.11's figures for the synthetic workloads of
# crates/strata-alloc/tests/traces.rs, seeds 1-143 (benches/anchors/torch_synthetic_replay.py, 3 passes, default then
# expandable_segments:True); beside it, the strata-tensor GPU suite (binaries of af07c88) filling the kernel cache for
# the last 80,000 of this session's oracle programs (seeds 720-759) on the CPU and cuda:0.
mkdir -p /tmp/b && tar xJf devbin/s20d.tar.xz -C /tmp/b && B=/tmp/b/s20d
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
( s=$(now); timeout 230 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T
  s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/fz timeout 200 $B/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "conf fz rc $? $(( $(now) - s )) s" >> $T ) &
s=$(now); timeout 250 python3 benches/anchors/torch_synthetic_replay.py 1 143 $OUT/torch_synth_default.json 3 > $OUT/ts1.log 2>&1; echo "torch default rc $? $(( $(now) - s )) s" >> $T
s=$(now); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 250 python3 benches/anchors/torch_synthetic_replay.py 1 143 $OUT/torch_synth_expandable.json 3 > $OUT/ts2.log 2>&1; echo "torch expandable rc $? $(( $(now) - s )) s" >> $T
wait
for f in c2 fz; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL|allow-listed cases" $OUT/$f.txt | head -20 >> $T; done
tail -3 $OUT/ts1.log $OUT/ts2.log >> $T
cat $T
