#!/bin/bash
# Session 72, call 1: strata-autograd's GPU suite of 7e16794 (the clip_grad_norm_ fix of session 71) and the same
# under compute-sanitizer memcheck; then the repository's conformance folder (session 71's twelve files allow-listed
# on cuda) with STRATA_CONFORMANCE_STRIDES=all, split by file over four processes (each runs cpu and cuda:0); then
# 110 fuzz files not yet run on a GPU (fz/: fuzz_conformance_s55/s56/s58/s59/s63 seeds 7129-7146,
# fuzz_conformance_core/ops seeds 7130-7139; PyTorch 2.15 CPU answers) under the format's rule, four at a time,
# until LIM s. t_conf: b78fed7 + the allow-list (tensor code unchanged since).
T0=$(date +%s); B=$(cd "$(dirname "$0")" && pwd); R=$(pwd); LIM=${LIM:-400}
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=$OUT; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 120 $B/t_agcuda --include-ignored > $O/agcuda.txt 2>&1; echo "autograd cuda rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/agcuda.txt)" >> $P
s=$(date +%s); timeout 200 compute-sanitizer --tool memcheck $B/t_agcuda --include-ignored --test-threads 1 > $O/agcuda_memcheck.txt 2>&1; echo "autograd cuda memcheck rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/agcuda_memcheck.txt) $(grep 'ERROR SUMMARY' $O/agcuda_memcheck.txt)" >> $P
i=0; for f in $(ls -S $R/conformance/*.json $R/conformance/*.json.gz); do d=/tmp/cf$((i % 4)); mkdir -p $d; ln -sf $f $d/; i=$((i+1)); done
s=$(date +%s)
for k in 0 1 2 3; do (STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/cf$k timeout 150 $B/t_conf --include-ignored --nocapture project > $O/conf$k.txt 2>&1; echo "part $k rc $?" >> $O/conf$k.txt) & done; wait
echo "conformance folder (strides all, 4 parts) $(( $(date +%s) - s )) s" >> $P
for k in 0 1 2 3; do echo "part $k: $(grep -E 'conformance on|rc ' $O/conf$k.txt | tr '\n' ' ')" >> $P; grep -E '^FAIL' $O/conf$k.txt | head -5 >> $P; done
python3 - $O >> $P <<'PY'
import re, sys, glob
tot = {}
for f in glob.glob(sys.argv[1] + '/conf?.txt'):
    for m in re.finditer(r'conformance on (\S+): (\d+)/(\d+) passed, (\d+) allow-listed, (\d+) unexpected', open(f).read()):
        d = tot.setdefault(m.group(1), [0, 0, 0, 0])
        for j in range(4): d[j] += int(m.group(j + 2))
for k, v in tot.items(): print(f"folder total {k} {v[0]}/{v[1]} passed, {v[2]} allow-listed, {v[3]} unexpected")
PY
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
