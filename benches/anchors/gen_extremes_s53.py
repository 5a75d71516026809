"""Ties in PyTorch's CPU extremes, for
crates/strata-tensor/tests/suite/pytorch_extremes_s53.rs (session 53).

    OMP_NUM_THREADS=1 python benches/anchors/gen_extremes_s53.py N SEED OUT.json.gz [big]

Two families of random cases, drawn from values that tie (+0.0 and -0.0,
repeated small integers, NaN):

- "binary": torch.maximum / torch.minimum of two operands of f32, f64, f16
  or bf16 (sometimes of two dtypes, or a 0-d operand), broadcast, permuted,
  sliced with a step; both operand orders (each case is one order, drawn).
  Which zero comes back depends on PyTorch's loop: its vectorised part
  returns the second operand of a tie, its scalar part the first.
- "reduce": max/min/argmax/argmin along a dim (keepdim or not), argmax and
  argmin over everything (dim None), and max()/min() over everything, of
  f32, f64, f16, bf16, i64 or i32 inputs, contiguous or through a view.

A tensor travels as `base` (row-major values of `shape`, run-length encoded
as [[u64 bits of the f64 value, count], ...]), `perm` and `views` (applied in
order: ["slice", dim, start, step] or ["expand", dim, size], the latter
inserting a broadcast dim). Outputs travel the same way (`out`, and `idx` as
plain integers for index outputs). "big" draws a few operands of ~70,000
elements (past strata's parallel threshold)."""
import json
import struct
import sys

import torch
from fixture_io import write_fixture

torch.set_num_threads(1)
DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i64": torch.int64, "i32": torch.int32}
FLOATS = ["f32", "f64", "f16", "bf16"]
SIZES = [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 63, 64, 65, 100]
SMALL = [1, 2, 3, 5, 8, 9, 17]


def bits(v):
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def rle(t):
    out = []
    for v in t.double().flatten().tolist():
        b = bits(v)
        if out and out[-1][0] == b:
            out[-1][1] += 1
        else:
            out.append([b, 1])
    return out


def draw_shape(d, nd):
    """nd sizes: one from SIZES (across PyTorch's vector widths), the rest
    small; at most 1,500 elements (a small fixture)."""
    while True:
        s = [d.pick(SMALL) for _ in range(nd)]
        if nd:
            s[d.r(nd)] = d.pick(SIZES)
        n = 1
        for k in s:
            n *= k
        if n <= 1500:
            return s


class Draw:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def r(self, k):
        return int(torch.randint(0, k, (1,), generator=self.g))

    def pick(self, xs):
        return xs[self.r(len(xs))]

    def values(self, n, dt, kind):
        """n values of a tie-heavy pool for dtype dt."""
        if dt.startswith("i"):
            pool = [0, 1, 2, -1, 5]
        elif kind == "zeros":
            pool = [0.0, -0.0, 0.0, -0.0, 1.0, -1.0]
        else:
            pool = [0.0, -0.0, 1.0, 2.0, -2.0, float("nan"), 2.0, 1.0]
        if self.r(5) == 0:
            # A short repeated pattern (long runs compress well).
            pat = [self.pick(pool) for _ in range(1 + self.r(5))]
            return [pat[i % len(pat)] for i in range(n)]
        return [self.pick(pool) for _ in range(n)]

    def operand(self, shape, dt, kind):
        """A tensor of `shape` seen through a random view: its base, perm
        and views, and the view itself."""
        nd = len(shape)
        # The base is laid out so that after `perm` and the views the
        # result has `shape` (slices are drawn first to size the base).
        views, want = [], list(shape)
        expand = None
        if nd and self.r(5) == 0:
            k = self.r(nd)
            if want[k] > 1:
                expand = (k, want[k])
                want = want[:k] + want[k + 1:]
        slice_ = None
        if want and self.r(4) == 0:
            k = self.r(len(want))
            start, step = self.r(2), 2 + self.r(2)
            slice_ = (k, start, step)
            full = want[:]
            full[k] = start + step * (want[k] - 1) + 1 + self.r(2)
        else:
            full = want[:]
        perm = torch.randperm(len(full), generator=self.g).tolist() if len(full) > 1 and self.r(2) else list(range(len(full)))
        # base.permute(perm) has shape `full`.
        base_shape = [0] * len(full)
        for i, p in enumerate(perm):
            base_shape[p] = full[i]
        n = 1
        for s in base_shape:
            n *= s
        base = torch.tensor(self.values(n, dt, kind), dtype=torch.float64).reshape(base_shape).to(DT[dt])
        v = base.permute(perm)
        if slice_ is not None:
            # full[k] = start + step * (want[k] - 1) + 1 or 2: want[k] remain.
            k, start, step = slice_
            v = v[(slice(None),) * k + (slice(start, None, step),)]
            views.append(["slice", k, start, step])
        if expand is not None:
            k, size = expand
            v = v.unsqueeze(k)
            target = list(v.shape)
            target[k] = size
            v = v.expand(target)
            views.append(["expand", k, size])
        assert list(v.shape) == list(shape), (v.shape, shape)
        spec = {"dtype": dt, "shape": base_shape, "base": rle(base), "perm": perm, "views": views}
        return spec, v


def binary_case(d, big):
    dt = d.pick(FLOATS)
    nd = d.r(4)
    if big:
        out_shape = [70001 + d.r(100)] if d.r(2) else [3, 23339 + d.r(40)]
    else:
        out_shape = draw_shape(d, nd)
    shapes = []
    for _ in range(2):
        s = list(out_shape)
        if d.r(3) == 0 and s:
            # Broadcast: some dims of size 1, or fewer leading dims.
            for k in range(len(s)):
                if d.r(2):
                    s[k] = 1
            if d.r(2):
                s = s[d.r(len(s) + 1):]
        shapes.append(s)
    dts = [dt, dt]
    if d.r(5) == 0:
        dts[d.r(2)] = d.pick(FLOATS)
    specs, views = zip(*(d.operand(s, t, "zeros" if d.r(4) else "mixed") for s, t in zip(shapes, dts)))
    op = d.pick(["maximum", "minimum"])
    out = getattr(torch, op)(views[0], views[1])
    return {"family": "binary", "op": op, "a": specs[0], "b": specs[1],
            "out_shape": list(out.shape), "out_dtype": str(out.dtype).replace("torch.", ""), "out": rle(out)}


def reduce_case(d, big):
    dt = d.pick(FLOATS + ["i64", "i32"])
    nd = 1 + d.r(3)
    if big:
        shape = [70001 + d.r(100)]
    else:
        shape = draw_shape(d, nd)
    spec, v = d.operand(shape, dt, "mixed" if d.r(2) else "zeros")
    op = d.pick(["max", "min", "argmax", "argmin", "argmax_all", "argmin_all", "max_all", "min_all"])
    keep = bool(d.r(2))
    dim = d.r(v.dim()) - (v.dim() if d.r(2) else 0) if v.dim() else 0
    case = {"family": "reduce", "op": op, "a": spec, "dim": dim, "keepdim": keep}
    if op in ("max", "min"):
        vals, idx = getattr(v, op)(dim, keep)
        case.update(out=rle(vals), idx=idx.flatten().tolist(), out_shape=list(vals.shape))
    elif op in ("argmax", "argmin"):
        idx = getattr(v, op)(dim, keep)
        case.update(idx=idx.flatten().tolist(), out_shape=list(idx.shape))
    elif op in ("argmax_all", "argmin_all"):
        idx = getattr(v, op[:-4])(None, keep)
        case.update(idx=idx.flatten().tolist(), out_shape=list(idx.shape))
    else:
        vals = getattr(v, op[:-4])()
        case.update(out=rle(vals), out_shape=list(vals.shape))
    return case



def main():
    n, seed, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    big = len(sys.argv) > 4 and sys.argv[4] == "big"
    d = Draw(seed)
    cases = []
    for i in range(n):
        cases.append(binary_case(d, big) if d.r(2) else reduce_case(d, big))
    write_fixture(path, json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                                    "capability": torch.backends.cpu.get_cpu_capability(), "cases": cases}))


if __name__ == "__main__":
    main()
