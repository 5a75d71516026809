#!/bin/bash
# builds and times sm_rw32 variants (f32 softmax over [98304, 1024])
cd $(dirname $0)
v() { nvcc -O3 -arch=sm_90 -DNAME="\"$1\"" $2 -o /tmp/sm_$$ softmax.cu 2>&1 | grep -i error; /tmp/sm_$$; }
v "as-is" ""
v "recip" "-DRECIP"
v "minb5" "-DMINB=5"
v "minb6" "-DMINB=6"
v "recip+minb6" "-DRECIP -DMINB=6"
v "nocap" "-DNOCAP"
v "recip+nocap" "-DRECIP -DNOCAP"
v "sb128" "-DSBV=128"
v "sb128 recip minb12" "-DSBV=128 -DRECIP -DMINB=12"
v "sb512" "-DSBV=512"
v "as-is again" ""
