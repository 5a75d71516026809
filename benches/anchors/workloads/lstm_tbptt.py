"""A 2-layer LSTM language model trained with truncated backpropagation through time: chunks of random
length 16..96 from a long stream, the hidden state carried (detached) between chunks, Adam."""
import random, torch, torch.nn as nn
torch.manual_seed(0); random.seed(0)
dev = "cuda"
V, E, H, B = 4096, 256, 1024, 32
emb, lstm, head = nn.Embedding(V, E).to(dev), nn.LSTM(E, H, 2, batch_first=True).to(dev), nn.Linear(H, V).to(dev)
params = list(emb.parameters()) + list(lstm.parameters()) + list(head.parameters())
opt = torch.optim.Adam(params, lr=1e-3)
stream = torch.randint(0, V, (B, 4000), device=dev)
state, pos = None, 0
for step in range(40):
    L = random.randint(16, 96)
    if pos + L + 1 >= stream.shape[1]:
        pos, state = 0, None
    x, y = stream[:, pos:pos + L], stream[:, pos + 1:pos + L + 1]; pos += L
    out, state = lstm(emb(x), state)
    state = tuple(s.detach() for s in state)
    loss = nn.functional.cross_entropy(head(out).reshape(-1, V), y.reshape(-1))
    opt.zero_grad(set_to_none=True); loss.backward()
    nn.utils.clip_grad_norm_(params, 1.0); opt.step()
torch.cuda.synchronize()
