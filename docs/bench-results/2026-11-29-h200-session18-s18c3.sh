#!/bin/bash
# Session 18, call 3 (one H200): binaries of acf13d7. (1) 160,000 more PyTorch-oracle programs on the CPU and cuda:0:
# the 80,000 of session 17 (ops seeds 100-109, 120-134, 150-164; core 110-119, 135-149, 165-179, drawn again with
# PyTorch 2.15 on the dev VM: session 17 replayed them on the CPU only) and 80,000 new ones (both generators, seeds
# 260-299), with the strata-tensor GPU suite filling the kernel cache in parallel. (2) The allocator's warm cost on
# this host: `replay --passes 5 --warmup 2` over the 17 traces on the simulated device and on the GPU, one after the
# other, then both again pinned to one core (`taskset -c 5`), to tell the device path's own cost from the host's.
mkdir -p /tmp/b && tar xJf devbin/s18c.tar.xz -C /tmp/b && B=/tmp/b/s18c
T=$OUT/tests.txt; : > $T
now() { date +%s; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
( s=$(now); timeout 240 $B/c2 --include-ignored --test-threads=8 > $OUT/c2.txt 2>&1; echo "c2 (tensor gpu) rc $? $(( $(now) - s )) s" >> $T ) &
for d in fzr_a fzr_b fzn_a fzn_b; do
  s=$(now); STRATA_CONFORMANCE_PROJECT_DIR=$B/$d timeout 200 $B/conf project_conformance --nocapture > $OUT/conf_$d.txt 2>&1
  echo "conf $d rc $? $(( $(now) - s )) s" >> $T
done
wait
R="$B/replay --json --passes 5 --warmup 2 $B/traces/*.default.json.gz"
for run in sim cuda; do s=$(now); $R --device $run > $OUT/replay_$run.json 2> $OUT/replay_$run.err; echo "replay $run rc $? $(( $(now) - s )) s" >> $T; done
for run in sim cuda; do s=$(now); taskset -c 5 $R --device $run > $OUT/replay_${run}_pinned.json 2> $OUT/replay_${run}_pinned.err; echo "replay $run pinned rc $? $(( $(now) - s )) s" >> $T; done
for f in c2 conf_fzr_a conf_fzr_b conf_fzn_a conf_fzn_b; do echo "## $f" >> $T; grep -E "test result|FAILED|panicked|conformance on|^FAIL" $OUT/$f.txt | head -20 >> $T; done
python3 - "$OUT" >> $T <<'PY'
import json, sys, glob, os
out = sys.argv[1]
def load(p):
    rows = {}
    for line in open(p):
        line = line.strip()
        if line.startswith('{'):
            try:
                d = json.loads(line)
            except Exception:
                continue
            rows[d.get('trace') or d.get('name')] = d
    return rows
runs = {k: load(os.path.join(out, f'replay_{k}.json')) for k in ['sim', 'cuda', 'sim_pinned', 'cuda_pinned']}
print('trace | sim | cuda | sim pinned | cuda pinned (ns/op, median of warm passes)')
for name in sorted(runs['cuda']):
    print(name, '|', ' | '.join(str(runs[k].get(name, {}).get('ns_per_op')) for k in runs))
PY
cat $T
