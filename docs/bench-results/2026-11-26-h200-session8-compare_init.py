"""Compares strata's dumped initial state (STRATA_GPT_DUMP) with torch_gpt.py's (torch_gpt_state.py)."""
import sys, torch
from safetensors.torch import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
worst, bad = 0.0, []
for k in sorted(b):
    if k not in a: bad.append(f"missing {k}"); continue
    x, y = a[k], b[k]
    if k.startswith("data."):
        if not torch.equal(x.long(), y.long()): bad.append(f"{k}: {(x.long() != y.long()).sum().item()} tokens differ")
    else:
        d = (x.float() - y.float()).abs().max().item(); worst = max(worst, d)
        if d > 1e-6: bad.append(f"{k}: max diff {d:.3g}")
print(f"{sys.argv[2]}: {len(b)} tensors, params max abs diff {worst:.3g}; problems: {bad[:10] if bad else 'none'}")
