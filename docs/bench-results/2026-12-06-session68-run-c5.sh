#!/bin/bash
# Session 68, call 5 (the warm machine of call 4): the session's 48 fresh conformance files (run-c4.sh's fz/ folder)
# on cuda:0, one file per process, until 290 s after the start. Run from the repository root on the device.
cd devbin/s68b && for f in *.xz; do xz -d -k -f $f; chmod +x ${f%.xz}; done; cd ../..
T0=$(date +%s); mkdir -p $OUT/o
for f in devbin/s68b/fz/*.json.gz; do
  left=$(( 290 - ($(date +%s) - T0) )); [ $left -lt 10 ] && break
  rm -rf /tmp/fzone; mkdir -p /tmp/fzone; cp $f /tmp/fzone/
  STRATA_CONFORMANCE_DIR=$PWD/conformance/pytorch STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fzone timeout $left devbin/s68b/t_conf --include-ignored --nocapture project > /tmp/fz1.txt 2>&1; rc=$?
  echo "$(basename $f) rc $rc $(( $(date +%s) - T0 )) s: $(grep -E 'conformance on cuda:0' /tmp/fz1.txt | tail -1)" >> $OUT/o/fuzz2.txt
  grep -E '^FAIL' /tmp/fz1.txt | head -5 >> $OUT/o/fuzz2.txt
done
cat $OUT/o/fuzz2.txt
