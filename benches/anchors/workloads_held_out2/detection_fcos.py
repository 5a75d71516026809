"""FCOS-style one-stage object detection trained with SGD (momentum 0.9, weight decay 1e-4) under fp16 autocast with
a GradScaler, 20 steps on batches of 8 random images whose height and width are each drawn from 512..1024 (multiples
of 32) every step. Backbone: a stride-4 stem and three residual stages (128, 256, 512 channels at strides 8, 16, 32)
with batch norm; an FPN (1x1 laterals, nearest upsampling, 3x3 outputs, 128 channels) gives P3..P5; a head shared
across levels (two towers of 2 convs + GroupNorm + ReLU) predicts 20 class logits, 4 box distances and a
centerness per location. Each image carries its own list of 1..40 boxes: per image, every location is matched to the
smallest box that contains it within the level's size range ((N, M, 4) distance tensors, masking, min, nonzero,
gather), the per-image targets are concatenated, and the losses (sigmoid focal loss over all locations, GIoU and
centerness BCE over the positives only, whose number changes every step) are normalised by the positive count.
At steps 10 and 20 a no-grad eval on 2 images of 800x1088 with score thresholding, nonzero and top-k per image.
WL_DEVICE=cpu: widths / 4, batch 2 of 128..256, 3 steps, bf16 autocast."""
import os, random, torch, torch.nn as nn, torch.nn.functional as F
dev = os.environ.get("WL_DEVICE", "cuda")
small = dev == "cpu"
torch.manual_seed(83); rng = random.Random(83)
if small:
    W, B, (slo, shi), steps, EVAL = 16, 2, (128, 256), 3, (2, 256, 320)
else:
    W, B, (slo, shi), steps, EVAL = 64, 8, (512, 1024), 20, (2, 800, 1088)
NC, FPN, STRIDES = 20, 2 * W, (8, 16, 32)
RANGES = ((0, 64), (64, 128), (128, 1e8))
cuda = dev.startswith("cuda")
amp = torch.float16 if cuda else torch.bfloat16


def cbr(i, o, s=1):
    return nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))


class Res(nn.Module):
    def __init__(s, c):
        super().__init__()
        s.a, s.b, s.bn = cbr(c, c), nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c)

    def forward(s, x):
        return F.relu(x + s.bn(s.b(s.a(x))))


class FCOS(nn.Module):
    def __init__(s):
        super().__init__()
        s.stem = nn.Sequential(cbr(3, W // 2, 2), cbr(W // 2, W, 2))
        s.stages = nn.ModuleList(nn.Sequential(cbr(i, o, 2), Res(o)) for i, o in ((W, 2 * W), (2 * W, 4 * W), (4 * W, 8 * W)))
        s.lat = nn.ModuleList(nn.Conv2d(c, FPN, 1) for c in (2 * W, 4 * W, 8 * W))
        s.out = nn.ModuleList(nn.Conv2d(FPN, FPN, 3, 1, 1) for _ in range(3))

        def tower():
            return nn.Sequential(*[m for _ in range(2) for m in (nn.Conv2d(FPN, FPN, 3, 1, 1), nn.GroupNorm(16, FPN), nn.ReLU())])
        s.cls_tower, s.box_tower = tower(), tower()
        s.cls, s.box, s.ctr = nn.Conv2d(FPN, NC, 3, 1, 1), nn.Conv2d(FPN, 4, 3, 1, 1), nn.Conv2d(FPN, 1, 3, 1, 1)
        s.scales = nn.Parameter(torch.ones(3))
        nn.init.constant_(s.cls.bias, -4.6)                      # prior 0.01

    def forward(s, x):
        x, feats = s.stem(x), []
        for st in s.stages:
            x = st(x)
            feats.append(x)
        lat = [l(f) for l, f in zip(s.lat, feats)]
        p = [lat[2]]
        for l in reversed(lat[:2]):
            p.insert(0, l + F.interpolate(p[0], size=l.shape[-2:], mode="nearest"))
        cls, box, ctr = [], [], []
        for i, f in enumerate(o(q) for o, q in zip(s.out, p)):
            c, b = s.cls_tower(f), s.box_tower(f)
            cls.append(s.cls(c).flatten(2).transpose(1, 2))
            box.append((s.box(b) * s.scales[i]).float().exp().flatten(2).transpose(1, 2))
            ctr.append(s.ctr(b).flatten(2).transpose(1, 2))
        return torch.cat(cls, 1), torch.cat(box, 1), torch.cat(ctr, 1)[..., 0], [f.shape[-2:] for f in p]


def locations(shapes):                                       # (N, 2) centres and (N, 2) size range per location
    pts, rng_ = [], []
    for (h, w), st, r in zip(shapes, STRIDES, RANGES):
        ys, xs = torch.meshgrid(torch.arange(h, device=dev), torch.arange(w, device=dev), indexing="ij")
        pts.append(torch.stack([xs.flatten(), ys.flatten()], 1) * st + st // 2)
        rng_.append(torch.tensor(r, device=dev).expand(h * w, 2))
    return torch.cat(pts).float(), torch.cat(rng_)


def random_targets(h, w):
    n = rng.randint(1, 40)
    bw, bh = torch.randint(16, w // 2, (n,)), torch.randint(16, h // 2, (n,))
    x1, y1 = (torch.rand(n) * (w - bw)).floor(), (torch.rand(n) * (h - bh)).floor()
    return torch.stack([x1, y1, x1 + bw, y1 + bh], 1).float().to(dev), torch.randint(0, NC, (n,)).to(dev)


def match(pts, ranges, boxes, labels):                      # FCOS assignment for one image
    ltrb = torch.cat([pts[:, None] - boxes[None, :, :2], boxes[None, :, 2:] - pts[:, None]], 2)   # (N, M, 4)
    mx = ltrb.max(2).values
    ok = (ltrb.min(2).values > 0) & (mx >= ranges[:, :1]) & (mx <= ranges[:, 1:])
    area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))[None].expand_as(mx).clone()
    area[~ok] = float("inf")
    best, idx = area.min(1)
    pos = (best < float("inf")).nonzero().squeeze(1)
    cls_t = torch.zeros(pts.shape[0], NC, device=dev)
    cls_t[pos, labels[idx[pos]]] = 1.0
    return cls_t, pos, ltrb[pos, idx[pos]]


def giou_loss(p, t):                                         # both ltrb distances from the same point
    ip = torch.min(p, t); ep = torch.max(p, t)
    inter = (ip[:, 0] + ip[:, 2]) * (ip[:, 1] + ip[:, 3])
    union = (p[:, 0] + p[:, 2]) * (p[:, 1] + p[:, 3]) + (t[:, 0] + t[:, 2]) * (t[:, 1] + t[:, 3]) - inter
    enclose = (ep[:, 0] + ep[:, 2]) * (ep[:, 1] + ep[:, 3])
    iou = inter / union.clamp(min=1e-6)
    return 1 - (iou - (enclose - union) / enclose.clamp(min=1e-6))


def focal(logits, t, alpha=0.25, gamma=2.0):
    p = logits.sigmoid()
    ce = F.binary_cross_entropy_with_logits(logits, t, reduction="none")
    pt = p * t + (1 - p) * (1 - t)
    return (ce * (1 - pt) ** gamma * (alpha * t + (1 - alpha) * (1 - t))).sum()


model = FCOS().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
scaler = torch.amp.GradScaler("cuda", enabled=cuda)
for step in range(steps):
    h, w = rng.randrange(slo, shi + 1, 32), rng.randrange(slo, shi + 1, 32)
    imgs = torch.randn(B, 3, h, w, device=dev)
    targets = [random_targets(h, w) for _ in range(B)]
    with torch.autocast(device_type=dev.split(":")[0], dtype=amp):
        cls, box, ctr, shapes = model(imgs)
    pts, ranges = locations(shapes)
    cls_ts, box_p, box_t, ctr_p = [], [], [], []
    for i, (boxes, labels) in enumerate(targets):
        cls_t, pos, reg_t = match(pts, ranges, boxes, labels)
        cls_ts.append(cls_t); box_p.append(box[i, pos]); box_t.append(reg_t); ctr_p.append(ctr[i, pos])
    box_p, box_t, ctr_p = torch.cat(box_p), torch.cat(box_t), torch.cat(ctr_p).float()
    n_pos = max(box_t.shape[0], 1)
    lr_, tb_ = box_t[:, [0, 2]], box_t[:, [1, 3]]
    ctr_t = ((lr_.min(1).values / lr_.max(1).values) * (tb_.min(1).values / tb_.max(1).values)).sqrt()
    loss = (focal(cls.float().flatten(0, 1), torch.cat(cls_ts)) / n_pos
            + (giou_loss(box_p, box_t) * ctr_t).sum() / ctr_t.sum().clamp(min=1e-6)
            + F.binary_cross_entropy_with_logits(ctr_p, ctr_t, reduction="sum") / n_pos)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    del cls, box, ctr, cls_ts, box_p, box_t, ctr_p, loss
    if step % 10 == 9 or step == steps - 1:
        model.eval()
        with torch.no_grad(), torch.autocast(device_type=dev.split(":")[0], dtype=amp):
            n, eh, ew = EVAL
            cls, box, ctr, shapes = model(torch.randn(n, 3, eh, ew, device=dev))
            pts, _ = locations(shapes)
            scores = (cls.float().sigmoid() * ctr.float().sigmoid()[..., None]).sqrt()
            dets = []
            for i in range(n):
                keep = (scores[i] > 0.05).nonzero()
                s = scores[i][keep[:, 0], keep[:, 1]]
                top = s.topk(min(1000, s.shape[0]))
                loc = keep[top.indices, 0]
                d = box[i, loc]
                xyxy = torch.cat([pts[loc] - d[:, :2], pts[loc] + d[:, 2:]], 1)
                dets.append((xyxy, top.values, keep[top.indices, 1]))
            sum(int(d[0].shape[0]) for d in dets)
        model.train()
if cuda:
    torch.cuda.synchronize()
