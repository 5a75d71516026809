"""A convolutional VAE trained under bf16 autocast with gradient accumulation over 2 micro-batches of 64 images
(3x128x128), AdamW, 24 optimizer steps."""
import torch, torch.nn as nn
torch.manual_seed(4)
dev = "cuda"
enc = nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.SiLU(), nn.Conv2d(64, 128, 4, 2, 1), nn.SiLU(),
                    nn.Conv2d(128, 256, 4, 2, 1), nn.SiLU(), nn.Conv2d(256, 2 * 64, 3, 1, 1)).to(dev)
dec = nn.Sequential(nn.Conv2d(64, 256, 3, 1, 1), nn.SiLU(), nn.ConvTranspose2d(256, 128, 4, 2, 1), nn.SiLU(),
                    nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.SiLU(), nn.ConvTranspose2d(64, 3, 4, 2, 1)).to(dev)
opt = torch.optim.AdamW(list(enc.parameters()) + list(dec.parameters()), lr=2e-4)
for step in range(24):
    opt.zero_grad(set_to_none=True)
    for micro in range(2):
        x = torch.rand(64, 3, 128, 128, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            mu, logvar = enc(x).chunk(2, dim=1)
            z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
            rec = dec(z)
            loss = nn.functional.mse_loss(rec.float(), x) - 0.5 * (1 + logvar - mu ** 2 - logvar.exp()).float().mean()
        (loss / 2).backward()
    opt.step()
torch.cuda.synchronize()
