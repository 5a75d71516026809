#!/bin/bash
# Session 21, call 4 (one H200): is call 3's slower strata replay the machine or the code? The replay binaries of
# af07c88 (session 20, devbin/s20a) and 7dbc871 (devbin/s21a) run alternately, twice each, 5 passes on the 17 traces
# of session 20 (`*.default`: 5 shared, 12 of traces/), with the CPU's frequency and load noted before each run.
mkdir -p /tmp/b && tar xJf devbin/s20a.tar.xz -C /tmp/b && tar xJf devbin/s21a.tar.xz -C /tmp/b
mkdir -p /tmp/ta && cp traces/*.default.json.gz /tmp/b/s21a/straces/*.default.json.gz /tmp/ta/
P=$OUT/replay.txt; : > $P
for r in 1 2; do for v in s20a s21a; do
  echo "# $v run $r" >> $P; cat /proc/loadavg >> $P; grep MHz /proc/cpuinfo | head -4 | tr '\n' ' ' >> $P; echo >> $P
  timeout 100 /tmp/b/$v/replay --device cuda --json --passes 5 --warmup 2 /tmp/ta/*.default.json.gz >> $P 2>&1; echo "rc $?" >> $P
done; done
grep "^rc\|^#" $P
