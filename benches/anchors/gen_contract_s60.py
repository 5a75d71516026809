"""PyTorch's answers for session 60's contractions, diagonals, scaled
products, lerp and cross (strata-tensor's tests/suite/contract.rs).

Writes crates/strata-tensor/tests/data/contract_s60.json.gz: one case per
call, its operands (values row-major, dtype, shape and a layout the test
rebuilds: "c" contiguous, "t" the transpose of a contiguous tensor of the
reversed last two dims, "s" every other element of a wider tensor, "e" a
broadcast (stride 0) of the first row), its scalar arguments, PyTorch's
result (dtype, shape, values; f16/bf16/f32 as exact f64 numbers) and, for
the contractions, the result of the same op on the operands' absolute values
(computed in f64), which bounds the rounding error's scale.

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_contract_s60.py

PyTorch 2.15.0 (CPU, one thread); torch.backends.opt_einsum is unavailable
in that environment, so einsum contracts left to right.
"""
import gzip, json, math, os, random
import torch

torch.set_num_threads(1)
assert not torch.backends.opt_einsum.is_available()
rng = random.Random(60)
torch.manual_seed(60)

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}
NAME = {v: k for k, v in DT.items()}


def enc(x):
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
    return x


def values(t):
    t = t.detach()
    if t.dtype in (torch.float16, torch.bfloat16, torch.float32):
        t = t.double()
    return [enc(v) for v in t.reshape(-1).tolist()]


def rand(shape, dt, special=False):
    d = DT[dt]
    if d.is_floating_point:
        t = torch.randn(shape, dtype=torch.float64) * 2
        if special and t.numel() > 3:
            flat = t.view(-1)
            for v in (float("nan"), float("inf"), -0.0):
                flat[rng.randrange(flat.numel())] = v
        return t.to(d)
    if d == torch.bool:
        return torch.rand(shape) < 0.5
    lo, hi = (0, 6) if d == torch.uint8 else (-5, 6)
    return torch.randint(lo, hi, shape).to(d)


def layout_of(t, lay):
    """t (contiguous) re-laid out; the values stay t's."""
    if lay == "t" and t.dim() >= 2:
        base = t.transpose(-1, -2).contiguous()
        return base.transpose(-1, -2)
    if lay == "s" and t.dim() >= 1:
        shape = list(t.shape)
        wide = shape[:-1] + [shape[-1] * 2]
        base = torch.zeros(wide, dtype=t.dtype)
        base[..., ::2] = t
        return base[..., ::2]
    if lay == "e" and t.dim() >= 2:
        # Rows all equal to the first: a stride-0 expand of it.
        return t[:1].expand(t.shape)
    return t


def operand(shape, dt, lay="c", special=False):
    t = layout_of(rand(shape, dt, special), lay)
    if lay == "e" and t.dim() < 2:
        lay = "c"
    return t, {"dtype": dt, "shape": list(t.shape), "layout": lay, "values": values(t.contiguous())}


cases = []


def absd(t):
    return t.detach().double().abs() if t.dtype != torch.bool else t.double()


def add(name, op, ops, args, f, scale_f=None):
    ts = [o[0] for o in ops]
    case = {"name": name, "op": op, "inputs": [o[1] for o in ops], "args": args}
    try:
        r = f(*ts)
        case["expect"] = {"dtype": NAME[r.dtype], "shape": list(r.shape), "values": values(r)}
        if scale_f is not None:
            s = scale_f(*[absd(t) for t in ts])
            case["scale"] = values(s.reshape(r.shape))
    except Exception as e:  # noqa: BLE001
        case["error"] = type(e).__name__ + ": " + str(e).split("\n")[0]
    cases.append(case)


FLOATS = ["f32", "f64", "f16", "bf16"]
LAYS = ["c", "t", "s", "e"]

# ---- einsum ----
EQS = [
    ("ij,jk->ik", [[3, 4], [4, 5]]), ("ij,jk", [[2, 3], [3, 2]]), ("bij,bjk->bik", [[2, 3, 4], [2, 4, 3]]),
    ("i,i->", [[5], [5]]), ("i,j->ij", [[3], [4]]), ("ii->i", [[4, 4]]), ("ii", [[3, 3]]), ("ij->ji", [[2, 5]]),
    ("ij->", [[3, 4]]), ("ij->j", [[3, 4]]), ("...ij,...jk->...ik", [[2, 2, 3], [3, 2]]),
    ("b...i,bi->b...", [[2, 3, 4], [2, 4]]), ("ijk,jil->kl", [[2, 3, 4], [3, 2, 5]]),
    ("abc,cd,de->abe", [[2, 3, 4], [4, 3], [3, 2]]), ("i,i,i->", [[6], [6], [6]]), ("ij,ij->ij", [[3, 4], [3, 4]]),
    ("iij->j", [[3, 3, 2]]), ("iji->j", [[3, 2, 3]]), ("ij,kj->ik", [[3, 1], [4, 5]]), ("i,i", [[4], [1]]),
    ("Ab,bC->AC", [[2, 3], [3, 2]]), ("ba", [[2, 3]]), (" i j , j k -> i k ", [[2, 3], [3, 2]]),
    ("...->...", [[2, 3]]), ("...", [[]]), ("->", [[]]), ("i->", [[0]]), ("ij,jk->ik", [[0, 3], [3, 2]]),
    ("ij,jk->ik", [[2, 0], [0, 3]]), ("bi,bj->bij", [[3, 2], [3, 4]]), ("ijkl->lkji", [[2, 1, 3, 2]]),
    ("ij,jk,kl->il", [[3, 4], [4, 5], [5, 2]]), ("bhqd,bhkd->bhqk", [[2, 2, 3, 4], [2, 2, 5, 4]]),
    ("i...,i...->...", [[3, 2, 2], [3, 1, 2]]), ("ijj->ij", [[2, 3, 3]]),
]
for k, (eq, shapes) in enumerate(EQS):
    for dt in FLOATS + ["i64", "i32"]:
        lays = [rng.choice(LAYS) for _ in shapes]
        ops = [operand(s, dt, l) for s, l in zip(shapes, lays)]
        add(f"einsum_{k}_{dt}", "einsum", ops, {"eq": eq},
            lambda *t, eq=eq: torch.einsum(eq, *t),
            lambda *t, eq=eq: torch.einsum(eq, *t))
# einsum errors (checked as typed errors in strata)
ERR = [("ij,jk", [[2, 3], [4, 2]]), ("i..j", [[2, 3]]), ("ij->ii", [[2, 3]]), ("ij->k", [[2, 3]]),
       ("ij,j", [[2, 3]]), ("i", [[2, 3]]), ("i1", [[2]]), ("ii", [[2, 3]]), ("i,i", [[3], [4]]),
       ("...i,...i", [[2, 3], [4, 3]]), ("i...->......", [[2, 3]]), ("i.", [[2]]), ("ij", [[2]])]
for k, (eq, shapes) in enumerate(ERR):
    add(f"einsum_err_{k}", "einsum", [operand(s, "f32") for s in shapes], {"eq": eq}, lambda *t, eq=eq: torch.einsum(eq, *t))
add("einsum_err_mixed", "einsum", [operand([2, 3], "f32"), operand([3, 2], "f64")], {"eq": "ij,jk"}, lambda a, b: torch.einsum("ij,jk", a, b))
add("einsum_err_bool", "einsum", [operand([3], "bool"), operand([3], "bool")], {"eq": "i,i"}, lambda a, b: torch.einsum("i,i", a, b))
add("einsum_bool_outer", "einsum", [operand([3], "bool"), operand([2], "bool")], {"eq": "i,j"}, lambda a, b: torch.einsum("i,j", a, b))
add("einsum_bool_sum", "einsum", [operand([3, 2], "bool")], {"eq": "ij->j"}, lambda a: torch.einsum("ij->j", a))
add("einsum_promote_outer", "einsum", [operand([3], "i64"), operand([2], "f32")], {"eq": "i,j->ij"}, lambda a, b: torch.einsum("i,j->ij", a, b))

# ---- tensordot / inner / outer / kron ----
TD = [([3, 4], [4, 5], 1), ([2, 3, 4], [3, 4, 2], 2), ([2, 3], [2, 3], 2), ([2, 3], [4], 0),
      ([2, 3, 4], [4, 3, 5], [[1, 2], [1, 0]]), ([2, 3], [2, 1], [[0], [0]]), ([3, 1], [3, 4], [[1], [1]]),
      ([2, 3], [3, 2], [[-1], [0]]), ([0, 3], [3, 2], 1)]
for k, (sa, sb, dims) in enumerate(TD):
    for dt in ["f32", "f64", "bf16", "i64"]:
        ops = [operand(sa, dt, rng.choice(LAYS)), operand(sb, dt, rng.choice(LAYS))]
        add(f"tensordot_{k}_{dt}", "tensordot", ops, {"dims": dims},
            lambda a, b, d=dims: torch.tensordot(a, b, dims=d), lambda a, b, d=dims: torch.tensordot(a, b, dims=d))
for k, (sa, sb, dims) in enumerate([([2, 3], [2, 3], 3), ([2, 3], [2, 3], -1), ([2, 3], [2, 3], [[0], [1]]),
                                    ([2, 3], [2, 3], [[0, 0], [0, 1]]), ([2, 3], [2, 3], [[0], [0, 1]]), ([2, 3], [2, 3], [[5], [0]])]):
    add(f"tensordot_err_{k}", "tensordot", [operand(sa, "f32"), operand(sb, "f32")], {"dims": dims},
        lambda a, b, d=dims: torch.tensordot(a, b, dims=d))
add("tensordot_err_dtype", "tensordot", [operand([2, 3], "f32"), operand([3, 2], "f64")], {"dims": 1}, lambda a, b: torch.tensordot(a, b, dims=1))
for k, (sa, sb) in enumerate([([2, 3], [4, 3]), ([3], [3]), ([2, 2, 3], [3]), ([], [2, 3]), ([2, 3], []), ([3], [2])]):
    for dt in ["f32", "f64", "i64"]:
        add(f"inner_{k}_{dt}", "inner", [operand(sa, dt, rng.choice(LAYS)), operand(sb, dt)], {},
            lambda a, b: torch.inner(a, b), lambda a, b: torch.inner(a, b))
for k, (da, db) in enumerate([("f32", "f32"), ("i64", "f32"), ("bool", "bool"), ("f16", "f64"), ("u8", "i32"), ("bf16", "bf16")]):
    add(f"outer_{k}", "outer", [operand([4], da, "s", special=True), operand([3], db)], {}, lambda a, b: torch.outer(a, b))
add("outer_err", "outer", [operand([2, 2], "f32"), operand([3], "f32")], {}, lambda a, b: torch.outer(a, b))
for k, (sa, sb, da, db) in enumerate([([2, 3], [3, 2], "f32", "f32"), ([2], [2, 2], "i64", "i64"), ([2, 1, 3], [2, 2], "f64", "f32"),
                                      ([], [3], "f32", "f32"), ([2, 2], [2, 2], "bool", "bool"), ([0, 2], [2, 3], "f32", "f32")]):
    add(f"kron_{k}", "kron", [operand(sa, da, rng.choice(LAYS)), operand(sb, db)], {}, lambda a, b: torch.kron(a, b))

# ---- diagonal / diag / diag_embed / trace ----
for k, (shape, off, d1, d2) in enumerate([([3, 4], 0, 0, 1), ([3, 4], 1, 0, 1), ([3, 4], -2, 0, 1), ([3, 4], 5, 0, 1), ([3, 4], -3, 0, 1),
                                          ([2, 3, 4], 0, 0, 2), ([2, 3, 4], 1, -1, 1), ([2, 3, 4], -1, 2, 0), ([3, 3], 0, 1, 0),
                                          ([2, 3], 0, 0, 0), ([3], 0, 0, 1), ([2, 3], 0, 0, 2), ([0, 3], 0, 0, 1)]):
    for dt in ["f32", "i64", "bool"]:
        add(f"diagonal_{k}_{dt}", "diagonal", [operand(shape, dt, rng.choice(LAYS))], {"offset": off, "dim1": d1, "dim2": d2},
            lambda a, o=off, x=d1, y=d2: torch.diagonal(a, o, x, y))
for k, (shape, off) in enumerate([([4], 0), ([3], 2), ([3], -1), ([3, 4], 0), ([3, 4], 2), ([3, 4], -2), ([3, 4], 9), ([], 0), ([2, 2, 2], 0), ([0], 1)]):
    for dt in ["f32", "bf16", "i32", "bool"]:
        add(f"diag_{k}_{dt}", "diag", [operand(shape, dt, rng.choice(LAYS))], {"offset": off}, lambda a, o=off: torch.diag(a, o))
for k, (shape, off, d1, d2) in enumerate([([3], 0, -2, -1), ([2, 3], 0, -2, -1), ([2, 3], 1, 0, 2), ([2, 3], -1, 2, 0),
                                          ([2, 3], 0, 0, 0), ([], 0, -2, -1), ([2, 3], 0, 0, 5), ([2, 0], 1, -2, -1)]):
    for dt in ["f32", "f16", "i64", "bool"]:
        add(f"diag_embed_{k}_{dt}", "diag_embed", [operand(shape, dt, rng.choice(LAYS))], {"offset": off, "dim1": d1, "dim2": d2},
            lambda a, o=off, x=d1, y=d2: torch.diag_embed(a, o, x, y))
for k, shape in enumerate([[3, 3], [2, 5], [5, 2], [0, 3], [3], [2, 2, 2]]):
    for dt in ["f32", "f64", "f16", "bf16", "i32", "u8", "i64", "bool"]:
        add(f"trace_{k}_{dt}", "trace", [operand(shape, dt, rng.choice(LAYS))], {}, lambda a: torch.trace(a),
            lambda a: torch.trace(a) if a.dim() == 2 else a)

# ---- baddbmm / addbmm / addmv / addr ----
SC = [(1, 1), (0, 1), (0.5, 2), (2, -1.5), (0.0, 0.25)]
for k, (beta, alpha) in enumerate(SC):
    for dt in ["f32", "f64", "f16", "bf16", "i64"]:
        if dt == "i64":
            beta, alpha = int(beta), int(alpha)
        for j, cs in enumerate([[2, 3, 4], [4], [1, 3, 1]]):
            c = operand(cs, dt, rng.choice(LAYS), special=(beta == 0 and dt != "i64"))
            ops = [c, operand([2, 3, 5], dt, rng.choice(LAYS)), operand([2, 5, 4], dt, rng.choice(LAYS))]
            add(f"baddbmm_{k}_{dt}_{j}", "baddbmm", ops, {"beta": beta, "alpha": alpha},
                lambda c, x, y, b=beta, a=alpha: torch.baddbmm(c, x, y, beta=b, alpha=a),
                lambda c, x, y, b=beta, a=alpha: abs(b) * c + abs(a) * torch.bmm(x, y) if b != 0 else abs(a) * torch.bmm(x, y))
        c = operand([3, 4], dt, rng.choice(LAYS), special=(beta == 0 and dt != "i64"))
        ops = [c, operand([2, 3, 5], dt, rng.choice(LAYS)), operand([2, 5, 4], dt, rng.choice(LAYS))]
        add(f"addbmm_{k}_{dt}", "addbmm", ops, {"beta": beta, "alpha": alpha},
            lambda c, x, y, b=beta, a=alpha: torch.addbmm(c, x, y, beta=b, alpha=a),
            lambda c, x, y, b=beta, a=alpha: (abs(b) * c if b != 0 else 0) + abs(a) * torch.bmm(x, y).sum(0))
        c = operand([3], dt, "s", special=(beta == 0 and dt != "i64"))
        ops = [c, operand([3, 6], dt, rng.choice(LAYS)), operand([6], dt, rng.choice(LAYS))]
        add(f"addmv_{k}_{dt}", "addmv", ops, {"beta": beta, "alpha": alpha},
            lambda c, m, v, b=beta, a=alpha: torch.addmv(c, m, v, beta=b, alpha=a),
            lambda c, m, v, b=beta, a=alpha: (abs(b) * c if b != 0 else 0) + abs(a) * (m @ v))
        c = operand([3, 4], dt, rng.choice(LAYS), special=(beta == 0 and dt != "i64"))
        ops = [c, operand([3], dt), operand([4], dt, "s")]
        add(f"addr_{k}_{dt}", "addr", ops, {"beta": beta, "alpha": alpha},
            lambda c, x, y, b=beta, a=alpha: torch.addr(c, x, y, beta=b, alpha=a),
            lambda c, x, y, b=beta, a=alpha: (abs(b) * c if b != 0 else 0) + abs(a) * torch.outer(x, y))
for k, (dc, d1, d2, beta, alpha) in enumerate([("i64", "f32", "f32", 1, 1), ("bool", "bool", "bool", 1, 1), ("bool", "bool", "bool", False, True),
                                               ("bool", "bool", "bool", True, False), ("f16", "f32", "f32", 1, 1), ("i64", "i64", "i64", 1.5, 1),
                                               ("u8", "i32", "i32", 2, 3)]):
    ops = [operand([3, 2], dc), operand([3], d1), operand([2], d2)]
    add(f"addr_mixed_{k}", "addr", ops, {"beta": beta, "alpha": alpha}, lambda c, x, y, b=beta, a=alpha: torch.addr(c, x, y, beta=b, alpha=a))
for k, (cs, s1, s2, dts) in enumerate([([2, 2], [2, 2, 3], [2, 3, 2], ("f64", "f32", "f32")), ([3, 2], [2, 2, 3], [2, 3, 2], ("f32",) * 3),
                                       ([2, 2], [2, 3], [2, 3, 2], ("f32",) * 3), ([2, 2], [2, 2, 3], [3, 3, 2], ("f32",) * 3),
                                       ([2, 2], [2, 2, 3], [2, 2, 2], ("f32",) * 3), ([2, 2], [2, 2, 3], [2, 3, 2], ("bool",) * 3)]):
    ops = [operand(cs, dts[0]), operand(s1, dts[1]), operand(s2, dts[2])]
    add(f"baddbmm_err_{k}", "baddbmm", ops, {"beta": 1, "alpha": 1}, lambda c, x, y: torch.baddbmm(c, x, y))
    add(f"addbmm_err_{k}", "addbmm", ops, {"beta": 1, "alpha": 1}, lambda c, x, y: torch.addbmm(c if c.dim() == 2 else c, x, y))
for k, (cs, ms, vs, dts) in enumerate([([3], [2, 2], [2], ("f32",) * 3), ([2], [2, 2], [3], ("f32",) * 3), ([2], [2, 2], [2], ("f32", "i64", "f32")),
                                       ([2, 1], [2, 2], [2], ("f32",) * 3), ([2], [2], [2], ("f32",) * 3), ([2], [2, 2], [2], ("bool",) * 3)]):
    add(f"addmv_err_{k}", "addmv", [operand(cs, dts[0]), operand(ms, dts[1]), operand(vs, dts[2])], {"beta": 1, "alpha": 1},
        lambda c, m, v: torch.addmv(c, m, v))
add("addmv_scalar_self", "addmv", [operand([], "f32"), operand([2, 3], "f32"), operand([3], "f32")], {"beta": 1, "alpha": 1}, lambda c, m, v: torch.addmv(c, m, v),
    lambda c, m, v: c + m @ v)

# ---- lerp ----
for dt in FLOATS:
    for k, (sa, sb, sw) in enumerate([([257], [257], None), ([3, 40], [3, 40], [3, 40]), ([2, 1, 5], [3, 1], [5]), ([], [4], []), ([4, 1], [3], [2, 1, 1]), ([0, 3], [3], [3])]):
        for ws in ([0.3, 0.5, 0.7, -0.2, 1.5, -3.0, float("nan"), float("inf"), 0.49999997] if sw is None else [None]):
            ops = [operand(sa, dt, rng.choice(LAYS), special=True), operand(sb, dt, rng.choice(LAYS), special=True)]
            if sw is None:
                add(f"lerp_{dt}_{k}_{ws}", "lerp", ops, {"weight": enc(ws)}, lambda a, b, w=ws: torch.lerp(a, b, w))
            else:
                wt = (torch.rand(sw, dtype=torch.float64) * 3 - 1).to(DT[dt])
                if wt.numel() > 2:
                    wt.view(-1)[0] = 0.5
                    wt.view(-1)[1] = float("nan")
                lay = rng.choice(LAYS)
                w = layout_of(wt, lay)
                wop = (w, {"dtype": dt, "shape": list(w.shape), "layout": lay if w.dim() >= 2 or lay not in ("t", "e") else "c", "values": values(w.contiguous())})
                add(f"lerp_{dt}_{k}_t", "lerp", ops + [wop], {}, lambda a, b, w: torch.lerp(a, b, w))
add("lerp_err_int", "lerp", [operand([3], "i64"), operand([3], "i64")], {"weight": 0.5}, lambda a, b: torch.lerp(a, b, 0.5))
add("lerp_err_dtype", "lerp", [operand([3], "f32"), operand([3], "f64")], {"weight": 0.5}, lambda a, b: torch.lerp(a, b, 0.5))
add("lerp_err_wdtype", "lerp", [operand([3], "f32"), operand([3], "f32"), operand([3], "f64")], {}, lambda a, b, w: torch.lerp(a, b, w))
add("lerp_err_shape", "lerp", [operand([3], "f32"), operand([4], "f32")], {"weight": 0.5}, lambda a, b: torch.lerp(a, b, 0.5))
add("lerp_w0d_f64", "lerp", [operand([3], "f32"), operand([3], "f32"), operand([], "f64")], {}, lambda a, b, w: torch.lerp(a, b, w))

# ---- cross ----
for dt in FLOATS + ["i64", "i32", "u8"]:
    for k, (sa, sb, dim) in enumerate([([300, 3], [300, 3], -1), ([3, 70], [3, 70], 0), ([2, 3, 4], [1, 3, 1], 1), ([3], [3], 0), ([0, 3], [0, 3], -1), ([4, 3], [3], -1)]):
        add(f"cross_{dt}_{k}", "cross", [operand(sa, dt, rng.choice(LAYS), special=True), operand(sb, dt, rng.choice(LAYS))], {"dim": dim},
            lambda a, b, d=dim: torch.linalg.cross(a, b, dim=d))
for k, (sa, sb, dim, dts) in enumerate([([2, 3], [2, 2], -1, ("f32", "f32")), ([3], [3], 1, ("f32", "f32")), ([3], [3], 0, ("f32", "f64")),
                                        ([3], [3], 0, ("bool", "bool")), ([2, 3], [4, 3], -1, ("f32", "f32")), ([], [], -1, ("f32", "f32"))]):
    add(f"cross_err_{k}", "cross", [operand(sa, dts[0]), operand(sb, dts[1])], {"dim": dim}, lambda a, b, d=dim: torch.linalg.cross(a, b, dim=d))

# ---- integer contractions whose broadcast sums keep or promote the dtype ----
for k, (eq, shapes) in enumerate([("ij,jk->ik", [[2, 3], [3, 4]]), ("ij,jk->", [[2, 3], [3, 4]]), ("ij,jk->k", [[2, 3], [3, 4]]), ("ij->", [[2, 3]])]):
    for dt in ["i32", "u8"]:
        add(f"einsum_int_{k}_{dt}", "einsum", [operand(s, dt) for s in shapes], {"eq": eq},
            lambda *t, eq=eq: torch.einsum(eq, *t), lambda *t, eq=eq: torch.einsum(eq, *t))
for k, (sa, sb, dims) in enumerate([([2, 1], [3, 4], [[1], [0]]), ([3, 4], [2, 1], [[0], [1]]), ([2, 3], [3, 2], 1)]):
    for dt in ["i32", "u8", "f16"]:
        add(f"tensordot_keep_{k}_{dt}", "tensordot", [operand(sa, dt), operand(sb, dt)], {"dims": dims},
            lambda a, b, d=dims: torch.tensordot(a, b, dims=d), lambda a, b, d=dims: torch.tensordot(a, b, dims=d))

out = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "strata-tensor", "tests", "data", "contract_s60.json.gz")
with gzip.open(out, "wt") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
print(len(cases), "cases,", sum("error" in c for c in cases), "errors ->", os.path.normpath(out))
