"""Optimizer-heavy fine-tune of a 268M-parameter GPT-style decoder whose float32 parameters and gradients live in flat
buckets (ZeRO / DDP-gradient-as-bucket-view style, world size 1), with a mid-run checkpoint to CPU and a full teardown
and rebuild from it. bf16 autocast, AdamW over the flat buckets (lr 2e-4, betas 0.9/0.95, weight decay 0.1 on matrices
only), a torch.optim.lr_scheduler.SequentialLR (LinearLR warmup over 10 steps, then CosineAnnealingLR),
clip_grad_norm_ at 1.0 with foreach=True, 100 optimizer steps.
Model: 16 pre-norm blocks of d 1,024 (16 heads of 64, causal scaled_dot_product_attention, GELU-tanh MLP of 4,096,
biases), learned positions up to 1,024, a 32,000-token input embedding and a separate output head (no tying): 16 x
12.6M + 2 x 32.8M + 1.0M = 268M float32 parameters, built directly on the device (torch.device context).
Flattening: the parameters, taken in reverse registration order (the order the backward produces their gradients) and
split into a weight-decay group (matrices and embeddings) and a no-decay group (biases, LayerNorm), are packed
greedily into float32 buckets of at most 40M elements (160 MB), 9 in all (37.0M, five of 37.7M, 9.4M, 32.8M and the
0.2M no-decay one): each bucket is one torch.empty, every parameter is copied into its slice and re-pointed at it by
`p.data = view` (its own storage freed), and `p.grad` is set to the matching view of a zeroed flat gradient bucket, so
autograd accumulates each fresh float32 gradient (the cast-back of the bf16 weight gradient) into the bucket in place
and frees it. The optimizer, clip_grad_norm_ and the zeroing see only the 9 flat buckets; Adam's exp_avg and
exp_avg_sq are 9 + 9 flat float32 tensors.
Data: each step accumulates 1..3 micro-batches (drawn from 1, 1, 2, 2, 3) of 3,072 tokens each, the sequence length
drawn per micro-batch from 256, 384, 512, 768, 1,024 (12 x 256 ... 3 x 1,024): random tokens whose second half repeats
the first (learnable by attention), float32 cross-entropy over the full logits. A no-grad eval on 4 x 1,024 fixed
tokens after steps 25, 50, 75 and 100.
Checkpoint and resume after step 50: model.state_dict() (per-parameter views) and the optimizer's flat state are
copied to the CPU (.cpu()), with the scheduler's state_dict and the RNG state; then the model, the buckets, the
optimizer and the scheduler are all deleted (everything on the device freed but the eval tokens), and rebuilt as a
restarted job would: a fresh model on the device, load_state_dict from the CPU copy, re-flattened into new buckets, a
new AdamW and scheduler whose load_state_dict moves Adam's state back to the device, and the RNG state restored (so
the run continues exactly as without the restart).
Hand estimate of the peak at full size: parameters 1.07 GB + flat gradients 1.07 + Adam 2.14 (4.27 GB), autocast's
bf16 weight copies 0.53, activations of one 3,072-token micro-batch about 38 bytes x 1,024 x 16 layers a token (1.9
GB), logits and their float32 copy, log-softmax and gradients about 1.2 GB: about 8.0 GB. GPU time about 10 s (about
60 ms a step, 3.2 GB each way across PCIe at the checkpoint).
What it adds: parameters re-pointed into a few large buckets at start (so about 200 per-parameter blocks are freed
just after the buckets are made), gradients that never get their own blocks (each fresh gradient is added into a
bucket and freed at once, inside the backward), an optimizer whose state is a handful of tensors of up to 151 MB, and
a mid-run teardown of everything followed by a rebuild of the same sizes in a different order (per-parameter blocks,
then buckets, then Adam's state from CPU).
WL_DEVICE=cpu: d 64, 4 heads, 2 blocks, 512 tokens, 256 tokens a micro-batch of lengths 32, 64, 128, buckets of 20,000
elements, 8 steps, resume after step 4, eval after steps 4 and 8."""
import gc, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(124); rng = random.Random(124)
if small:
    D, H, L, V, MAXPOS, TOK, SEQS, BUCKET, steps, resume_at, eval_every, WARM = \
        64, 4, 2, 512, 128, 256, (32, 64, 128), 20_000, 8, 4, 4, 2
else:
    D, H, L, V, MAXPOS, TOK, SEQS, BUCKET, steps, resume_at, eval_every, WARM = \
        1024, 16, 16, 32000, 1024, 3072, (256, 384, 512, 768, 1024), 40_000_000, 100, 50, 25, 10
kind, AMP = dev.split(":")[0], torch.bfloat16


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.qkv, s.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.fc1, s.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x):
        b, n, _ = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(b, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, n, D)
        x = x + s.proj(a)
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x)), approximate="tanh"))


class LM(nn.Module):
    def __init__(s):
        super().__init__()
        s.tok, s.pos = nn.Embedding(V, D), nn.Embedding(MAXPOS, D)
        s.blocks = nn.ModuleList(Block() for _ in range(L))
        s.ln_f, s.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(s, idx):
        x = s.tok(idx) + s.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in s.blocks:
            x = blk(x)
        return s.head(s.ln_f(x))


def flatten(model):
    """Packs the parameters into flat float32 buckets; returns [(flat param, flat grad, decays)]."""
    named = list(model.named_parameters())[::-1]
    out = []
    for decays in (True, False):
        group = [p for n, p in named if (p.dim() >= 2) == decays]
        cur, size = [], 0
        for p in group + [None]:
            if p is None or (cur and size + p.numel() > BUCKET):
                flat = torch.empty(size, device=dev)
                gflat = torch.zeros(size, device=dev)
                off = 0
                with torch.no_grad():
                    for q in cur:
                        n = q.numel()
                        flat[off:off + n].copy_(q.view(-1))
                        q.data = flat[off:off + n].view_as(q)
                        q.grad = gflat[off:off + n].view_as(q)
                        off += n
                flat.grad = gflat
                out.append((flat, gflat, decays))
                cur, size = [], 0
            if p is not None:
                cur.append(p); size += p.numel()
    return out


def build(ckpt=None):
    with torch.device(dev):
        model = LM()
    if ckpt is not None:
        model.load_state_dict(ckpt[0])
    buckets = flatten(model)
    opt = torch.optim.AdamW([dict(params=[b[0] for b in buckets if b[2]], weight_decay=0.1),
                             dict(params=[b[0] for b in buckets if not b[2]], weight_decay=0.0)],
                            lr=2e-4, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [
        torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.05, total_iters=WARM),
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - WARM, eta_min=2e-5)], milestones=[WARM])
    if ckpt is not None:
        opt.load_state_dict(ckpt[1])
        sched.load_state_dict(ckpt[2])
        (torch.cuda.set_rng_state if kind == "cuda" else torch.set_rng_state)(ckpt[3])
    return model, buckets, opt, sched


def batch(n_seq, seq):
    half = torch.randint(0, V, (n_seq, seq // 2 + 1), device=dev)
    x = torch.cat([half, half], 1)[:, :seq + 1]
    return x[:, :-1], x[:, 1:]


def micro_step(model, seq, n_acc):
    inp, tgt = batch(TOK // seq, seq)
    with torch.autocast(device_type=kind, dtype=AMP):
        logits = model(inp)
    loss = F.cross_entropy(logits.float().view(-1, V), tgt.reshape(-1)) / n_acc
    del logits
    loss.backward()
    return loss.item() * n_acc


@torch.no_grad()
def evaluate(model, eval_x):
    with torch.autocast(device_type=kind, dtype=AMP):
        logits = model(eval_x[:, :-1])
    return F.cross_entropy(logits.float().view(-1, V), eval_x[:, 1:].reshape(-1)).item()


def checkpoint(model, opt, sched):
    msd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    osd = opt.state_dict()
    osd["state"] = {i: {k: (v.cpu() if torch.is_tensor(v) else v) for k, v in st.items()}
                    for i, st in osd["state"].items()}
    rng_state = torch.cuda.get_rng_state() if kind == "cuda" else torch.get_rng_state()
    return msd, osd, sched.state_dict(), rng_state


eh = torch.randint(0, V, (4, MAXPOS // 2 + 1), device=dev)
eval_x = torch.cat([eh, eh], 1)[:, :MAXPOS + 1]
model, buckets, opt, sched = build()
evals, losses, gnorm, n_micro = [], [], 0.0, 0
for step in range(steps):
    n_acc = rng.choice((1, 1, 2, 2, 3))
    tot = 0.0
    for _ in range(n_acc):
        tot += micro_step(model, rng.choice(SEQS), n_acc) / n_acc
    n_micro += n_acc
    gnorm = nn.utils.clip_grad_norm_([b[0] for b in buckets], 1.0, foreach=True).item()
    opt.step()
    sched.step()
    torch._foreach_zero_([b[1] for b in buckets])
    losses.append(tot)
    if (step + 1) % eval_every == 0:
        evals.append(evaluate(model, eval_x))
    if step + 1 == resume_at:
        ckpt = checkpoint(model, opt, sched)
        del model, buckets, opt, sched
        gc.collect()
        model, buckets, opt, sched = build(ckpt)
        del ckpt
print(f"{steps} steps ({n_micro} micro-batches, {len(buckets)} buckets, resumed after step {resume_at}): "
      f"train loss {losses[0]:.3f} -> {losses[-1]:.3f}, eval {' '.join(f'{e:.3f}' for e in evals)}, "
      f"last grad norm {gnorm:.3f}, lr {sched.get_last_lr()[0]:.2e}")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
