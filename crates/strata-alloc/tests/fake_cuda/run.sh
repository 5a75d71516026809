#!/bin/sh
# Builds the fake libcuda.so.1 (libcuda.c) and runs strata's CUDA tests against
# it, on a machine without a GPU: with a device, without virtual memory
# management, and with cuInit reporting no device. It checks the driver's control
# flow, argument checking and context binding, not CUDA's real behaviour: run
# `cargo test -p strata-alloc --release --test cuda -- --test-threads=1` on a GPU
# machine for that.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
out="$root/target/fake-cuda"
mkdir -p "$out"
cc -shared -fPIC -O1 -Wall -Werror -o "$out/libcuda.so.1" "$here/libcuda.c" -lpthread
ln -sf libcuda.so.1 "$out/libcuda.so"
export LD_LIBRARY_PATH="$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$root"
echo "== fake device"
cargo test -p strata-alloc --release --test cuda -- --test-threads=1 "$@"
cargo test -p strata-alloc --release --lib driver::cuda
echo "== fake device without virtual memory management"
FAKE_CUDA_NO_VMM=1 cargo test -p strata-alloc --release --test cuda -- --test-threads=1
echo "== cuInit reports no device"
FAKE_CUDA_NO_DEVICE=1 cargo test -p strata-alloc --release --test cuda
FAKE_CUDA_NO_DEVICE=1 cargo test -p strata-alloc --release --lib driver::cuda
