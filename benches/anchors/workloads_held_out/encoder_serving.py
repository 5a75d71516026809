"""Transformer-encoder serving: 60 requests of random batch (1..32) and length (16..512) through a 6-layer
nn.TransformerEncoder (d_model 768, 12 heads) under inference_mode, fp32."""
import random, torch, torch.nn as nn
torch.manual_seed(1); random.seed(1)
dev = "cuda"
layer = nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True, dropout=0.0)
enc = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).to(dev).eval()
with torch.inference_mode():
    for _ in range(60):
        b, n = random.randint(1, 32), random.randint(16, 512)
        x = torch.randn(b, n, 768, device=dev)
        y = enc(x)
        _ = y.mean().item()
torch.cuda.synchronize()
