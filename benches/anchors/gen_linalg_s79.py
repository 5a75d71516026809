#!/usr/bin/env python3
"""Session 79: PyTorch 2.15's CPU answers (one thread) for torch.linalg,
written to two fixtures:

- crates/strata-tensor/tests/data/linalg_s79.json.gz
  (crates/strata-tensor/tests/suite/linalg_s79.rs): det, slogdet, logdet,
  inv, solve, cholesky, qr, eigh, eigvalsh, svd, svdvals, lstsq,
  matrix_power, pinv, matrix_rank, cross, vecdot, matrix_norm, vector_norm,
  norm, cond on random well-conditioned matrices of orders 0..8 and a few
  of 32-64, batched (also empty batches), transposed (non-contiguous), f32
  and f64, singular and near-singular, not positive-definite, rectangular;
  and the calls PyTorch refuses (wrong dtype, non-square, mismatched
  batches), with its message. Decompositions whose factors are unique only
  up to signs store them normalized (see `norm_cols`): Q D and D R with D =
  sign(diag R) for QR; eigenvectors and singular vectors with the largest
  component of each (U's for SVD) positive.
- crates/strata-autograd/tests/data/linalg_s79_grad.json.gz
  (crates/strata-autograd/tests/suite/linalg_s79.rs): the gradients of
  `sum(W * f(outputs))` for a random W, with f gauge-invariant where the
  factors are not unique: Q D, D R (D = sign(diag R) detached) for QR;
  V diag(c) Vᵀ and the eigenvalues for eigh; U diag(c) Vh and S for svd.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_linalg_s79.py \\
        crates/strata-tensor/tests/data/linalg_s79.json.gz \\
        crates/strata-autograd/tests/data/linalg_s79_grad.json.gz
"""
import json
import math
import sys
import warnings

import torch

from fixture_io import fmt, write_fixture

torch.set_num_threads(1)
warnings.simplefilter("ignore")
G = torch.Generator().manual_seed(79)
DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
      "bf16": torch.bfloat16, "i64": torch.int64, "i32": torch.int32}


def randn(*shape, dtype=torch.float64):
    return torch.randn(tuple(shape), generator=G, dtype=torch.float64).to(dtype)


def enc(t, transposed=False):
    """An input as the tests rebuild it: the stored (row-major) tensor is
    `t` itself, or the contiguous transpose of `t` whose transpose(-2, -1)
    view the test passes (non-contiguous)."""
    name = [k for k, v in DT.items() if v == t.dtype][0]
    base = t.transpose(-2, -1).contiguous() if transposed else t
    vals = base.flatten().tolist()
    return {"dtype": name, "shape": list(base.shape), "t": transposed,
            "values": [fmt(float(v)) if isinstance(v, float) else v for v in vals]}


def res(t):
    return {"shape": list(t.shape), "data": [fmt(float(v)) for v in t.double().flatten().tolist()]}


def well(n, batch=(), dtype=torch.float64):
    return (randn(*batch, n, n) + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def spd(n, batch=(), dtype=torch.float64):
    x = randn(*batch, n, n)
    return (x @ x.mT + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def sym(n, batch=(), dtype=torch.float64):
    x = randn(*batch, n, n)
    return ((x + x.mT) / 2).to(dtype)


def norm_cols(v, ref=None):
    """Each column of v with the sign that makes ref's (v's) largest-|.|
    component of that column positive."""
    ref = v if ref is None else ref
    if v.numel() == 0 or ref.shape[-2] == 0:
        return v
    idx = ref.abs().argmax(dim=-2, keepdim=True)
    s = torch.sign(torch.gather(ref, -2, idx))
    s = torch.where(s == 0, torch.ones_like(s), s)
    return v * s


CASES = []
GRADS = []


def case(op, args, inputs, fn, transposed=None):
    transposed = transposed or [False] * len(inputs)
    c = {"op": op, "args": args, "inputs": [enc(t, tr) for t, tr in zip(inputs, transposed)]}
    try:
        out = fn(*inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        c["results"] = [res(o) for o in outs]
    except Exception as e:  # noqa: BLE001
        c["error"] = str(e).split("\n")[0][:300]
    CASES.append(c)


def qr_norm(a, mode):
    q, r = torch.linalg.qr(a, mode=mode)
    k = min(a.shape[-2], a.shape[-1])
    if k == 0:
        return q, r
    d = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)[..., :k])
    d = torch.where(d == 0, torch.ones_like(d), d)
    rn = r.clone()
    rn[..., :k, :] = r[..., :k, :] * d.unsqueeze(-1)
    if mode == "r":
        return (rn,)
    qn = q.clone()
    qn[..., :, :k] = q[..., :, :k] * d.unsqueeze(-2)
    if mode == "complete" and a.shape[-2] > k:
        qn = qn[..., :, :k]  # the other columns are not unique
    return qn, rn


def eigh_norm(a, uplo):
    l, v = torch.linalg.eigh(a, UPLO=uplo)
    return l, norm_cols(v)


def svd_norm(a, full):
    u, s, vh = torch.linalg.svd(a, full_matrices=full)
    k = s.shape[-1]
    uk, vk = u[..., :, :k], vh[..., :k, :]
    if k == 0:
        return uk, s, vk
    idx = uk.abs().argmax(dim=-2, keepdim=True)
    sg = torch.sign(torch.gather(uk, -2, idx))
    sg = torch.where(sg == 0, torch.ones_like(sg), sg)
    return uk * sg, s, vk * sg.mT


def lstsq_sol(a, b, rcond=None):
    r = torch.linalg.lstsq(a, b, rcond=rcond)
    return r.solution, r.rank


def forward_cases():
    for dt in ["f64", "f32"]:
        d = DT[dt]
        for n in list(range(0, 9)):
            for batch in [(), (3,), (2, 2), (0,)]:
                for tr in [False, True]:
                    a = well(n, batch, d)
                    case("det", {}, [a], torch.linalg.det, [tr])
                    case("slogdet", {}, [a], torch.linalg.slogdet, [tr])
                    case("logdet", {}, [a], torch.logdet, [tr])
                    case("inv", {}, [a], torch.linalg.inv, [tr])
                    b = randn(*batch, n, 3, dtype=d)
                    case("solve", {}, [a, b], torch.linalg.solve, [tr, False])
                    bv = randn(*batch, n, dtype=d)
                    case("solve", {}, [a, bv], torch.linalg.solve, [tr, False])
                    s = spd(n, batch, d)
                    for upper in [False, True]:
                        case("cholesky", {"upper": upper}, [s],
                             lambda x, u=upper: torch.linalg.cholesky(x, upper=u), [tr])
                    h = sym(n, batch, d)
                    for uplo in ["L", "U"]:
                        case("eigh", {"uplo": uplo}, [h], lambda x, u=uplo: eigh_norm(x, u), [tr])
                        case("eigvalsh", {"uplo": uplo}, [h],
                             lambda x, u=uplo: torch.linalg.eigvalsh(x, UPLO=u), [tr])
                    for k in [-3, 0, 2, 5] if not tr else [-1, 3]:
                        case("matrix_power", {"k": k}, [a],
                             lambda x, k=k: torch.linalg.matrix_power(x, k), [tr])
                    case("cond", {"p": None}, [a], torch.linalg.cond, [tr])
                    if tr:
                        continue
                    for p in ["fro", "nuc", 1, -1, math.inf, -math.inf, -2]:
                        case("cond", {"p": fmt(p) if isinstance(p, float) else p}, [a],
                             lambda x, p=p: torch.linalg.cond(x, p), [tr])
                    for p in ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]:
                        case("matrix_norm", {"p": fmt(p) if isinstance(p, float) else p}, [a],
                             lambda x, p=p: torch.linalg.matrix_norm(x, p), [tr])
        for n in [32, 64]:
            a = well(n, (), d)
            case("det", {}, [a], torch.linalg.det)
            case("slogdet", {}, [a], torch.linalg.slogdet)
            case("inv", {}, [a], torch.linalg.inv, [True])
            case("solve", {}, [a, randn(n, 2, dtype=d)], torch.linalg.solve)
            case("cholesky", {"upper": False}, [spd(n, (), d)], lambda x: torch.linalg.cholesky(x))
            case("eigh", {"uplo": "L"}, [sym(n, (), d)], lambda x: eigh_norm(x, "L"))
            case("svd", {"full_matrices": False}, [a], lambda x: svd_norm(x, False))
        # rectangular: qr, svd, svdvals, pinv, matrix_rank, lstsq
        for (m, n) in [(0, 0), (3, 2), (2, 3), (5, 5), (6, 3), (3, 6), (0, 3), (3, 0), (8, 1), (1, 8), (40, 32), (32, 40)]:
            if m * n >= 200 and dt == "f32":
                continue
            for batch in [(), (2,), (0,)] if m * n < 200 else [()]:
                for tr in [False, True]:
                    a = randn(*batch, m, n, dtype=d) if not tr else randn(*batch, n, m, dtype=d).mT
                    # `enc` stores the transpose; `a` must be that view's values
                    for mode in ["reduced", "complete", "r"]:
                        case("qr", {"mode": mode}, [a], lambda x, mo=mode: qr_norm(x, mo), [tr])
                    for full in [False, True]:
                        case("svd", {"full_matrices": full}, [a],
                             lambda x, f=full: svd_norm(x, f), [tr])
                    case("svdvals", {}, [a], torch.linalg.svdvals, [tr])
                    case("pinv", {}, [a], torch.linalg.pinv, [tr])
                    case("matrix_rank", {}, [a], torch.linalg.matrix_rank, [tr])
                    case("cond", {"p": None}, [a], torch.linalg.cond, [tr])
                    for p in ["fro", 2, 1, math.inf]:
                        case("matrix_norm", {"p": fmt(p) if isinstance(p, float) else p}, [a],
                             lambda x, p=p: torch.linalg.matrix_norm(x, p), [tr])
                    if m >= n:  # full rank, gelsy's solution unique
                        b = randn(*batch, m, 2, dtype=d)
                        case("lstsq", {}, [a, b], lstsq_sol, [tr, False])
                        bv = randn(*batch, m, dtype=d)
                        case("lstsq", {}, [a, bv], lstsq_sol, [tr, False])
                    if m < n and m > 0:
                        b = randn(*batch, m, 2, dtype=d)
                        case("lstsq", {}, [a, b], lstsq_sol, [tr, False])
        # pinv / matrix_rank options
        for (m, n) in [(4, 4), (5, 3)]:
            a = randn(m, n, dtype=d)
            for atol, rtol in [(None, 0.5), (1.0, None), (0.0, None), (2.0, 0.1)]:
                case("pinv", {"atol": atol, "rtol": rtol}, [a],
                     lambda x, at=atol, rt=rtol: torch.linalg.pinv(x, atol=at, rtol=rt))
                case("matrix_rank", {"atol": atol, "rtol": rtol}, [a],
                     lambda x, at=atol, rt=rtol: torch.linalg.matrix_rank(x, atol=at, rtol=rt))
        h = sym(5, (), d)
        case("pinv", {"hermitian": True}, [h], lambda x: torch.linalg.pinv(x, hermitian=True))
        case("matrix_rank", {"hermitian": True}, [h], lambda x: torch.linalg.matrix_rank(x, hermitian=True))
        # singular and near-singular
        sing = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=d)
        sing3 = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [4.0, 5.0, 6.0]], dtype=d)
        zcol = torch.tensor([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]], dtype=d)
        batch_sing = torch.stack([torch.eye(2, dtype=d), sing])
        for a in [sing, sing3, zcol, batch_sing, torch.zeros(3, 3, dtype=d)]:
            case("det", {}, [a], torch.linalg.det)
            case("slogdet", {}, [a], torch.linalg.slogdet)
            case("logdet", {}, [a], torch.logdet)
            case("inv", {}, [a], torch.linalg.inv)
            case("solve", {}, [a, torch.ones(a.shape[:-1], dtype=d)], torch.linalg.solve)
            case("matrix_power", {"k": -1}, [a], lambda x: torch.linalg.matrix_power(x, -1))
            case("matrix_rank", {}, [a], torch.linalg.matrix_rank)
            case("cond", {"p": 1}, [a], lambda x: torch.linalg.cond(x, 1))
            case("pinv", {}, [a], torch.linalg.pinv)
        near = torch.tensor([[1.0, 2.0], [2.0, 4.0 + 1e-5]], dtype=d)
        for a in [near, torch.diag(torch.tensor([1.0, 1e-3, 1e3], dtype=d))]:
            case("det", {}, [a], torch.linalg.det)
            case("inv", {}, [a], torch.linalg.inv)
            case("slogdet", {}, [a], torch.linalg.slogdet)
        case("logdet", {}, [torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=d)], torch.logdet)
        # not positive-definite
        for a in [sing + 0 * sing, -torch.eye(3, dtype=d), torch.tensor([[4.0, 2.0, 1.0], [2.0, 1.0, 0.0], [1.0, 0.0, 3.0]], dtype=d),
                  torch.stack([torch.eye(2, dtype=d), torch.tensor([[1.0, 3.0], [3.0, 1.0]], dtype=d)]),
                  torch.tensor([[math.nan, 0.0], [0.0, 1.0]], dtype=d)]:
            for upper in [False, True]:
                case("cholesky", {"upper": upper}, [a], lambda x, u=upper: torch.linalg.cholesky(x, upper=u))
        # non-finite svd
        case("svd", {"full_matrices": False}, [torch.tensor([[math.nan, 2.0], [3.0, 4.0]], dtype=d)],
             lambda x: torch.linalg.svd(x, full_matrices=False))
        # vectors: cross, vecdot, vector_norm, norm
        x, y = randn(4, 3, dtype=d), randn(3, dtype=d)
        case("cross", {"dim": -1}, [x, y], lambda a, b: torch.linalg.cross(a, b))
        case("cross", {"dim": -1}, [x, y.unsqueeze(0)], lambda a, b: torch.linalg.cross(a, b))
        case("cross", {"dim": 0}, [randn(3, 4, dtype=d), randn(3, 1, dtype=d)], lambda a, b: torch.linalg.cross(a, b, dim=0))
        case("cross", {"dim": -1}, [randn(3, 2, dtype=d), randn(3, 2, dtype=d)], lambda a, b: torch.linalg.cross(a, b))
        case("vecdot", {"dim": -1}, [randn(4, 5, dtype=d), randn(5, dtype=d)], lambda a, b: torch.linalg.vecdot(a, b))
        case("vecdot", {"dim": 0}, [randn(4, 5, dtype=d), randn(4, 1, dtype=d)], lambda a, b: torch.linalg.vecdot(a, b, dim=0))
        case("vecdot", {"dim": -1}, [randn(4, 5, dtype=d), randn(4, 5, dtype=torch.float64 if dt == "f32" else torch.float32)],
             lambda a, b: torch.linalg.vecdot(a, b))
        v = randn(3, 4, dtype=d)
        for p in [2.0, 1.0, math.inf, -math.inf, 0.0, 3.5]:
            case("vector_norm", {"p": fmt(p), "dim": None}, [v], lambda a, p=p: torch.linalg.vector_norm(a, p))
            case("vector_norm", {"p": fmt(p), "dim": [1]}, [v], lambda a, p=p: torch.linalg.vector_norm(a, p, dim=1))
        for ordv, dim in [(None, None), ("fro", None), ("nuc", None), (2, None), (None, [0]), (3.0, [1]), (None, [0, 1]), (1, [1, 0])]:
            case("norm", {"p": fmt(ordv) if isinstance(ordv, float) else ordv, "dim": dim}, [v],
                 lambda a, o=ordv, di=dim: torch.linalg.norm(a, o, dim=di))
        case("norm", {"p": 2, "dim": None}, [randn(2, 3, 4, dtype=d)], lambda a: torch.linalg.norm(a, 2))
        # matrix_norm over other dims, keepdim
        t = randn(3, 4, 5, dtype=d)
        for p in ["fro", "nuc", 1, 2, math.inf]:
            for dims in [[0, 2], [2, 0]]:
                for keep in [False, True]:
                    case("matrix_norm", {"p": fmt(p) if isinstance(p, float) else p, "dim": dims, "keepdim": keep}, [t],
                         lambda a, p=p, di=dims, k=keep: torch.linalg.matrix_norm(a, p, dim=di, keepdim=k))
    # solve's and lstsq's vector-or-matrix rule and batch broadcasting
    for ash, bsh in [((2, 1, 3, 3), (4, 3, 2)), ((3, 3), (2, 3, 3)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3)),
                     ((2, 3, 3), (3, 2)), ((1, 3, 3), (5, 3)), ((3, 3), (3, 1)), ((0, 3, 3), (3,))]:
        a = well(3, ash[:-2])
        b = randn(*bsh)
        case("solve", {}, [a, b], torch.linalg.solve)
        if len(bsh) >= 2 or len(ash) == 2:
            case("lstsq", {}, [a, b], lstsq_sol)
    # refusals
    for dt in ["f16", "bf16", "i64", "i32"]:
        a = torch.ones(2, 2, dtype=DT[dt]) if dt[0] == "i" else (torch.eye(2) * 2).to(DT[dt])
        for op, fn in [("det", torch.linalg.det), ("inv", torch.linalg.inv), ("cholesky", torch.linalg.cholesky),
                       ("svdvals", torch.linalg.svdvals), ("eigvalsh", torch.linalg.eigvalsh), ("slogdet", torch.linalg.slogdet),
                       ("pinv", torch.linalg.pinv)]:
            case(op, {"upper": False, "uplo": "L"} if op in ("cholesky", "eigvalsh") else {}, [a], fn)
    for op, fn in [("det", torch.linalg.det), ("inv", torch.linalg.inv), ("cholesky", torch.linalg.cholesky),
                   ("eigvalsh", torch.linalg.eigvalsh), ("slogdet", torch.linalg.slogdet)]:
        for shp in [(2, 3), (3,), (2, 3, 4)]:
            case(op, {"upper": False, "uplo": "L"}, [torch.ones(*shp, dtype=torch.float64)], fn)
    case("solve", {}, [torch.eye(3, dtype=torch.float64).expand(2, 3, 3).contiguous(), torch.ones(3, 3, 2, dtype=torch.float64)], torch.linalg.solve)
    case("solve", {}, [torch.eye(3, dtype=torch.float64), torch.ones(4, dtype=torch.float64)], torch.linalg.solve)
    case("solve", {}, [torch.eye(3, dtype=torch.float64), torch.ones(3, dtype=torch.float32)], torch.linalg.solve)
    case("lstsq", {}, [torch.ones(3, 2, dtype=torch.float64), torch.ones(4, 1, dtype=torch.float64)], lstsq_sol)
    case("matrix_norm", {"p": 3}, [torch.ones(3, 3, dtype=torch.float64)], lambda x: torch.linalg.matrix_norm(x, 3))
    case("matrix_norm", {"p": "fro"}, [torch.ones(3, dtype=torch.float64)], lambda x: torch.linalg.matrix_norm(x))
    case("cond", {"p": 1}, [torch.ones(3, 2, dtype=torch.float64)], lambda x: torch.linalg.cond(x, 1))
    case("matrix_power", {"k": 2}, [torch.ones(2, 3, dtype=torch.float64)], lambda x: torch.linalg.matrix_power(x, 2))
    case("matrix_power", {"k": 2}, [torch.tensor([[1, 2], [3, 4]], dtype=torch.int64)], lambda x: torch.linalg.matrix_power(x, 2))


# ---------------------------------------------------------------- gradients

def grad_case(op, args, inputs, fn, transposed=None):
    """fn(*inputs) -> list of outputs; the loss is sum_i sum(W_i * out_i)."""
    transposed = transposed or [False] * len(inputs)
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    outs = fn(*leaves)
    ws = [randn(*o.shape, dtype=o.dtype) for o in outs]
    loss = sum((w * o).sum() for w, o in zip(ws, outs))
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    GRADS.append({
        "op": op, "args": args,
        "inputs": [enc(t.detach(), tr) for t, tr in zip(inputs, transposed)],
        "weights": [res(w) for w in ws],
        "outputs": [res(o.detach()) for o in outs],
        "grads": [res(g) if g is not None else None for g in grads],
    })


def qr_gauge(mode):
    def f(a):
        q, r = torch.linalg.qr(a, mode=mode)
        k = min(a.shape[-2], a.shape[-1])
        d = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)[..., :k]).detach()
        return [q * d.unsqueeze(-2), r * d.unsqueeze(-1)]
    return f


def eigh_gauge(uplo, c):
    def f(a):
        l, v = torch.linalg.eigh(a, UPLO=uplo)
        return [l, (v * c) @ v.mT]
    return f


def svd_gauge(c):
    def f(a):
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        return [s, (u * c) @ vh]
    return f


def gradient_cases():
    for dt in ["f64", "f32"]:
        d = DT[dt]
        for n in [1, 2, 3, 5, 8]:
            for batch in [(), (2,)]:
                for tr in [False, True]:
                    a = well(n, batch, d)
                    grad_case("det", {}, [a], lambda x: [torch.linalg.det(x)], [tr])
                    grad_case("slogdet", {}, [a], lambda x: [torch.linalg.slogdet(x)[1]], [tr])
                    grad_case("logdet", {}, [a.abs() + n * torch.eye(n, dtype=d)], lambda x: [torch.logdet(x)], [tr])
                    grad_case("inv", {}, [a], lambda x: [torch.linalg.inv(x)], [tr])
                    grad_case("solve", {}, [a, randn(*batch, n, 2, dtype=d)], lambda x, b: [torch.linalg.solve(x, b)], [tr, False])
                    grad_case("solve", {}, [a, randn(n, dtype=d)], lambda x, b: [torch.linalg.solve(x, b)], [tr, False])
                    s = spd(n, batch, d)
                    for upper in [False, True]:
                        grad_case("cholesky", {"upper": upper}, [s], lambda x, u=upper: [torch.linalg.cholesky(x, upper=u)], [tr])
                    h = sym(n, batch, d)
                    c = randn(n, dtype=d)
                    for uplo in ["L", "U"]:
                        grad_case("eigh", {"uplo": uplo, "c": [float(v) for v in c]}, [h], eigh_gauge(uplo, c), [tr])
                        grad_case("eigvalsh", {"uplo": uplo}, [h], lambda x, u=uplo: [torch.linalg.eigvalsh(x, UPLO=u)], [tr])
                    for k in [-2, -1, 2, 3, 6]:
                        grad_case("matrix_power", {"k": k}, [a], lambda x, k=k: [torch.linalg.matrix_power(x, k)], [tr])
                    grad_case("pinv", {}, [a], lambda x: [torch.linalg.pinv(x)], [tr])
                    grad_case("cond", {"p": None}, [a], lambda x: [torch.linalg.cond(x)], [tr])
                    for p in ["fro", "nuc", 2, -2, 1, math.inf]:
                        grad_case("matrix_norm", {"p": fmt(p) if isinstance(p, float) else p}, [a],
                                  lambda x, p=p: [torch.linalg.matrix_norm(x, p)], [tr])
        for (m, n) in [(3, 2), (5, 5), (6, 3), (2, 3), (3, 6), (8, 1)]:
            for batch in [(), (2,)]:
                for tr in [False, True]:
                    a = randn(*batch, m, n, dtype=d)
                    k = min(m, n)
                    if m >= n:
                        grad_case("qr", {"mode": "reduced"}, [a], qr_gauge("reduced"), [tr])
                        bb = randn(*batch, m, 2, dtype=d)
                        grad_case("lstsq", {}, [a, bb], lambda x, y: [torch.linalg.lstsq(x, y).solution], [tr, False])
                    else:
                        grad_case("qr", {"mode": "reduced"}, [a], qr_gauge("reduced"), [tr])
                    c = randn(k, dtype=d)
                    grad_case("svd", {"c": [float(v) for v in c]}, [a], svd_gauge(c), [tr])
                    grad_case("svdvals", {}, [a], lambda x: [torch.linalg.svdvals(x)], [tr])
                    grad_case("pinv", {}, [a], lambda x: [torch.linalg.pinv(x)], [tr])
        # singular det: PyTorch goes through the SVD
        for a in [torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=d),
                  torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype=d),
                  torch.zeros(3, 3, dtype=d),
                  torch.stack([torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=d), torch.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=d)])]:
            grad_case("det", {}, [a], lambda x: [torch.linalg.det(x)])
        x, y = randn(4, 3, dtype=d), randn(1, 3, dtype=d)
        grad_case("cross", {"dim": -1}, [x, y], lambda a, b: [torch.linalg.cross(a, b)])
        grad_case("vecdot", {"dim": -1}, [randn(4, 5, dtype=d), randn(5, dtype=d)], lambda a, b: [torch.linalg.vecdot(a, b)])


def main():
    forward_cases()
    gradient_cases()
    write_fixture(sys.argv[1], json.dumps({"generator": "benches/anchors/gen_linalg_s79.py", "torch": torch.__version__,
                                          "cases": CASES}))
    write_fixture(sys.argv[2], json.dumps({"generator": "benches/anchors/gen_linalg_s79.py", "torch": torch.__version__,
                                          "cases": GRADS}))
    print(len(CASES), "forward cases,", sum("error" in c for c in CASES), "errors;", len(GRADS), "gradient cases")


if __name__ == "__main__":
    main()
