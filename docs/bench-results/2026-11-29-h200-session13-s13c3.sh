#!/bin/bash
# Session 13, call 3 (one H200): fuzz_ops seed 41 again (call 2's copy did not come back: too many files), to read
# the one program strata failed on the CPU (s41_mse_loss_0864).
cd devbin
timeout 100 python3 ../benches/anchors/fuzz_conformance_ops.py --seed 41 --count 1000 --out $OUT/zz_fuzz_ops_41.json > $OUT/gen.txt 2>&1; echo "gen ops 41 rc $?"
python3 - <<'P'
import json, os, torch
d = json.load(open(os.environ["OUT"] + "/zz_fuzz_ops_41.json"))
for c in d["cases"]:
    if c["id"].endswith("mse_loss_0864"):
        print(json.dumps(c)[:4000])
P
