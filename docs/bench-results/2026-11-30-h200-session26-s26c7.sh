#!/bin/bash
# Session 26, call 7 (one H200): the conformance binary of 6c59a74 (tensor code unchanged since) on 60,000 more oracle
# programs (seeds 2170-2199 of both generators) on the CPU and cuda:0, within what is left of the session's device time.
mkdir -p /tmp/b && tar xJf devbin/s26/g.tar.xz -C /tmp/b && mkdir -p /tmp/fz && tar xJf /tmp/b/g/fz.tar.xz -C /tmp/fz
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
s=$(date +%s); STRATA_CONFORMANCE_PROJECT_DIR=/tmp/fz/s26b timeout 200 /tmp/b/g/conf project_conformance --nocapture > $OUT/fz.txt 2>&1; echo "rc $? $(( $(date +%s) - s )) s"
grep -E "conformance on|test result|FAIL" $OUT/fz.txt | head -20
