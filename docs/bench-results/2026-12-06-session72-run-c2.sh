#!/bin/bash
# Session 72, call 2: the eight files session 72 added to conformance/ (six with one program allow-listed on cuda, the arange fix, arange_s72) with
# STRATA_CONFORMANCE_STRIDES=all; then 130 fuzz files not yet run on a GPU (fz/: fuzz_conformance_s55/s56/s58/s59/s63
# seeds 7147-7168, fuzz_conformance_core/ops seeds 7140-7149; PyTorch 2.15 CPU answers, all passing on the dev VM's
# CPU in sessions 71-72) under the format's rule, four at a time, until LIM s. t_conf of 40b5acb.
T0=$(date +%s); B=$(cd "$(dirname "$0")" && pwd); R=$(pwd); LIM=${LIM:-400}
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=$OUT; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
mkdir -p /tmp/cf6; for f in fuzz_s56_seed7130 fuzz_s56_seed7140 fuzz_s59_seed7129 fuzz_s59_seed7146 fuzz_s63_seed7141 fuzz_s63_seed7146 fuzz_s63_seed7164 arange_s72; do ln -sf $R/conformance/$f.json.gz /tmp/cf6/; done
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/cf6 timeout 100 $B/t_conf --include-ignored --nocapture project > $O/six.txt 2>&1
echo "eight files rc $? $(( $(date +%s) - s )) s: $(grep -E 'conformance on' $O/six.txt | tr '\n' ' ')" >> $P; grep -E '^FAIL' $O/six.txt | head >> $P
run1() { f=$1; n=$(basename $f .json.gz); d=/tmp/fz_$n; mkdir -p $d; cp $f $d/
  left=$(( LIM - ($(date +%s) - T0) )); [ $left -lt 20 ] && return
  STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$d timeout $left $B/t_conf --include-ignored --nocapture project > $d/out.txt 2>&1; rc=$?
  echo "$n rc $rc $(( $(date +%s) - T0 )) s: $(grep -E 'conformance on' $d/out.txt | tr '\n' ' ')" >> $O/fuzz.txt; grep -E '^FAIL' $d/out.txt | head -5 >> $O/fuzz.txt; }
export -f run1; export LIM T0 B R O
ls $B/fz/*.json.gz | xargs -P 4 -I{} bash -c 'run1 {}'
echo "fuzz files run $(grep -c ' rc ' $O/fuzz.txt) of $(ls $B/fz | wc -l), rc 0: $(grep -c ' rc 0 ' $O/fuzz.txt), FAIL lines $(grep -c '^FAIL' $O/fuzz.txt)" >> $P
python3 - $O/fuzz.txt >> $P <<'PY'
import re, sys
tot = {}
for m in re.finditer(r'conformance on (\S+): (\d+)/(\d+) passed', open(sys.argv[1]).read()):
    d = tot.setdefault(m.group(1), [0, 0]); d[0] += int(m.group(2)); d[1] += int(m.group(3))
for k, v in tot.items(): print(f"fuzz total {k} {v[0]}/{v[1]}")
PY
uptime >> $P; cat $P
