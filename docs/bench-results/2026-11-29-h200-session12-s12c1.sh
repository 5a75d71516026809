#!/bin/bash
# Session 12, call 1 (one H200): the on-disk kernel cache (42bac40). strata-tensor GPU tests with a cold cache,
# then warm, then with three entries damaged (e_machine changed: the driver must refuse them, strata must
# compile them afresh); the small GPT cold and warm; memcheck on the small GPT with a warm cache; strata-alloc
# GPU tests.
cd devbin
T=$OUT/tests.txt; : > $T
now() { date +%s.%N; }
el() { python3 -c "print(f'{$(now) - $1:.1f}')"; }
export STRATA_KERNEL_CACHE_PATH=/tmp/kc; rm -rf /tmp/kc /tmp/kc2
echo "# tensor_cuda, cold cache" >> $T; s=$(now); timeout 220 ./n/c2 --include-ignored --test-threads=8 > $OUT/c2_cold.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T
grep -E "test result|FAILED|panicked" $OUT/c2_cold.txt | head -5 >> $T
echo "entries $(ls /tmp/kc | grep -c cubin$) other files $(ls /tmp/kc | grep -vc cubin$) bytes $(du -sb /tmp/kc | cut -f1)" >> $T
echo "# tensor_cuda, warm cache" >> $T; s=$(now); timeout 200 ./n/c2 --include-ignored --test-threads=8 > $OUT/c2_warm.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T
grep -E "test result|FAILED|panicked" $OUT/c2_warm.txt | head -5 >> $T
python3 - >> $T <<'PY'
import glob
fs=sorted(glob.glob('/tmp/kc/*.cubin'))[:3]
for f in fs:
    b=bytearray(open(f,'rb').read()); print('damaged', f.split('/')[-1][:40], 'e_machine was', b[0x12]|(b[0x13]<<8)); b[0x12]=3; b[0x13]=0; open(f,'wb').write(b)
open('/tmp/damaged.txt','w').write('\n'.join(fs))
PY
echo "# tensor_cuda, three entries damaged" >> $T; s=$(now); timeout 200 ./n/c2 --include-ignored --test-threads=8 > $OUT/c2_damaged.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T
grep -E "test result|FAILED|panicked" $OUT/c2_damaged.txt | head -5 >> $T
python3 - >> $T <<'PY'
import os
for f in open('/tmp/damaged.txt').read().split('\n'):
    if os.path.exists(f):
        b=open(f,'rb').read(); print('after:', f.split('/')[-1][:40], 'e_machine', b[0x12]|(b[0x13]<<8))
    else: print('after:', f.split('/')[-1][:40], 'absent')
PY
export STRATA_KERNEL_CACHE_PATH=/tmp/kc2
G="./n/gpt --layers 4 --d-model 256 --heads 4 --seq 256 --batch 4 --steps 3 --warmup 1 --checkpoint every --precision autocast-bf16"
echo "# small gpt, cold cache" >> $T; s=$(now); timeout 120 $G > $OUT/gpt_cold.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T; grep -o '"loss_last":[0-9.]*\|"ms_per_step":[0-9.]*' $OUT/gpt_cold.txt >> $T
echo "# small gpt, warm cache" >> $T; s=$(now); timeout 120 $G > $OUT/gpt_warm.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T; grep -o '"loss_last":[0-9.]*\|"ms_per_step":[0-9.]*' $OUT/gpt_warm.txt >> $T
echo "# small gpt, no cache (STRATA_KERNEL_CACHE=0)" >> $T; s=$(now); STRATA_KERNEL_CACHE=0 timeout 120 $G > $OUT/gpt_nocache.txt 2>&1; echo "rc $? wall $(el $s) s" >> $T; grep -o '"loss_last":[0-9.]*' $OUT/gpt_nocache.txt >> $T
echo "# memcheck small gpt, warm cache" >> $T; timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $G 2>&1 | grep -o '"loss_last":[0-9.]*\|ERROR SUMMARY.*' >> $T
echo "# alloc_cuda" >> $T; timeout 60 ./n/c1 --include-ignored 2>&1 | grep -E "FAILED|panicked|test result" >> $T
cat $T
