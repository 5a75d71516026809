"""Training a decoder-only transformer whose weights do not stay on the device: layer streaming with CPU offload
(ZeRO-offload / FSDP-on-one-GPU style), bf16 autocast, 14 steps of 8 x 1,024 random tokens, two CUDA streams on
purpose. Model: 24 pre-norm layers of d 2,048 (16 heads of 128, causal SDPA, RMSNorm, GELU-tanh MLP of 4,096, no
biases), each layer's 33.6M float32 weights one flat block (128 MiB) of a pinned CPU master buffer; a 16,384-token
embedding tied to the output plus the final RMSNorm weight (one flat 128 MiB block) stay resident on the device as
a leaf, with their float32 master in pinned CPU memory too. Forward, under no_grad: layer i's block is copied host
-> device on a side copy stream (torch.empty allocated on that stream, copy_ non_blocking, an event recorded); the
compute stream waits for the event and calls record_stream on the block, runs the layer on views of it (torch.split)
and drops it; once layer i is queued the host waits (event.synchronize, an FSDP-style rate limiter) for layer i - 1
to finish and starts copying layer i + 1, so copies run one layer ahead of compute. Only each layer's float32 input
(64 MiB) is kept as a checkpoint. The head (RMSNorm, tied projection, float32 cross-entropy over 16,384 tokens) runs
with autograd while the last layer is streamed in again. Backward walks the layers in reverse, streamed in the same
way one layer ahead: each layer's forward is recomputed from its checkpoint with the block as a leaf, and
torch.autograd.grad gives the input gradient and one flat float32 weight gradient (128 MiB), which is copied device
-> host into a pinned gradient buffer on the copy stream (after wait_stream, with record_stream) and dropped;
checkpoints are freed as the walk goes down. Then the embedding backward, the resident block's gradient offloaded the
same way, a device synchronize, a fused Adam step (lr 1e-4) on the CPU over all float32 masters, and the resident
block refreshed from its master on the copy stream (the compute stream waits for it). So 128 MiB blocks are
allocated on one stream and freed from the other (frees deferred by record_stream events), about three at a time.
WL_DEVICE=cpu: d 64, 4 heads, 4 layers, MLP 128, 256 tokens, 2 x 32 tokens, 3 steps; no streams, events or pinned
memory (blocks are cloned from the masters)."""
import math, os, random, torch, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
cuda = dev.startswith("cuda")
torch.manual_seed(107); rng = random.Random(107)
if small:
    D, H, L, FF, V, B, T, steps, every = 64, 4, 4, 128, 256, 2, 32, 3, 1
else:
    D, H, L, FF, V, B, T, steps, every = 2048, 16, 24, 4096, 16384, 8, 1024, 14, 4
kind, AMP = dev.split(":")[0], torch.bfloat16
SHAPES = [(D,), (3 * D, D), (D, D), (D,), (FF, D), (D, FF)]  # norm1, qkv, out, norm2, up, down
SIZES = [math.prod(s) for s in SHAPES]
P, R = sum(SIZES), V * D + D                                   # elements of one layer block / of the resident block
copy_s = torch.cuda.Stream() if cuda else None
done = []                                                      # compute-stream events of finished layers


def init_layer():
    parts = [torch.ones(D, device=dev), torch.randn(3 * D, D, device=dev) * D ** -0.5,
             torch.randn(D, D, device=dev) * (2 * L * D) ** -0.5, torch.ones(D, device=dev),
             torch.randn(FF, D, device=dev) * D ** -0.5, torch.randn(D, FF, device=dev) * (2 * L * FF) ** -0.5]
    return torch.cat([p.flatten() for p in parts])


# float32 masters and gradient buffers on the host (pinned when there is a GPU to copy to)
master_all = torch.empty(L * P, pin_memory=cuda)
grad_all = torch.empty(L * P, pin_memory=cuda)
for i in range(L):
    master_all[i * P:(i + 1) * P].copy_(init_layer())
res_master = torch.empty(R, pin_memory=cuda)
res_master.copy_(torch.cat([(torch.randn(V, D, device=dev) * 0.02).flatten(), torch.ones(D, device=dev)]))
res_grad = torch.empty(R, pin_memory=cuda)
masters = [master_all[i * P:(i + 1) * P] for i in range(L)] + [res_master]
for m, g in zip(masters, [grad_all[i * P:(i + 1) * P] for i in range(L)] + [res_grad]):
    m.grad = g
opt = torch.optim.Adam(masters, lr=1e-4, fused=True)            # runs on the CPU
res_dev = res_master.to(dev, copy=True).requires_grad_()         # resident embedding + final norm, a device leaf


def res_views():                                               # fresh views each call: separate autograd nodes
    emb, nf = torch.split(res_dev, [V * D, D])
    return emb.view(V, D), nf


def fetch(i):                                                  # start streaming layer i in: (block, ready event)
    src = master_all[i * P:(i + 1) * P]
    if not cuda:
        return src.clone(), None
    with torch.cuda.stream(copy_s):
        buf = torch.empty(P, device=dev)
        buf.copy_(src, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(copy_s)
    return buf, ev


def arrive(item):                                              # make the compute stream wait for a fetched block
    buf, ev = item
    if ev is not None:
        cur = torch.cuda.current_stream()
        cur.wait_event(ev)
        buf.record_stream(cur)
    return buf


def limit():                                                   # rate limiter: mark this layer's end on the
    if cuda:                                                   # compute stream, let the host wait for the one
        ev = torch.cuda.Event()                                # before it, so at most one layer is queued ahead
        ev.record()
        done.append(ev)
        while len(done) > 1:
            done.pop(0).synchronize()


def offload(g, host):                                          # device gradient -> pinned host buffer
    if not cuda:
        host.copy_(g)
        return
    copy_s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(copy_s):
        host.copy_(g, non_blocking=True)
    g.record_stream(copy_s)


def layer(x, w):                                               # x (B, T, D) float32 residual, w one flat block
    n1, wqkv, wo, n2, wup, wdown = (p.view(s) for p, s in zip(torch.split(w, SIZES), SHAPES))
    b, t, _ = x.shape
    q, k, v = F.linear(F.rms_norm(x, (D,), n1), wqkv).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + F.linear(a.transpose(1, 2).reshape(b, t, D), wo)
    h = F.gelu(F.linear(F.rms_norm(x, (D,), n2), wup), approximate="tanh")
    return x + F.linear(h, wdown)


for step in range(steps):
    ids = torch.randint(0, V, (B, T + 1), device=dev)
    inp, tgt = ids[:, :-1], ids[:, 1:]
    emb, _ = res_views()
    h0 = F.embedding(inp, emb)                                 # float32, keeps its graph to res_dev
    x = h0.detach()
    ckpt = [x]
    pending = fetch(0)
    with torch.no_grad(), torch.autocast(device_type=kind, dtype=AMP):
        for i in range(L):
            w = arrive(pending)
            x = layer(x, w)
            del w
            ckpt.append(x)
            limit()
            pending = fetch(i + 1 if i + 1 < L else L - 1)     # after the last: the backward starts with it again
    del x
    xf = ckpt.pop().requires_grad_()
    emb, nf = res_views()
    with torch.autocast(device_type=kind, dtype=AMP):
        logits = F.linear(F.rms_norm(xf, (D,), nf), emb)
        loss = F.cross_entropy(logits.float().view(-1, V), tgt.reshape(-1))
    loss.backward()
    g = xf.grad
    del logits, xf, emb, nf
    for i in reversed(range(L)):
        w = arrive(pending)
        x_in = ckpt.pop().requires_grad_()
        w.requires_grad_()
        with torch.autocast(device_type=kind, dtype=AMP):
            out = layer(x_in, w)
        g, gw = torch.autograd.grad(out, (x_in, w), g)
        del out, x_in, w
        offload(gw, grad_all[i * P:(i + 1) * P])
        del gw
        limit()
        pending = fetch(i - 1) if i > 0 else None
    h0.backward(g)                                             # embedding gradient into res_dev.grad
    del g, h0
    offload(res_dev.grad, res_grad)
    res_dev.grad = None
    if cuda:
        torch.cuda.synchronize()
        done.clear()
    opt.step()                                                 # CPU Adam over all float32 masters
    with torch.no_grad():
        if cuda:
            with torch.cuda.stream(copy_s):
                res_dev.copy_(res_master, non_blocking=True)
            torch.cuda.current_stream().wait_stream(copy_s)
        else:
            res_dev.copy_(res_master)
    if (step + 1) % every == 0 or step + 1 == steps:
        print(f"step {step + 1}: loss {loss.item():.4f}, {L} layers of {P * 4 / 2**20:.1f} MiB streamed in twice, "
              f"gradients offloaded")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
