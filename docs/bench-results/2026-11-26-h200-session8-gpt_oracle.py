"""torch_gpt.py's own initial state for the tiny configuration (seed 7), as exact values, for gpt_model's tests."""
import json, struct, subprocess, sys
from safetensors.torch import load_file
flags = "--layers 2 --d-model 64 --heads 4 --seq 32 --batch 2 --vocab 256 --seed 7".split()
subprocess.run([sys.executable, "torch_gpt_state.py", "torch_gpt.py", "/tmp/tiny7"] + flags, check=True)
st = load_file("/tmp/tiny7_init.safetensors")
def bits(t): return [struct.unpack('<I', struct.pack('<f', float(x)))[0] for x in t.flatten().tolist()]
print(json.dumps({
    "data0x_row0_first8": st["data.0.x"][0, :8].tolist(),
    "data3y_row1_last8": st["data.3.y"][1, -8:].tolist(),
    "data2x_sum": int(st["data.2.x"].sum()),
    "tok_0_first4": bits(st["tok.weight"][0, :4]),
    "pos_31_last4": bits(st["pos.weight"][31, -4:]),
    "b0_qkv_row100_first4": bits(st["blocks.0.qkv.weight"][100, :4]),
    "b1_fc2_last4": bits(st["blocks.1.fc2.weight"][-1, -4:]),
    "head_255_last4": bits(st["head.weight"][255, -4:]),
}))
