#!/bin/bash
# Session 48, call 2 (one H200), binaries of the HEAD below (440d7bf/05055a5: failed optimizer steps change
# nothing, the scale and gradients checked before step_with_grad_scale divides them): strata-autograd's GPU suite
# and the same under compute-sanitizer memcheck; then the GPT example beside torch_gpt.py, f32 and
# autocast-bf16, default sizes (the allocator of 31a64d4 under a training loop). Outputs in one archive.
B=$(cd "$(dirname "$0")" && pwd)
O=/tmp/o; mkdir -p $O
P=$O/summary.txt; : > $P
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $P; cat $B/HEAD >> $P
cd $B
s=$(date +%s); timeout 90 ./t_autograd --include-ignored --test-threads 8 > $O/autograd.txt 2>&1; echo "autograd rc $? $(( $(date +%s) - s )) s $(grep '^test result' $O/autograd.txt)" >> $P
grep -E "FAILED|panicked" -A3 $O/autograd.txt | head -30 >> $P
s=$(date +%s); timeout 120 compute-sanitizer --tool memcheck ./t_autograd --include-ignored --test-threads 1 > $O/autograd_mc.txt 2>&1; echo "autograd memcheck rc $? $(( $(date +%s) - s )) s $(grep -E 'ERROR SUMMARY|^test result' $O/autograd_mc.txt | tr '\n' ' ')" >> $P
for pr in f32 autocast-bf16; do
s=$(date +%s); STRATA_DEVICE=cuda timeout 40 ./gpt --precision $pr > $O/gpt_strata_$pr.txt 2>&1; echo "gpt strata $pr rc $? $(( $(date +%s) - s )) s" >> $P; tail -1 $O/gpt_strata_$pr.txt | head -c 300 >> $P; echo >> $P
s=$(date +%s); timeout 60 python3 ./torch_gpt.py --precision $pr > $O/gpt_torch_$pr.txt 2>&1; echo "gpt torch $pr rc $? $(( $(date +%s) - s )) s" >> $P; tail -1 $O/gpt_torch_$pr.txt >> $P
done
cd $O && tar cJf $OUT/c2.tar.xz . && cat $P
