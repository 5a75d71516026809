"""Bi-encoder dense-retrieval training with a growing memory bank of document embeddings, bf16 autocast, AdamW
(gradient clipping at 1.0), 200 steps. Two towers of the same shape and separate weights (a 30,522-token embedding,
learned positions, nn.TransformerEncoder of 4 pre-norm layers, d 384, 6 heads, GELU, dropout 0.1, key-padding masks;
mean pooling over the real tokens, a projection to 256 and L2 normalisation): 256 query/document pairs a step,
queries of 8..32 tokens, documents of 24 tokens up to the step's source maximum (one of 48, 64, 96, 128, drawn per
step), each side padded to its own longest, so both towers change shape every step. A document is a noisy copy of
its query's topic tokens, so the task is learnable. Loss: InfoNCE at temperature 0.05 of every query against the
step's 256 documents plus every embedding in the bank (float32 logits of 256 x (256 + bank size), same-topic
entries masked out). The bank: float32 document embeddings, their int32 token rows (128 wide) and int64 topic ids on
the device, each grown by torch.cat with the step's detached documents after the step (three new, slightly larger
blocks every step); past 32,768 rows it is truncated to its newest 24,576 by slicing and .clone() (first at step
128, then every 32 steps). Every 60 steps the whole bank is rebuilt: every stored document re-encoded with the
current document tower under no_grad in chunks of 2,048 (each trimmed to its longest), the chunks joined by
torch.cat. Every 10 steps a no-grad top-k retrieval eval: 4,096 fresh queries (half of them on topics in the bank)
encoded in chunks of 256 and scored against the whole bank (bf16 scores, 256 x bank size, then float32),
torch.topk(100), recall@10 and @100 of the topic.
WL_DEVICE=cpu: d 64, 1 layer, 1,000 tokens, 32 pairs a step, documents up to 16..32, bank at most 256 (truncated to
192), 12 steps, rebuild every 6, eval every 4 with 128 queries."""
import math, os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(94); rng = random.Random(94)
if small:
    D, H, L, V, B, BANK, KEEP = 64, 4, 1, 1000, 32, 256, 192
    steps, rebuild_every, eval_every, NQ, CH = 12, 6, 4, 128, 64
    QL, DMIN, DMAX, TOPICS = (4, 12), 8, (16, 24, 32), 200
else:
    D, H, L, V, B, BANK, KEEP = 384, 6, 4, 30522, 256, 32768, 24576
    steps, rebuild_every, eval_every, NQ, CH = 200, 60, 10, 4096, 2048
    QL, DMIN, DMAX, TOPICS = (8, 32), 24, (48, 64, 96, 128), 100000
kind, E, TAU, PAD = dev.split(":")[0], 256, 0.05, 0
topic_tokens = torch.randint(1, V, (TOPICS, 8), device=dev)     # each topic: 8 characteristic tokens


class Tower(nn.Module):
    def __init__(s):
        super().__init__()
        s.tok, s.pos = nn.Embedding(V, D, padding_idx=PAD), nn.Embedding(DMAX[-1], D)
        layer = nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.1, activation="gelu", batch_first=True, norm_first=True)
        s.enc = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        s.ln, s.out = nn.LayerNorm(D), nn.Linear(D, E)

    def forward(s, ids):
        pad = ids == PAD
        x = s.tok(ids) + s.pos(torch.arange(ids.shape[1], device=ids.device))
        x = s.ln(s.enc(x, src_key_padding_mask=pad))
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        x = (x * keep).sum(1) / keep.sum(1).clamp_min(1)
        return F.normalize(s.out(x).float(), dim=-1)


def texts(topics, lo_hi):                # topic tokens mixed into random tokens, right-padded
    n = topics.shape[0]
    lens = [rng.randint(*lo_hi) for _ in range(n)]
    t = max(lens)
    ids = torch.randint(1, V, (n, t), device=dev)
    slots = torch.randint(0, 8, (n, t), device=dev)
    from_topic = torch.rand(n, t, device=dev) < 0.5
    ids = torch.where(from_topic, topic_tokens[topics[:, None], slots], ids)
    real = torch.arange(t, device=dev)[None] < torch.tensor(lens, device=dev)[:, None]
    return ids.masked_fill(~real, PAD)


qtower, dtower = Tower().to(dev), Tower().to(dev)
params = list(qtower.parameters()) + list(dtower.parameters())
opt = torch.optim.AdamW(params, lr=2e-4, weight_decay=0.01)
bank_emb = torch.empty(0, E, device=dev)
bank_ids = torch.empty(0, DMAX[-1], dtype=torch.int32, device=dev)
bank_topic = torch.empty(0, dtype=torch.long, device=dev)

for step in range(steps):
    topics = torch.randint(0, TOPICS, (B,), device=dev)
    q_ids, d_ids = texts(topics, QL), texts(topics, (DMIN, rng.choice(DMAX)))
    with torch.autocast(device_type=kind, dtype=torch.bfloat16):
        q, d = qtower(q_ids), dtower(d_ids)
    logits = q @ torch.cat([d, bank_emb]).T / TAU                   # (B, B + bank) float32
    same = topics[:, None] == torch.cat([topics, bank_topic])[None]  # other rows of the same topic are not negatives
    same[torch.arange(B, device=dev), torch.arange(B, device=dev)] = False
    loss = F.cross_entropy(logits.masked_fill(same, float("-inf")), torch.arange(B, device=dev))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    del logits, same
    with torch.no_grad():                                           # grow the bank by concatenation
        bank_emb = torch.cat([bank_emb, d.detach()])
        bank_ids = torch.cat([bank_ids, F.pad(d_ids, (0, DMAX[-1] - d_ids.shape[1])).int()])
        bank_topic = torch.cat([bank_topic, topics])
        if bank_emb.shape[0] > BANK:                                # truncate to the newest rows
            bank_emb, bank_ids, bank_topic = bank_emb[-KEEP:].clone(), bank_ids[-KEEP:].clone(), bank_topic[-KEEP:].clone()
    del q, d
    if (step + 1) % rebuild_every == 0:                             # refresh stale embeddings
        dtower.eval()
        with torch.no_grad(), torch.autocast(device_type=kind, dtype=torch.bfloat16):
            parts = []
            for ids in bank_ids.split(CH):
                ids = ids.long()
                ids = ids[:, :int((ids != PAD).sum(1).max())]      # trim the chunk's padding
                parts.append(dtower(ids))
            bank_emb = torch.cat(parts)
            del parts
        dtower.train()
    if (step + 1) % eval_every == 0:
        qtower.eval()
        with torch.no_grad(), torch.autocast(device_type=kind, dtype=torch.bfloat16):
            qt = torch.randint(0, TOPICS, (NQ,), device=dev)
            qt[: NQ // 2] = bank_topic[torch.randint(0, bank_topic.shape[0], (NQ // 2,), device=dev)]  # half answerable
            hit10 = hit100 = 0
            for qc in qt.split(B):
                scores = qtower(texts(qc, QL)) @ bank_emb.T.to(torch.bfloat16)
                top = scores.float().topk(min(100, bank_emb.shape[0]), -1).indices
                hit = bank_topic[top] == qc[:, None]
                hit10 += hit[:, :10].any(1).sum().item(); hit100 += hit.any(1).sum().item()
        qtower.train()
        print(f"step {step + 1}: bank {bank_emb.shape[0]}, loss {loss.item():.3f}, "
              f"recall@10 {hit10 / NQ:.3f}, recall@100 {hit100 / NQ:.3f}")
if dev.startswith("cuda"):
    torch.cuda.synchronize()
