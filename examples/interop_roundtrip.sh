#!/usr/bin/env bash
# strata <-> PyTorch/NumPy model-file exchange in one command (on a machine
# with python3, torch, safetensors and numpy; a GPU is used when present):
#
#   examples/interop_roundtrip.sh [DIR]        # STRATA_DEVICE=cuda to force the GPU
#
# 1. strata writes safetensors and .npy files and checks its own round trip;
# 2. PyTorch/NumPy load them and check every value, then write their own;
# 3. strata loads PyTorch's and NumPy's files and checks every value.
# Prints PASS or FAIL last; exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
cd "$root"
cargo build --release -q -p strata-examples --example interop
bin=target/release/examples/interop
echo "== 1. strata writes ($dir)"
"$bin" --out "$dir"
echo "== 2. PyTorch and NumPy check and write"
python3 examples/interop_check.py "$dir"
echo "== 3. strata loads PyTorch's and NumPy's files"
mapfile -t files <"$dir/python_files.txt"
loads=()
for f in "${files[@]}"; do loads+=(--load "$f"); done
"$bin" --out "$dir/again" "${loads[@]}"
echo "PASS: strata -> PyTorch/NumPy -> strata round trip"
