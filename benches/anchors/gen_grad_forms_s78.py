#!/usr/bin/env python3
"""Session 78: PyTorch 2.15's CPU answers (one thread) for the gradients of
torch.cdist, torch.diff, torch.meshgrid and torch.cartesian_prod, written to
crates/strata-autograd/tests/data/grad_forms_s78.json.gz
(crates/strata-autograd/tests/suite/grad_forms_s78.rs checks strata's Var
forms: values, gradients of every float input, errors).

- cdist: x1 [B1.., r1, c] and x2 [B2.., r2, c] with broadcasting batch dims
  (0 to 2 of them), 1 to 5 rows (now and then 26 to 30, where p = 2 takes
  PyTorch's matrix-product form, or 0 rows or columns), 1 to 4 columns,
  p in {0, 0.5, 1, 1.5, 2, 3, inf}, compute_mode left out or (p = 2) one of
  PyTorch's three, f32 or f64. Values: uniform in [-2, 2]; or small
  integers (-1 to 2), which tie coordinates (p = inf's argmax ties),
  zero differences and zero distances; or uniform with some of x2's rows
  copies of x1's (zero distances). In the matrix-product form PyTorch's
  distance of two identical rows is rounding noise unless the values are
  small integers (where its arithmetic is exact), so copied rows are drawn
  there only with integer values.
- diff: inputs of 1 to 3 dims (sizes 0 to 4), n from 0 to 4, any dim (some
  negative), prepend and append (each or both, sizes 0 to 2 along dim),
  f32 or f64 (an f64 prepend now and then: cat promotes); a few bool and
  i64 inputs (values only) and refused calls (0-d input, negative n,
  mismatched prepend).
- meshgrid: 1 to 3 inputs of 0 or 1 dims (sizes 0 to 4), "ij" or "xy";
  grid i's upstream gradient has element j = ((3 j + i) mod 7 - 3) / 2.
- cartesian_prod: 1 to 3 1-D inputs (sizes 0 to 4).

The upstream gradient of a single result has element j =
((3 j) mod 7 - 3) / 2. Recorded: the result(s) or the error's first line,
and each float input's gradient (absent where PyTorch gives none).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_grad_forms_s78.py \\
        crates/strata-autograd/tests/data/grad_forms_s78.json.gz
"""
import json
import math
import random
import sys

import torch

from fixture_io import fmt, write_fixture

torch.set_num_threads(1)

DTYPES = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64, "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
MODES = {None: None, "use_mm": "use_mm_for_euclid_dist", "no_mm": "donot_use_mm_for_euclid_dist",
         "if_necessary": "use_mm_for_euclid_dist_if_necessary"}


def record(t):
    """A tensor as the fixtures' `input` reader takes it."""
    if t.dtype == torch.bool:
        vals = [bool(v) for v in t.flatten().tolist()]
    elif t.dtype == torch.int64:
        vals = [int(v) for v in t.flatten().tolist()]
    else:
        vals = [fmt(float(v)) for v in t.double().flatten().tolist()]
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape), "values": vals, "t": False}


def result(t):
    return {"dtype": NAMES[t.dtype], "shape": list(t.shape),
            "data": [fmt(float(v)) for v in t.detach().double().flatten().tolist()]}


def upstream(shape, k=0):
    n = math.prod(shape)
    return torch.tensor([((3 * j + k) % 7 - 3) / 2 for j in range(n)], dtype=torch.float64).reshape(shape)


def uniform(r, shape, dtype):
    return torch.tensor([r.uniform(-2, 2) for _ in range(math.prod(shape))],
                        dtype=torch.float64).reshape(shape).to(DTYPES[dtype])


def integers(r, shape, dtype):
    return torch.tensor([float(r.randint(-1, 2)) for _ in range(math.prod(shape))],
                        dtype=torch.float64).reshape(shape).to(DTYPES[dtype])


def run(case, inputs, call):
    """Calls `call` on leaves made from `inputs`, records the result(s) or the
    error, then backpropagates the upstream gradients and records each float
    input's gradient."""
    case["inputs"] = [record(t) for t in inputs]
    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    try:
        out = call(*leaves)
    except Exception as e:  # noqa: BLE001 - PyTorch raises several types
        case["error"] = str(e).split("\n")[0][:200]
        return case
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    case["results"] = [result(o) for o in outs]
    losses = [(o.double() * upstream(list(o.shape), k)).sum() for k, o in enumerate(outs) if o.requires_grad]
    if losses:
        sum(losses).backward()
        case["grads"] = [None if l.grad is None else [fmt(float(v)) for v in l.grad.double().flatten().tolist()]
                         for l in leaves]
    return case


def batch_pair(r):
    b1 = [r.choice([1, 2, 3]) for _ in range(r.choice([0, 0, 1, 1, 2]))]
    b2 = [s if r.random() < 0.7 else 1 for s in b1]
    if b2 and r.random() < 0.3:
        b2 = b2[1:]
    if r.random() < 0.15:
        b1, b2 = b2, b1
    return b1, b2


def cdist_case(r):
    dtype = r.choice(["f32", "f64"])
    p = r.choice([0.0, 0.5, 1.0, 1.5, 2.0, 2.0, 3.0, math.inf])
    b1, b2 = batch_pair(r)
    r1, r2, c = r.randint(1, 5), r.randint(1, 5), r.randint(1, 4)
    roll = r.random()
    if roll < 0.15:
        big = r.randint(26, 30)
        if r.random() < 0.5:
            r1 = big
        else:
            r2 = big
        if r.random() < 0.5:
            p = 2.0
    elif roll < 0.19:
        if r.random() < 0.5:
            r1 = 0
        else:
            c = 0
    mode = r.choice([None, None, None, "use_mm", "no_mm", "if_necessary"]) if p == 2.0 else None
    mm = p == 2.0 and (mode == "use_mm" or (mode in (None, "if_necessary") and (r1 > 25 or r2 > 25)))
    kind = r.choice(["uniform", "uniform", "integers", "copies"])
    if mm and kind == "copies":
        kind = "integers"
    make = integers if kind == "integers" else uniform
    x1 = make(r, b1 + [r1, c], dtype)
    x2 = make(r, b2 + [r2, c], dtype)
    if kind in ("copies", "integers") and r1 > 0 and r2 > 0 and c > 0 and r.random() < 0.7:
        # Some of x2's rows are x1's (where the batch dims let them line up).
        x2 = x2.clone()
        for j in range(r2):
            if r.random() < 0.5:
                i = r.randrange(r1)
                src = x1[..., i, :]
                dst = x2[..., j, :]
                try:
                    dst.copy_(src.expand(dst.shape) if src.dim() <= dst.dim() else src[(0,) * (src.dim() - dst.dim())])
                except RuntimeError:
                    pass
    case = {"op": "cdist", "args": {"p": fmt(p), "mode": mode}, "kind": kind}
    kw = {} if mode is None else {"compute_mode": MODES[mode]}
    return run(case, [x1, x2], lambda a, b: torch.cdist(a, b, p, **kw))


def diff_case(r):
    roll = r.random()
    if roll < 0.06:
        dtype = r.choice(["bool", "i64"])
    else:
        dtype = r.choice(["f32", "f64"])
    nd = r.randint(1, 3)
    shape = [r.randint(0, 4) if r.random() < 0.15 else r.randint(1, 4) for _ in range(nd)]
    dim = r.randint(-nd, nd - 1)
    n = r.randint(0, 4)
    if r.random() < 0.03:
        n = -1

    def make(sh, dt):
        if dt == "bool":
            return torch.tensor([r.random() < 0.5 for _ in range(math.prod(sh))], dtype=torch.bool).reshape(sh)
        if dt == "i64":
            return torch.tensor([r.randint(-5, 5) for _ in range(math.prod(sh))], dtype=torch.int64).reshape(sh)
        return uniform(r, sh, dt)

    x = make(shape, dtype)
    if r.random() < 0.02:
        x = make([], dtype)
    extra = []
    names = []
    for name in ("prepend", "append"):
        if r.random() < 0.35:
            sh = list(shape)
            if x.dim() > 0:
                sh[dim] = r.randint(0, 2)
                if r.random() < 0.05:
                    sh[(dim + 1) % nd] += 1
            pdt = dtype if r.random() < 0.85 or dtype not in ("f32", "f64") else r.choice(["f32", "f64"])
            extra.append(make(sh, pdt))
            names.append(name)
    case = {"op": "diff", "args": {"n": n, "dim": dim, "parts": names}}

    def call(x, *rest):
        kw = dict(zip(names, rest))
        return torch.diff(x, n, dim, **kw)
    return run(case, [x] + extra, call)


def meshgrid_case(r):
    dtype = r.choice(["f32", "f64"])
    k = r.randint(1, 3)
    shapes = [[] if r.random() < 0.2 else [r.randint(0, 4) if r.random() < 0.1 else r.randint(1, 4)]
              for _ in range(k)]
    indexing = r.choice(["ij", "xy"])
    xs = [uniform(r, sh, dtype) for sh in shapes]
    case = {"op": "meshgrid", "args": {"indexing": indexing}}
    return run(case, xs, lambda *a: torch.meshgrid(*a, indexing=indexing))


def cartesian_case(r):
    dtype = r.choice(["f32", "f64"])
    k = r.randint(1, 3)
    shapes = [[r.randint(0, 4) if r.random() < 0.1 else r.randint(1, 4)] for _ in range(k)]
    xs = [uniform(r, sh, dtype) for sh in shapes]
    case = {"op": "cartesian_prod", "args": {}}
    return run(case, xs, lambda *a: torch.cartesian_prod(*a))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/grad_forms_s78.json.gz"
    r = random.Random(7811)
    cases = []
    for _ in range(700):
        cases.append(cdist_case(r))
    for _ in range(250):
        cases.append(diff_case(r))
    for _ in range(80):
        cases.append(meshgrid_case(r))
    for _ in range(60):
        cases.append(cartesian_case(r))
    doc = {"generator": "benches/anchors/gen_grad_forms_s78.py", "torch": torch.__version__, "cases": cases}
    write_fixture(path, json.dumps(doc, allow_nan=False))
    print("%d cases (%d errors, %d with gradients) -> %s" % (
        len(cases), sum("error" in c for c in cases), sum("grads" in c for c in cases), path))


if __name__ == "__main__":
    main()
