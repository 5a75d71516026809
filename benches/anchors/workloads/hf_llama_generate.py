"""A small Llama (transformers LlamaForCausalLM from a LlamaConfig: 6 layers, hidden 1024, 16 heads with 4 KV
heads, MLP 2816, 32000-token vocabulary, random weights, bfloat16) serving 6 requests with model.generate():
greedy, the default dynamic KV cache (grown with torch.cat every token), batch 1..8 of left-padded prompts
16..512 long, 16..48 new tokens each (no EOS stop, so every request runs to its length).
`--device cpu` (or DEVICE=cpu) and SMOKE=1 (prompts 8..32, 2..6 new tokens) for a quick CPU check."""
import os, random, sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else os.environ.get("DEVICE", "cuda")
smoke = os.environ.get("SMOKE") == "1"
torch.manual_seed(0); random.seed(0)
(plo, phi), (nlo, nhi) = ((8, 32), (2, 6)) if smoke else ((16, 512), (16, 48))
cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=6,
                  num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
model = LlamaForCausalLM(cfg).to(dev, torch.bfloat16).eval()
model.generation_config.eos_token_id = None
model.generation_config.pad_token_id = 0
for req in range(6):
    b, n = random.randint(1, 8), random.randint(nlo, nhi)
    lens = [random.randint(plo, phi) for _ in range(b)]
    ids, mask = torch.zeros(b, max(lens), dtype=torch.long), torch.zeros(b, max(lens), dtype=torch.long)
    for i, l in enumerate(lens):
        ids[i, max(lens) - l:], mask[i, max(lens) - l:] = torch.randint(3, 32000, (l,)), 1
    out = model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False)
    assert out.shape[1] == max(lens) + n, out.shape
if dev.startswith("cuda"): torch.cuda.synchronize()
