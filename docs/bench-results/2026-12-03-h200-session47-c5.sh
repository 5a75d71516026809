#!/bin/bash
# Session 47, call 5 (one H200), binaries of the HEAD below (the allocator of 1533ab6, the rule after a run at the
# peak, under the tensors): strata-tensor's and strata-autograd's GPU suites.
B=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O
P=$O/summary.txt; : > $P
cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 200 ./t_tensor --include-ignored --test-threads 16 > $O/tensor.txt 2>&1; echo "tensor rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/tensor.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/tensor.txt | head -30 >> $P
s=$(date +%s); timeout 60 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
cd $O && tar cJf $OUT/c5.tar.xz . && cat $P
