"""Writes torch_gpt.py's initial state at a seed in the format `STRATA_GPT_DUMP` writes, so that strata's
`gpt` can start from PyTorch's own weights and batches (`STRATA_GPT_INIT=PREFIX gpt ...`) and its losses
can be compared with torch_gpt.py's step for step.

    python3 torch_gpt_state.py PATH/TO/torch_gpt.py PREFIX [torch_gpt.py's flags, e.g. --seed 3]

Runs torch_gpt.py's own code (argument parsing, seeding, model creation and initialisation, the data
generator) up to and including its four batches, without a training step, then saves the parameters
under their `named_parameters` names and the batches as data.K.x / data.K.y (int64) to
PREFIX_init.safetensors.
"""
import sys

from safetensors.torch import save_file

src_path, prefix, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(src_path) as f:
    src = f.read()
marker = "data = [batch() for _ in range(4)]"
if marker not in src:
    raise SystemExit(f"{src_path} does not build its batches with {marker!r}; cannot stop before training")
head = src[: src.index(marker)] + marker + "\n"
sys.argv = [src_path] + flags
scope = {"__name__": "torch_gpt_state", "__file__": src_path}
exec(compile(head, src_path, "exec"), scope)
model, data = scope["model"], scope["data"]
state = {n: p.detach().contiguous().cpu() for n, p in model.named_parameters()}
for k, (x, y) in enumerate(data):
    state[f"data.{k}.x"] = x.contiguous().cpu()
    state[f"data.{k}.y"] = y.contiguous().cpu()
save_file(state, prefix + "_init.safetensors")
print(f"wrote {len(state)} tensors to {prefix}_init.safetensors", file=sys.stderr)
