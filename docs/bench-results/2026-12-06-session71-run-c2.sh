#!/bin/bash
# Session 71, call 2: strata-tensor's GPU suite of b78fed7 (its allocator) with a longer limit, then the 100 fresh
# conformance fuzz files (fz/: seeds 7109-7128 of fuzz_conformance_s55/s56/s58/s59/s63) on cpu and cuda:0 with t_conf
# of b78fed7, four files at a time, until LIM s.
T0=$(date +%s); B=$(cd "$(dirname "$0")" && pwd); R=$(pwd); LIM=${LIM:-560}
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=$OUT; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; head -1 $B/HEAD >> $P; uptime >> $P
s=$(date +%s); timeout 240 $B/t_tcuda --include-ignored --test-threads 8 > $O/tcuda.txt 2>&1; echo "tensor cuda rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tcuda.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/tcuda.txt | head -20 >> $P
run1() { f=$1; n=$(basename $f .json.gz); d=/tmp/fz_$n; mkdir -p $d; cp $f $d/
  left=$(( LIM - ($(date +%s) - T0) )); [ $left -lt 20 ] && return
  STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$d timeout $left $B/t_conf --include-ignored --nocapture project > $d/out.txt 2>&1; rc=$?
  echo "$n rc $rc $(( $(date +%s) - T0 )) s: $(grep -E 'conformance on' $d/out.txt | tr '\n' ' ')" >> $O/fuzz.txt; grep -E '^FAIL' $d/out.txt | head -5 >> $O/fuzz.txt; }
export -f run1; export LIM T0 B R O
ls $B/fz/*.json.gz | xargs -P 4 -I{} bash -c 'run1 {}'
echo "fuzz files run $(grep -c ' rc ' $O/fuzz.txt) of $(ls $B/fz | wc -l), rc 0: $(grep -c ' rc 0 ' $O/fuzz.txt), FAIL lines $(grep -c '^FAIL' $O/fuzz.txt)" >> $P
uptime >> $P; cat $P
