#!/bin/bash
# Session 33, call C2 (one H200): the GPT's five configurations at this session's head (a49a1f3), `gpt` beside
# torch_gpt.py (seed 0, 12 layers, d 768, batch 8 x 1024, vocab 8192, 10 steps after 3 warm-up), strata first.
[ -d /tmp/c/c ] || { rm -rf /tmp/c; mkdir -p /tmp/c && tar xJf devbin/s33/c.tar.xz -C /tmp/c; }; B=/tmp/c/c
export STRATA_KERNEL_CACHE_PATH=/tmp/kc
G=$OUT/gpt.jsonl; : > $G
s=$(date +%s)
for c in "--precision f32 --checkpoint every" "--precision f32" "--precision bf16" "--precision autocast-bf16" "--precision autocast-bf16 --checkpoint every"; do
  echo "# gpt $c t $(( $(date +%s) - s ))" >> $G; timeout 60 $B/gpt $c >> $G 2>&1; timeout 60 python3 $B/torch_gpt.py $c >> $G 2>&1
done
echo "# end t $(( $(date +%s) - s ))" >> $G
grep -c '"impl"' $G; grep "^#" $G
