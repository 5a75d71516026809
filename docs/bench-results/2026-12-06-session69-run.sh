#!/bin/bash
# Session 69 on the device, from the repository root, *.expandable traces and held_out5 moved out (benches/device_trim.sh out).
# Binaries of 35fce38 (CARGO_TARGET_DIR=/tmp/tgt_main cargo test --release -p strata-alloc -p strata-tensor -p strata-autograd --test cuda --test conformance --no-run; stripped, xz).
# 1: the repository's conformance vectors with strides on every dim (cpu and cuda:0; session 68's five newly allow-listed cases), then
#    the session's 38 fresh fuzz files (fz/, one per process) on cuda:0 until 560 s after the start.
# 2: the fuzz files mode 1 left, strata-alloc and strata-autograd GPU suites, alloc memcheck.
B=$(cd "$(dirname "$0")" && pwd); R=$(pwd); T0=$(date +%s)
cd $B && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd $R
O=$OUT/o$1; mkdir -p $O; P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $P; head -1 $B/HEAD >> $P; uptime >> $P
if [ "$1" = 1 ]; then
s=$(date +%s); STRATA_CONFORMANCE_STRIDES=all STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=$R/conformance timeout 420 $B/t_conf --include-ignored --nocapture > $O/conf.txt 2>&1; echo "conformance (repo, strides all) rc $? $(( $(date +%s) - s )) s $(grep -E '^test result|conformance on' $O/conf.txt | tr '\n' ' ')" >> $P
grep -E "^FAIL|panicked|unexpected" $O/conf.txt | grep -v ' 0 unexpected' | head -20 >> $P
LIM=560
fi
if [ "$1" = 2 ]; then LIM=330; fi
mkdir -p /tmp/fzdone
for f in $B/fz/*.json.gz; do
  n=$(basename $f); [ -f /tmp/fzdone/$n ] && continue
  left=$(( LIM - ($(date +%s) - T0) )); [ $left -lt 15 ] && break
  rm -rf /tmp/fzone; mkdir -p /tmp/fzone; cp $f /tmp/fzone/
  STRATA_CONFORMANCE_DIR=$R/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fzone timeout $left $B/t_conf --include-ignored --nocapture project > /tmp/fz1.txt 2>&1; rc=$?
  [ $rc -ne 124 ] && touch /tmp/fzdone/$n
  echo "$n rc $rc $(( $(date +%s) - T0 )) s: $(grep -E 'conformance on cuda:0' /tmp/fz1.txt | tail -1)" >> $O/fuzz.txt
  grep -E '^FAIL' /tmp/fz1.txt | head -5 >> $O/fuzz.txt
done
if [ "$1" = 2 ]; then
s=$(date +%s); timeout 60 $B/t_alloc --include-ignored --test-threads 4 > $O/alloc.txt 2>&1; echo "alloc rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/alloc.txt)" >> $P
s=$(date +%s); timeout 60 $B/t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/alloc.txt $O/autograd.txt | head -20 >> $P
s=$(date +%s); timeout 150 compute-sanitizer --tool memcheck $B/t_alloc --include-ignored --test-threads 1 > $O/alloc_mc.txt 2>&1; echo "alloc memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/alloc_mc.txt | tr '\n' ' ')" >> $P; grep -E "Invalid|Program hit" $O/alloc_mc.txt | sort | uniq -c | head -8 >> $P
fi
echo "fuzz files done $(ls /tmp/fzdone | wc -l) of $(ls $B/fz | wc -l)" >> $P
uptime >> $P
cat $P; tail -4 $O/fuzz.txt 2>/dev/null
