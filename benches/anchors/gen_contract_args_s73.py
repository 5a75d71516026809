#!/usr/bin/env python3
"""Session 73: PyTorch 2.15's CPU answers (one thread) for contractions and
products called with hostile equations, dims and shapes, written to
crates/strata-tensor/tests/data/contract_args_s73.json.gz
(crates/strata-tensor/tests/suite/contract_args_s73.rs).

The ops: einsum (equations drawn from subscript letters, upper and lower
case, ellipses, an explicit or implicit output, and now and then a stray
character, a second arrow, a missing or extra comma, a broken ellipsis, a
repeated or unknown output letter; operand shapes drawn to fit the
equation, then sometimes one size or dim off), tensordot (a count or dim
pairs, now and then out of range, repeated or of mismatched sizes), mm,
bmm, matmul, addmm, addmv, addr, baddbmm, addbmm (shapes near the ones the
op wants, the added tensor broadcast or not), kron, outer, inner, trace,
cross (a dim, hostile now and then) and lerp (a scalar or a tensor weight,
broadcast), on f32 tensors of 0 to 4 dims of sizes 0 to 3 holding small
integers. Each case keeps PyTorch's results (shapes and values) or the fact
that it raised.

Left out: results over MAX_RESULT elements; errors about allocating;
PyTorch's internal limit on integer lists ("SymIntArrayRef"); and addmv of
an empty matrix `[n, k]` with a `self` not of shape `[n]`: PyTorch's
shortcut for an empty matrix multiplies the unexpanded `self` into the
result, which takes self's shape (`[]` or `[1]`, with a deprecation warning
"An output with one or more elements was resized" where n > 0) instead of
`[n]`; strata gives `[n]`. Any other call that draws that warning is left
out too (none did).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_contract_args_s73.py \\
        crates/strata-tensor/tests/data/contract_args_s73.json.gz
"""
import math
import random
import sys
import warnings

import torch

from fixture_io import LeftOut, outcome, write_cases

torch.set_num_threads(1)
assert not torch.backends.opt_einsum.is_available()

MAX_RESULT = 4096
HUGE = [-(2 ** 63), -(2 ** 62), -(2 ** 32), -(2 ** 31) - 1, 2 ** 31, 2 ** 32, 2 ** 62,
        2 ** 63 - 1]
OPS = (["einsum"] * 8 + ["tensordot"] * 2 + ["mm", "bmm", "matmul", "matmul", "addmm",
       "addmv", "addr", "baddbmm", "addbmm", "kron", "outer", "inner", "trace", "cross",
       "lerp"])
LETTERS = "ijkabIJ"
STRAY = ["1", " ", ".", "..", "....", "-", ">", "*", "é", ",", "->", "_", "Z", "z"]


Skip = LeftOut


def values(shape, start=0):
    n = math.prod(shape)
    return torch.tensor([float(((k + start) * 7) % 5 - 2) for k in range(n)]).reshape(shape)


def perturb(r, shape, p=0.2):
    """`shape`, now and then with one size changed or a dim more or less."""
    s = list(shape)
    if r.random() < p:
        k = r.random()
        if s and k < 0.5:
            i = r.randrange(len(s))
            s[i] = r.choice([x for x in (0, 1, 2, 3, 4) if x != s[i]])
        elif s and k < 0.75:
            del s[r.randrange(len(s))]
        else:
            s.insert(r.randint(0, len(s)), r.randint(0, 3))
    return s


def rshape(r, lo=0, hi=4):
    return [r.choice([0, 1, 2, 2, 3, 3]) for _ in range(r.randint(lo, hi))]


def draw_einsum(r):
    k = r.choice([1, 1, 2, 2, 2, 3])
    sizes = {c: r.choice([0, 1, 2, 2, 3, 3]) for c in LETTERS}
    ell = [r.choice([1, 2, 3]) for _ in range(r.randint(0, 2))]
    terms, shapes = [], []
    for _ in range(k):
        n = r.randint(0, 3)
        subs = [r.choice(LETTERS) for _ in range(n)]
        shape = [sizes[c] for c in subs]
        if r.random() < 0.25:
            at = r.randint(0, n)
            m = r.randint(0, len(ell))
            part = [r.choice([1, e]) for e in ell[len(ell) - m:]]
            subs.insert(at, "...")
            shape[at:at] = part
        terms.append("".join(subs))
        shapes.append(perturb(r, shape, 0.12))
    eq = ",".join(terms)
    if r.random() < 0.6:
        used = sorted({c for t in terms for c in t if c.isalpha()})
        out = r.sample(used, r.randint(0, len(used))) if used else []
        if r.random() < 0.1:
            out.append(r.choice(LETTERS))
        if any("..." in t for t in terms) and r.random() < 0.6:
            out.insert(r.randint(0, len(out)), "...")
        elif r.random() < 0.05:
            out.append("...")
        eq += "->" + "".join(out)
    if r.random() < 0.2:
        at = r.randint(0, len(eq))
        eq = eq[:at] + r.choice(STRAY) + eq[at:]
    if r.random() < 0.05 and shapes:
        shapes = shapes[:-1] if r.random() < 0.5 else shapes + [rshape(r, 0, 2)]
    if r.random() < 0.1:
        eq = eq.replace(" ", "") if " " in eq else " " + eq.replace(",", " , ") + " "
    return [eq, shapes]


def iv(r, small, p):
    return r.choice(HUGE) if r.random() < p else r.choice(small)


def draw(r):
    op = r.choice(OPS)
    if op == "einsum":
        return op, draw_einsum(r)
    if op == "tensordot":
        a = rshape(r, 0, 3)
        if r.random() < 0.4:
            n = iv(r, [0, 1, 2, 3, -1], 0.1)
            b = a[len(a) - n:] if 0 <= n <= len(a) else []
            b = perturb(r, b + rshape(r, 0, 1), 0.15)
            return op, [a, b, n]
        m = r.randint(0, 2)
        da = [iv(r, list(range(-len(a) - 1, len(a) + 1)) or [0], 0.08) for _ in range(m)]
        b = rshape(r, 0, 3)
        db = []
        for d in da:
            j = r.randint(0, len(b))
            ok = -len(a) <= d < len(a)
            b.insert(j, a[d] if ok and r.random() < 0.85 else r.randint(0, 3))
            db.append(iv(r, [j, j, j - len(b), j + 1], 0.08))
        if r.random() < 0.1:
            db = db[:-1] if db else [0]
        return op, [a, b, [da, db]]
    n, k, m, bt = (r.choice([0, 1, 2, 3]) for _ in range(4))
    if op == "mm":
        return op, [perturb(r, [n, k]), perturb(r, [k, m])]
    if op == "bmm":
        return op, [perturb(r, [bt, n, k]), perturb(r, [bt, k, m])]
    if op == "matmul":
        a = rshape(r, 1, 3) if r.random() < 0.5 else rshape(r, 0, 4)
        b = [a[-1]] + rshape(r, 0, 1) if a and r.random() < 0.6 else rshape(r, 0, 3)
        if len(a) >= 3 and r.random() < 0.5:
            b = [r.choice([1, a[0]])] + b if len(b) >= 2 else b
        return op, [a, perturb(r, b, 0.1)]
    beta, alpha = r.choice([1.0, 0.0, 0.5, -2.0]), r.choice([1.0, 0.0, 2.0])
    if op == "addmm":  # strata's addmm is PyTorch's with beta = alpha = 1
        out = r.choice([[n, m], [m], [1, m], [n, 1], [], [1]])
        return op, [perturb(r, out, 0.1), perturb(r, [n, k], 0.1), perturb(r, [k, m], 0.1),
                    1.0, 1.0]
    if op == "addmv":
        return op, [perturb(r, r.choice([[n], [1], []]), 0.1), perturb(r, [n, k], 0.1),
                    perturb(r, [k], 0.1), beta, alpha]
    if op == "addr":
        return op, [perturb(r, r.choice([[n, m], [m], [1, 1], []]), 0.1), perturb(r, [n], 0.1),
                    perturb(r, [m], 0.1), beta, alpha]
    if op == "baddbmm":
        return op, [perturb(r, r.choice([[bt, n, m], [n, m], [m], []]), 0.1),
                    perturb(r, [bt, n, k], 0.1), perturb(r, [bt, k, m], 0.1), beta, alpha]
    if op == "addbmm":
        return op, [perturb(r, r.choice([[n, m], [m], []]), 0.1), perturb(r, [bt, n, k], 0.1),
                    perturb(r, [bt, k, m], 0.1), beta, alpha]
    if op == "kron":
        return op, [rshape(r, 0, 3), rshape(r, 0, 3)]
    if op == "outer":
        return op, [perturb(r, [n], 0.15), perturb(r, [m], 0.15)]
    if op == "inner":
        a = rshape(r, 0, 3)
        return op, [a, perturb(r, rshape(r, 0, 2) + a[-1:], 0.15)]
    if op == "trace":
        return op, [perturb(r, [n, m], 0.15)]
    if op == "cross":
        a = rshape(r, 0, 2)
        a.insert(r.randint(0, len(a)), 3)
        a = perturb(r, a, 0.1)
        b = [r.choice([1, s]) for s in a] if r.random() < 0.3 else list(a)
        if r.random() < 0.1:
            b = perturb(r, b, 1.0)
        nd = len(a)
        return op, [a, b, iv(r, list(range(-nd - 1, nd + 1)) or [0, -1], 0.1)]
    # lerp
    a = rshape(r, 0, 3)
    e = [r.choice([1, s]) for s in a] if r.random() < 0.3 else list(a)
    w = r.choice([0.5, -1.0, 2.0]) if r.random() < 0.5 else perturb(
        r, [r.choice([1, s]) for s in a][r.randint(0, len(a)):], 0.1)
    return op, [a, perturb(r, e, 0.1), w]


def run(op, a):
    if op == "einsum":
        return torch.einsum(a[0], *[values(s, k) for k, s in enumerate(a[1])])
    if op == "tensordot":
        x, y = values(a[0]), values(a[1], 1)
        return torch.tensordot(x, y, dims=a[2] if isinstance(a[2], int) else (a[2][0], a[2][1]))
    ts = [values(s, k) for k, s in enumerate(x for x in a if isinstance(x, list))]
    if op in ("mm", "bmm", "matmul", "kron", "outer", "inner"):
        return getattr(torch, op)(*ts)
    if op == "trace":
        return torch.trace(ts[0])
    if op in ("addmm", "addmv", "addr", "baddbmm", "addbmm"):
        return getattr(torch, op)(*ts, beta=a[3], alpha=a[4])
    if op == "cross":
        return torch.linalg.cross(ts[0], ts[1], dim=a[2])
    w = a[2] if isinstance(a[2], float) else values(a[2], 2)
    return torch.lerp(ts[0], ts[1], w)


def empty_addmv_shortcut(op, a):
    """addmv of an empty matrix with a self not of the result's shape."""
    return op == "addmv" and len(a[1]) == 2 and math.prod(a[1]) == 0 and a[0] != a[1][:1]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/contract_args_s73.json.gz"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    r = random.Random(7302)
    cases, left_out = [], 0
    for _ in range(count):
        op, a = draw(r)
        def call():
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                y = run(op, a)
            if empty_addmv_shortcut(op, a) or any("was resized" in str(w.message) for w in seen):
                raise Skip
            return y
        try:
            c = outcome(call, MAX_RESULT, skip_errors=("allocate", "SymInt"))
        except Skip:
            left_out += 1
            continue
        cases.append({"op": op, "args": a, **c})
    write_cases(out_path, "benches/anchors/gen_contract_args_s73.py", cases, left_out)


if __name__ == "__main__":
    main()
