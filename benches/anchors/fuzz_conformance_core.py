#!/usr/bin/env python3
"""Writes conformance/fuzz_core.json: seeded random tensor programs over the
ops of FORMAT.md section 7.1 (views, broadcasting, element-wise and creation
ops, reductions, matmul and addmm, and their errors), with PyTorch's answers.

The file has the format of ../shared/conformance/FORMAT.md (group
`fuzz_core`, split `fuzz`) and is replayed by
crates/strata-tensor/tests/conformance.rs (`project_conformance`).

Each program is built step by step while PyTorch runs it: operands are made
non-contiguous by view steps over contiguous inputs (transpose, permute,
slices with steps, narrow, select, expand, as_strided), with junk values
(-7.5, 77, true) in the skipped places of a base; values mix small exact
numbers with nan, inf, -0.0 and integers near their dtype's limits; scalars
of each Python kind take part in type promotion. A step that PyTorch rejects
becomes an error step, with the class of FORMAT.md section 6 read from
PyTorch's message (a message the table below does not know drops the step).

Left out on purpose (not defined by FORMAT.md or not deterministic):
- float sums, means and matmuls whose exact value the accumulator cannot
  hold (their result would depend on the order of the additions);
- in-place writes through an as_strided view whose elements overlap (the
  result depends on the order of the writes), and copy_/addcmul_ whose source
  overlaps the destination partly;
- integer division of the smallest integer by -1 (PyTorch may die of SIGFPE);
- float -> integer conversions (to_dtype, copy_) of NaN, infinities and
  values beyond the integer's range, which C leaves undefined (PyTorch gives
  what the x86 instruction gives: the smallest i32/i64);
- views, reshapes and is_contiguous of element-wise, reduction and matmul
  results, whose strides PyTorch chooses (layout `info`), so the strides of
  the view would not be defined by FORMAT.md either;
- a step that fails in PyTorch after writing part of its output;

Usage (PyTorch on the CPU, one thread):
    python3 benches/anchors/fuzz_conformance_core.py [--seed 8] [--count 700]
        [--out conformance/fuzz_core.json]
"""

import argparse
import math
import json
import platform
import random
import re
from fractions import Fraction

import torch

DTYPES = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"]
FLOATS = ["f32", "f64", "f16", "bf16"]
TDT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
       "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64,
       "u8": torch.uint8, "bool": torch.bool}
NAME = {v: k for k, v in TDT.items()}
EPS = {"f32": 2.0 ** -23, "f64": 2.0 ** -52, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}
VIEW_OPS = {"view", "reshape", "transpose", "t", "permute", "narrow", "select", "slice",
            "expand", "squeeze", "unsqueeze", "flatten", "as_strided", "contiguous",
            "zeros", "ones", "full", "arange"}

# PyTorch's message -> FORMAT.md section 6 class. The first match wins.
ERRORS = [
    (r"must match the size of tensor b", "broadcast"),
    (r"doesn't match the broadcast shape", "broadcast"),
    (r"can't be cast to the desired output type", "dtype"),
    (r"not implemented for", "dtype"),
    (r"with (a bool tensor|two bool tensors) is not supported", "dtype"),
    (r"does not support bool input", "dtype"),
    (r"input tensors must have the same dtype", "dtype"),
    (r"is outside the representable range of", "value"),
    (r"does not match the length of the desired ordering", "shape"),
    (r"on a bool tensor is not supported", "dtype"),
    (r"Boolean inputs not supported", "dtype"),
    (r"where expected condition to be a boolean tensor", "dtype"),
    (r"could not infer output dtype", "dtype"),
    (r"expected m1 and m2 to have the same dtype", "dtype"),
    (r"self and mat2 must have the same dtype", "dtype"),
    (r"mat1 and mat2 must have the same dtype", "dtype"),
    (r"expected scalar type \w+ but found", "dtype"),
    (r"value cannot be converted to type", "value"),
    (r"is invalid for input of size", "shape"),
    (r"view size is not compatible", "layout"),
    (r"only one dimension can be inferred", "shape"),
    (r"cannot reshape tensor of 0 elements", "shape"),
    (r"expected both vectors to have same dtype", "dtype"),
    (r"Dimension out of range", "dim"),
    (r"appears multiple times in the list of dims", "dim"),
    (r"repeated dim", "dim"),
    (r"start_dim cannot come after end_dim", "dim"),
    (r"cannot be applied to a 0-dim tensor", "dim"),
    (r"start out of range", "index"),
    (r"exceeds dimension size", "index"),
    (r"out of range for tensor of size", "index"),
    (r"length must be non-negative", "value"),
    (r"The expanded size of the tensor", "shape"),
    (r"the number of sizes provided", "shape"),
    (r"are out of bounds for storage", "bounds"),
    (r"Negative strides are not supported", "value"),
    (r"invalid storage offset", "value"),
    (r"mismatch in length of strides and shape", "shape"),
    (r"refers to a single memory location", "overlap"),
    (r"refer to a single memory location", "overlap"),
    (r"Expected reduction dim", "empty"),
    (r"mat1 and mat2 shapes cannot be multiplied", "shape"),
    (r"must be a matrix", "shape"),
    (r"must be a 3D tensor", "shape"),
    (r"Expected size for first two dimensions of batch2", "shape"),
    (r"inconsistent tensor size", "shape"),
    (r"both arguments to matmul need to be at least 1D", "shape"),
    (r"expects a tensor with <= 2 dimensions", "shape"),
    (r"number of dims don't match in permute", "shape"),
    (r"negative dimension", "shape"),
    (r"Dimension size must be non-negative", "shape"),
    (r"size mismatch, got input", "shape"),
    (r"slice step must be positive", "value"),
    (r"step must be nonzero", "value"),
    (r"bound inconsistent with step sign", "value"),
    (r"At least one of 'min' or 'max' must not be None", "value"),
    (r"ZeroDivisionError", "value"),
]


def classify(e):
    msg = str(e)
    for pat, cls in ERRORS:
        if re.search(pat, msg):
            return cls
    return None


class Skip(Exception):
    """The case is left out (see the module docstring)."""


def fmt(x):
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
    return x


def scalar_json(v):
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    return {"float": fmt(float(v))}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class Gen:
    def __init__(self, rng, cid):
        self.rng = rng
        self.cid = cid
        self.inputs = []       # JSON records
        self.steps = []        # JSON records
        self.env = {}          # name -> tensor or bool
        self.order = []        # binding order
        self.made_by = {}      # name -> (op, same-dtype flag for to_dtype)
        self.tol = {}          # name -> dtype whose exp/log tolerance it carries
        self.tainted = set()   # storages (data_ptr) written by exp_/log results
        self.tags = set()
        self.n = 0

    # ---------- names, values, inputs ----------
    def fresh(self, p="t"):
        self.n += 1
        return f"{p}{self.n}"

    def junk(self, dt):
        return {"bool": True, "u8": 77, "i32": 77, "i64": 77}.get(dt, -7.5)

    def value(self, dt, special=0.15):
        r = self.rng
        if dt == "bool":
            return r.random() < 0.5
        if dt == "u8":
            return r.choice([0, 1, 2, 3, 7, 100, 127, 128, 200, 254, 255]) if r.random() < special * 2 \
                else r.randrange(0, 16)
        if dt in ("i32", "i64"):
            if r.random() < special:
                big = 2 ** 31 if dt == "i32" else 2 ** 63
                return r.choice([big - 1, -big, big - 2, -big + 1, 0, -1, 65536, 46341, -(2 ** 20)])
            return r.randrange(-9, 10)
        if r.random() < special:
            big = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38,
                   "f64": 1.7976931348623157e308}[dt]
            return r.choice([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, big, -big,
                             0.1, 1e-3, 2049.0, 257.0, 1e4])
        return r.randrange(-24, 25) / 4

    def rep(self, vals, dt):
        """The values as the dtype holds them (exactly representable)."""
        return torch.tensor(vals, dtype=torch.float64 if dt in FLOATS else TDT[dt]) \
            .to(TDT[dt]).tolist() if vals else []

    def add_input(self, shape, dt, data=None, p="a"):
        name = self.fresh(p)
        if data is None:
            data = [self.value(dt) for _ in range(numel(shape))]
        data = self.rep(data, dt)
        t = torch.tensor(data, dtype=TDT[dt]).reshape(shape)
        self.inputs.append({"name": name, "shape": list(shape), "dtype": dt,
                            "data": [fmt(x) for x in data]})
        self.env[name] = t
        self.order.append(name)
        self.made_by[name] = ("input", False, True)
        return name

    def junk_input(self, storage_len, used, dt, p="b"):
        """A 1-D base of storage_len elements: values at `used`, junk elsewhere."""
        data = [self.junk(dt)] * storage_len
        for i in used:
            data[i] = self.value(dt)
        return self.add_input([storage_len], dt, data, p)

    # ---------- running steps ----------
    def run(self, op, args, out=None, allow_error=True):
        """Runs one step in PyTorch; returns True when it succeeded."""
        step = {"op": op, "args": args}
        if out is not None:
            step["out"] = out
        snap = {n: (v.clone() if isinstance(v, torch.Tensor) else v) for n, v in self.env.items()}
        try:
            r = execute(self.env, op, args)
        except Skip:
            raise
        except Exception as e:  # noqa: BLE001 - PyTorch raises RuntimeError, IndexError, ...
            cls = classify(e)
            for n, v in self.env.items():
                if isinstance(v, torch.Tensor) and not same(v, snap[n]):
                    raise Skip(f"{op} failed after writing: {e}")
            if cls is None or not allow_error:
                if cls is None:
                    UNKNOWN.setdefault(str(e).split("\n")[0][:160], op)
                return False
            step["error"] = cls
            step["torch_message"] = str(e).split("\n")[0]
            self.steps.append(step)
            return False
        self.steps.append(step)
        if op.endswith("_"):
            t = self.env[args[0]]
            if op == "exp_":
                self.tainted.add(t.untyped_storage().data_ptr())
            return True
        names = out if isinstance(out, list) else [out]
        vals = list(r) if isinstance(out, list) else [r]
        for n, v in zip(names, vals):
            self.env[n] = v
            self.order.append(n)
            same_dt = op == "to_dtype" and NAME[v.dtype] == NAME[self.env[args[0]].dtype]
            src_checked = self.is_checked(args[0]) if args and isinstance(args[0], str) \
                and args[0] in self.made_by else True
            self.made_by[n] = (op, same_dt, src_checked)
            srcs = [a for a in args if isinstance(a, str) and a in self.tol]
            if op in ("exp", "log") and isinstance(v, torch.Tensor) and v.dtype.is_floating_point:
                self.tol[n] = NAME[v.dtype]
            elif srcs and isinstance(v, torch.Tensor) and v.dtype.is_floating_point:
                self.tol[n] = NAME[v.dtype]
        return True

    def is_checked(self, name):
        """Whether FORMAT.md section 5 checks the layout of this variable: an
        input, a creation op's result, or a view/reshape/contiguous of a
        checked variable (a view of an element-wise result has the strides
        of a layout PyTorch chose freely, so it is left out of the programs)."""
        op, same_dt, src = self.made_by[name]
        if op == "input":
            return True
        if op in ("zeros", "ones", "full", "arange"):
            return True
        return src and (op in VIEW_OPS or (op == "to_dtype" and same_dt))

    def tensors(self, pred=lambda t: True):
        return [n for n in self.order if isinstance(self.env[n], torch.Tensor)
                and n not in self.tol and self.env[n].untyped_storage().data_ptr() not in self.tainted
                and pred(self.env[n])]

    # ---------- operands with layouts ----------
    def operand(self, shape, dt, plain=False):
        """A tensor variable of this logical shape and dtype, built from a
        contiguous input by a random view recipe."""
        r = self.rng
        nd = len(shape)
        kinds = ["contig"]
        if not plain:
            kinds += ["slice", "narrow", "as_strided", "select", "expand"]
            if nd >= 2:
                kinds += ["transpose", "permute", "transpose"]
        k = r.choice(kinds)
        if k == "contig":
            return self.add_input(shape, dt)
        if k == "transpose":
            d0, d1 = r.sample(range(nd), 2)
            s = list(shape)
            s[d0], s[d1] = s[d1], s[d0]
            b = self.add_input(s, dt, p="b")
            o = self.fresh("v")
            self.run("transpose", [b, d0 - nd if r.random() < 0.3 else d0, d1], o)
            return o
        if k == "permute":
            perm = list(range(nd))
            r.shuffle(perm)
            inv = [0] * nd
            for i, p in enumerate(perm):
                inv[p] = i
            # out = base.permute(perm) has shape[i] = base_shape[perm[i]]
            base_shape = [0] * nd
            for i, p in enumerate(perm):
                base_shape[p] = shape[i]
            b = self.add_input(base_shape, dt, p="b")
            o = self.fresh("v")
            self.run("permute", [b, perm], o)
            return o
        if k in ("slice", "narrow"):
            if nd == 0:
                return self.add_input(shape, dt)
            d = r.randrange(nd)
            step = r.choice([1, 2, 3]) if k == "slice" else 1
            start = r.randrange(0, 3)
            n = shape[d]
            tail = r.randrange(0, 2)
            full = start + (n - 1) * step + 1 + tail if n > 0 else start + tail
            bs = list(shape)
            bs[d] = full
            keep = set()
            # positions along d that the view reads
            sel = {start + i * step for i in range(n)}
            inner = numel(bs[d + 1:])
            for flat in range(numel(bs)):
                if (flat // inner) % full in sel:
                    keep.add(flat)
            data = [self.junk(dt)] * numel(bs)
            for i in keep:
                data[i] = self.value(dt)
            b = self.add_input(bs, dt, data, p="b")
            o = self.fresh("v")
            dd = d - nd if r.random() < 0.3 else d
            if k == "slice":
                end = None if r.random() < 0.5 else start + (n - 1) * step + 1 + r.randrange(0, step)
                if r.random() < 0.2 and end is not None:
                    end = end - full - (0 if end <= full else 0)  # negative end, same meaning
                    if end >= 0:
                        end = None
                self.run("slice", [b, dd, start, end, step], o)
            else:
                self.run("narrow", [b, dd, start, n], o)
            return o
        if k == "select":
            d = r.randrange(nd + 1)
            m = r.randrange(2, 4)
            idx = r.randrange(m)
            bs = list(shape[:d]) + [m] + list(shape[d:])
            inner = numel(bs[d + 1:])
            data = [self.value(dt) if (f // inner) % m == idx else self.junk(dt)
                    for f in range(numel(bs))]
            b = self.add_input(bs, dt, data, p="b")
            o = self.fresh("v")
            self.run("select", [b, d, idx - m if r.random() < 0.3 else idx], o)
            return o
        if k == "expand":
            # drop leading dims and turn some dims to 1
            lead = r.randrange(0, nd + 1) if nd else 0
            bs = [1 if (r.random() < 0.5) else s for s in shape[lead:]]
            b = self.add_input(bs, dt, p="b")
            o = self.fresh("v")
            target = [(-1 if (i >= lead and bs[i - lead] == s and r.random() < 0.3) else s)
                      for i, s in enumerate(shape)]
            self.run("expand", [b, target], o)
            return o
        if k == "as_strided":
            # column-major-ish layout with padding, at an offset
            order = list(range(nd))
            r.shuffle(order)
            strides = [0] * nd
            acc = 1
            for d in reversed(order):
                strides[d] = acc
                acc *= shape[d] + r.randrange(0, 2)
            off = r.randrange(0, 4)
            used = set()
            if numel(shape) > 0:
                for idx in range(numel(shape)):
                    rem, pos = idx, off
                    for d in reversed(range(nd)):
                        pos += (rem % shape[d]) * strides[d]
                        rem //= shape[d]
                    used.add(pos)
            length = max(used) + 1 + r.randrange(0, 2) if used else off + 1
            b = self.junk_input(length, used, dt)
            o = self.fresh("v")
            self.run("as_strided", [b, list(shape), strides, off], o)
            return o
        raise AssertionError(k)


def same(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(torch.equal(torch.nan_to_num(a.double(), nan=1.5e300),
                                torch.nan_to_num(b.double(), nan=1.5e300)))
    return bool(torch.equal(a, b))


def arg_of(env, v):
    if isinstance(v, str):
        return env[v]
    if isinstance(v, dict):
        (k, x), = v.items()
        if k == "float":
            return float(x) if not isinstance(x, str) else float(x)
        return x
    return v


def execute(env, op, a):
    T = lambda i: env[a[i]]  # noqa: E731
    S = lambda i: arg_of(env, a[i])  # noqa: E731
    opt = lambda i: a[i] if len(a) > i else None  # noqa: E731
    dt = lambda i: TDT[a[i]] if len(a) > i and a[i] is not None else None  # noqa: E731
    if op in ("zeros", "ones"):
        return getattr(torch, op)(a[0], dtype=dt(1))
    if op == "full":
        return torch.full(a[0], S(1), dtype=dt(2))
    if op == "arange":
        return torch.arange(S(0), S(1), S(2), dtype=dt(3))
    if op == "view":
        return T(0).view(a[1])
    if op == "reshape":
        return T(0).reshape(a[1])
    if op == "transpose":
        return T(0).transpose(a[1], a[2])
    if op == "t":
        return T(0).t()
    if op == "permute":
        return T(0).permute(a[1])
    if op == "narrow":
        return T(0).narrow(a[1], a[2], a[3])
    if op == "select":
        return T(0).select(a[1], a[2])
    if op == "slice":
        return torch.ops.aten.slice.Tensor(T(0), a[1], a[2], a[3], a[4])
    if op == "expand":
        return T(0).expand(a[1])
    if op == "squeeze":
        if opt(1) is None:
            return T(0).squeeze()
        return T(0).squeeze(tuple(a[1]) if isinstance(a[1], list) else a[1])
    if op == "unsqueeze":
        return T(0).unsqueeze(a[1])
    if op == "flatten":
        return T(0).flatten(a[1], a[2])
    if op == "as_strided":
        return T(0).as_strided(a[1], a[2], opt(3))
    if op == "contiguous":
        return T(0).contiguous()
    if op == "is_contiguous":
        return T(0).is_contiguous()
    if op == "clone":
        return T(0).clone()
    if op == "to_dtype":
        return T(0).to(TDT[a[1]])
    if op in ("add", "sub", "mul"):
        return getattr(torch, op)(T(0), S(1))
    if op == "div":
        return torch.div(T(0), S(1), rounding_mode=opt(2))
    if op in ("add_", "sub_", "mul_"):
        return getattr(T(0), op)(S(1))
    if op == "div_":
        return T(0).div_(S(1), rounding_mode=opt(2))
    if op in ("relu", "neg", "exp", "log"):
        return getattr(torch, op)(T(0))
    if op in ("relu_", "neg_", "exp_"):
        return getattr(T(0), op)()
    if op == "clamp":
        return torch.clamp(T(0), S(1) if opt(1) is not None else None,
                           S(2) if opt(2) is not None else None)
    if op == "clamp_":
        return T(0).clamp_(S(1) if opt(1) is not None else None,
                           S(2) if opt(2) is not None else None)
    if op == "fill_":
        return T(0).fill_(S(1))
    if op == "zero_":
        return T(0).zero_()
    if op == "copy_":
        return T(0).copy_(T(1))
    if op == "addcmul_":
        return T(0).addcmul_(T(1), T(2), value=S(3))
    if op == "where":
        return torch.where(T(0), S(1), S(2))
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        return getattr(torch, op)(T(0), S(1))
    if op in ("sum", "mean"):
        if len(a) == 1:
            return getattr(T(0), op)()
        return getattr(T(0), op)(dim=a[1], keepdim=bool(opt(2)))
    if op in ("max", "min"):
        if len(a) == 1 or a[1] is None:
            return getattr(T(0), op)()
        return tuple(getattr(T(0), op)(a[1], bool(opt(2))))
    if op == "argmax":
        return T(0).argmax(dim=opt(1), keepdim=bool(opt(2)))
    if op in ("matmul", "mm", "bmm"):
        return getattr(torch, op)(T(0), T(1))
    if op == "addmm":
        return torch.addmm(T(0), T(1), T(2))
    raise SystemExit(f"unknown op {op}")


# ---------- exactness guards ----------
def exact_sum_ok(t, n_terms_factor=1):
    """Whether any order of adding t's finite elements is exact in the
    accumulator (f32 for f32/f16/bf16, f64 for f64)."""
    if not t.dtype.is_floating_point:
        return True
    vals = [v for v in t.double().reshape(-1).tolist() if math.isfinite(v)]
    if not vals:
        return True
    bits = 53 if t.dtype == torch.float64 else 24
    q = min((Fraction(v).denominator for v in vals), default=1)
    den = max(Fraction(v).denominator for v in vals)
    tot = sum(abs(Fraction(v)) for v in vals) * den * n_terms_factor
    del q
    return tot < 2 ** bits


def exact_matmul_ok(a, b):
    if not a.dtype.is_floating_point:
        return True
    av = a.double().reshape(-1).tolist()
    bv = b.double().reshape(-1).tolist()
    if not all(math.isfinite(v) for v in av + bv):
        return False
    bits = 53 if a.dtype == torch.float64 else 24
    da = max((Fraction(v).denominator for v in av), default=1)
    db = max((Fraction(v).denominator for v in bv), default=1)
    ma = max((abs(v) for v in av), default=0)
    mb = max((abs(v) for v in bv), default=0)
    k = a.shape[-1] if a.dim() >= 1 else 1
    return ma * mb * da * db * max(k, 1) < 2 ** bits


def exact_addmm_ok(c, a, b):
    """exact_matmul_ok for `c + a @ b`: the bias's terms join the sum."""
    if not exact_matmul_ok(a, b):
        return False
    if not c.dtype.is_floating_point:
        return True
    cv = c.double().reshape(-1).tolist()
    if not all(math.isfinite(v) for v in cv):
        return False
    bits = 53 if c.dtype == torch.float64 else 24
    den = 1
    for t in (a, b, c):
        den *= max((Fraction(v).denominator for v in t.double().reshape(-1).tolist()),
                   default=1)
    ma = max((abs(v) for v in a.double().reshape(-1).tolist()), default=0)
    mb = max((abs(v) for v in b.double().reshape(-1).tolist()), default=0)
    mc = max((abs(v) for v in cv), default=0)
    k = a.shape[-1] if a.dim() >= 1 else 1
    return (ma * mb * max(k, 1) + mc) * den < 2 ** bits


# ---------- program recipes ----------
def rand_shape(r, nd=None, maxd=4, allow_zero=True):
    if nd is None:
        nd = r.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])
    s = [r.choice([1, 2, 3, 4, 5] if maxd >= 5 else [1, 2, 3, 4][:maxd]) for _ in range(nd)]
    if allow_zero and nd and r.random() < 0.08:
        s[r.randrange(nd)] = 0
    return s


def rand_dtype(r):
    return r.choice(DTYPES)


def bcast_partner(r, shape):
    """A shape that broadcasts with `shape` (sometimes one that does not)."""
    nd = len(shape)
    if r.random() < 0.06 and nd:
        s = list(shape)
        i = r.randrange(nd)
        s[i] = s[i] + 1 if s[i] != 1 else 2
        if s[i] == shape[i] or shape[i] == 1:
            s[i] = 3 if shape[i] == 2 else 2
        return s
    lead = r.randrange(0, nd + 1)
    s = [1 if r.random() < 0.35 else x for x in shape[lead:]]
    if r.random() < 0.2:
        s = [r.choice([1, 2])] + s
    return s


def rand_scalar(r, kind=None):
    kind = kind or r.choice(["int", "int", "float", "float", "bool"])
    if kind == "bool":
        return r.random() < 0.5
    if kind == "int":
        return r.choice([0, 1, 2, -1, -3, 3, 7, 255, 256, 300, -129, 2 ** 31, 2 ** 31 - 1,
                         -(2 ** 31) - 1, 2 ** 40, 2 ** 62, -(2 ** 63)]) \
            if r.random() < 0.3 else r.randrange(-5, 6)
    return r.choice([0.5, -1.5, 2.0, 0.1, 1.0 / 3.0, -0.0, 0.0, float("nan"), float("inf"),
                     float("-inf"), 70000.0, 1e-8, 2049.0, 257.0, 1e39, 3.5, -2.75]) \
        if r.random() < 0.5 else r.randrange(-12, 13) / 4


def ts_operand(g, shape, dt):
    r = g.rng
    if r.random() < 0.3:
        return scalar_json(rand_scalar(r))
    if r.random() < 0.15:
        # a 0-d tensor operand
        return g.operand([], dt)
    return g.operand(bcast_partner(r, shape), dt)


BINARY = ["add", "sub", "mul", "div", "div", "eq", "ne", "lt", "le", "gt", "ge"]
INPLACE = ["add_", "sub_", "mul_", "div_", "relu_", "neg_", "clamp_", "fill_", "zero_",
           "copy_", "addcmul_", "exp_"]
UNARY = ["relu", "neg", "exp", "log", "clone", "contiguous", "to_dtype", "clamp"]


def step_elementwise(g, x):
    r = g.rng
    t = g.env[x]
    shape, dt = list(t.shape), NAME[t.dtype]
    c = r.random()
    o = g.fresh("r")
    if c < 0.6:
        op = r.choice(BINARY)
        other_dt = dt if r.random() < 0.5 else rand_dtype(r)
        b = ts_operand(g, shape, other_dt)
        args = [x, b]
        if op == "div" and r.random() < 0.5:
            args.append(r.choice(["trunc", "floor"]))
            guard_intdiv(g, x, b)
        g.run(op, args, o)
    elif c < 0.8:
        op = r.choice(UNARY)
        if op == "to_dtype":
            to = rand_dtype(r) if r.random() < 0.8 else dt
            if float_to_int_undefined(t, to):
                return None
            g.run(op, [x, to], o)
        elif op == "clamp":
            lo = scalar_json(rand_scalar(r)) if r.random() < 0.7 else None
            hi = scalar_json(rand_scalar(r)) if r.random() < 0.7 else None
            g.run(op, [x, lo, hi], o)
        else:
            if op == "contiguous" and not g.is_checked(x):
                op = "clone"  # whether contiguous() copies depends on the `info` layout
            g.run(op, [x], o)
    elif c < 0.92:
        cond = g.operand(bcast_partner(r, shape), "bool" if r.random() < 0.9 else rand_dtype(r))
        a = x
        b = ts_operand(g, shape, dt if r.random() < 0.5 else rand_dtype(r))
        if r.random() < 0.5:
            a, b = b, a
        if not isinstance(a, str) and not isinstance(b, str):
            a = x
        g.run("where", [cond, a, b], o)
    else:
        lo, hi = sorted([rand_scalar(r, "int"), rand_scalar(r, "int")])
        g.run("clamp", [x, scalar_json(lo), scalar_json(hi)], o)
    return o if o in g.env else None


def guard_intdiv(g, x, b):
    ta = g.env[x]
    tb = g.env[b] if isinstance(b, str) else None
    vals = ta.reshape(-1).tolist()
    if tb is not None:
        vals += tb.reshape(-1).tolist()
    if any(v in (-(2 ** 31), -(2 ** 63)) for v in vals if isinstance(v, int) and not isinstance(v, bool)):
        raise Skip("integer division of the smallest integer")
    if isinstance(b, dict) and b.get("int") == -1:
        raise Skip("integer division by -1")


def step_inplace(g, x):
    r = g.rng
    t = g.env[x]
    if overlapping_view(t):
        raise Skip("in-place write into an internally overlapping view")
    shape, dt = list(t.shape), NAME[t.dtype]
    op = r.choice(INPLACE)
    if op in ("add_", "sub_", "mul_", "div_"):
        b = ts_operand(g, shape if r.random() < 0.85 else bcast_partner(r, shape),
                       dt if r.random() < 0.6 else rand_dtype(r))
        args = [x, b]
        if op == "div_" and r.random() < 0.5:
            args.append(r.choice(["trunc", "floor"]))
            guard_intdiv(g, x, b)
        g.run(op, args)
    elif op in ("relu_", "neg_", "zero_", "exp_"):
        g.run(op, [x])
    elif op == "clamp_":
        lo = scalar_json(rand_scalar(r)) if r.random() < 0.7 else None
        hi = scalar_json(rand_scalar(r)) if r.random() < 0.7 else None
        g.run(op, [x, lo, hi])
    elif op == "fill_":
        g.run(op, [x, scalar_json(rand_scalar(r))])
    elif op == "copy_":
        src = g.operand(bcast_partner(r, shape) if r.random() < 0.3 else shape,
                        rand_dtype(r))
        if float_to_int_undefined(g.env[src], dt):
            return
        g.run(op, [x, src])
    elif op == "addcmul_":
        d2 = dt if r.random() < 0.8 else rand_dtype(r)
        t1 = g.operand(bcast_partner(r, shape), d2)
        t2 = g.operand(bcast_partner(r, shape), d2)
        v = rand_scalar(r, r.choice(["int", "float"]))
        if not all(small_dyadic(g.env[n]) for n in (x, t1, t2)) or not (
                isinstance(v, (bool, int)) or v in (0.5, -1.5, 2.0, 0.25, -0.0, 0.0, 3.5, -2.75)
                or not math.isfinite(v)):
            return  # value * t1 * t2 would round: PyTorch's kernel may fuse the add (FMA)
        g.run(op, [x, t1, t2, scalar_json(v)])


def float_to_int_undefined(t, to):
    """A float -> integer conversion of a value C leaves undefined (NaN,
    infinities, values beyond the integer range): PyTorch's answer is what
    the x86 instruction gives (i32/i64: the smallest integer), which FORMAT.md
    does not define, so such steps are left out."""
    if not t.dtype.is_floating_point or to in FLOATS or to == "bool":
        return False
    lim = {"i32": 2.0 ** 31, "i64": 2.0 ** 63, "u8": 2.0 ** 31}[to]
    for v in t.double().reshape(-1).tolist():
        if not math.isfinite(v) or not (-lim <= math.trunc(v) < lim):
            return True
    return False


def small_dyadic(t):
    """Whether every finite element is a multiple of 1/4 of magnitude <= 16,
    so that addcmul_'s x + value * t1 * t2 is exact whatever the order and
    fusion of its operations (integers always are)."""
    if not t.dtype.is_floating_point:
        return True
    return all(not math.isfinite(v) or (abs(v) <= 16 and (v * 4).is_integer())
               for v in t.double().reshape(-1).tolist())


def overlapping_view(t):
    """Whether two elements of t share a memory location (stride 0 on a dim
    of size > 1 is left to PyTorch's check, which rejects it)."""
    if t.numel() <= 1:
        return False
    dims = [(s, st) for s, st in zip(t.shape, t.stride()) if s > 1]
    if any(st == 0 for _, st in dims):
        return False  # PyTorch's own check (error `overlap`)
    dims.sort(key=lambda p: p[1])
    span = 1
    for s, st in dims:
        if st < span:
            return True
        span = st * (s - 1) + span
    return False


def step_view(g, x):
    r = g.rng
    t = g.env[x]
    shape, nd = list(t.shape), t.dim()
    if not g.is_checked(x):
        return None
    o = g.fresh("v")
    bad = r.random() < 0.1
    k = r.choice(["transpose", "t", "permute", "narrow", "select", "slice", "expand", "squeeze",
                  "unsqueeze", "flatten", "view", "reshape", "as_strided", "is_contiguous",
                  "contiguous"])

    def dim(extra=0):
        n = nd + extra
        if bad:
            return r.choice([n, -n - 1, n + 1]) if n else r.choice([1, -2])
        if n == 0:
            return r.choice([0, -1])
        d = r.randrange(n)
        return d - n if r.random() < 0.3 else d

    if k == "transpose":
        g.run(k, [x, dim(), dim()], o)
    elif k == "t":
        g.run(k, [x], o)
    elif k == "permute":
        p = list(range(nd))
        r.shuffle(p)
        if bad:
            p = p + [0] if r.random() < 0.5 else (p[:-1] if p else [0])
        g.run(k, [x, p], o)
    elif k == "narrow":
        d = dim()
        n = shape[d] if -nd <= d < nd and nd else 1
        start = r.randrange(-n, n + 1) if not bad else r.choice([n + 1, -n - 1])
        s0 = start + n if start < 0 else start
        ln = r.randrange(0, max(n - s0, 0) + 1) if r.random() > 0.1 else r.choice([-1, n + 1])
        g.run(k, [x, d, start, ln], o)
    elif k == "select":
        d = dim()
        n = shape[d] if -nd <= d < nd and nd else 1
        i = r.randrange(-n, n) if n and not bad else r.choice([n, -n - 1])
        g.run(k, [x, d, i], o)
    elif k == "slice":
        d = dim()
        start = r.choice([None, 0, 1, -1, -2, 2, 5])
        end = r.choice([None, None, 1, 2, 3, -1, 10, -10])
        step = r.choice([1, 1, 2, 3]) if not bad else r.choice([0, -1])
        g.run(k, [x, d, start, end, step], o)
    elif k == "expand":
        target = [s if s != 1 else r.choice([1, 2, 3]) for s in shape]
        target = [r.choice([-1, s]) if s != 1 or r.random() < 0.5 else s for s in target]
        if r.random() < 0.4:
            target = [r.choice([2, 3, 1])] + target
        if bad:
            target = target[1:] if target and r.random() < 0.5 else [7] + shape if not shape else \
                [s + 1 for s in shape]
        g.run(k, [x, target], o)
    elif k == "squeeze":
        c = r.random()
        if c < 0.3:
            g.run(k, [x], o)
        elif c < 0.65:
            g.run(k, [x, dim()], o)
        else:
            g.run(k, [x, sorted({dim() for _ in range(r.randrange(1, 3))})], o)
    elif k == "unsqueeze":
        g.run(k, [x, dim(1)], o)
    elif k == "flatten":
        if nd == 0:
            g.run(k, [x, 0, -1], o)
        else:
            a0, a1 = sorted([dim(), dim()], key=lambda d: d % max(nd, 1))
            if bad:
                a0, a1 = a1, a0
            g.run(k, [x, a0, a1], o)
    elif k in ("view", "reshape"):
        n = numel(shape)
        new = factor_shape(r, n)
        if r.random() < 0.4 and new:
            new[r.randrange(len(new))] = -1
        if bad:
            new = new + [2] if r.random() < 0.5 else [-1, -1] + new
        if k == "view" and r.random() < 0.3 and nd:
            # keep the last dims: split/merge within contiguous chunks
            new = shape[:-1] + factor_shape(r, shape[-1])
        g.run(k, [x, new], o)
    elif k == "as_strided":
        st = t.untyped_storage().nbytes() // t.element_size()
        size = rand_shape(r, r.choice([0, 1, 2, 3]), allow_zero=True)
        strides = [r.choice([0, 1, 2, 3, 4]) for _ in size]
        off = r.choice([None, 0, 1, 2])
        if bad:
            c = r.random()
            if c < 0.3:
                strides = strides + [1]
            elif c < 0.5 and strides:
                strides[0] = -1
            elif c < 0.6:
                off = -1
            else:
                size = [st + 1]
                strides = [1]
        g.run(k, [x, size, strides, off], o)
    elif k == "is_contiguous":
        g.run(k, [x], o)
    else:
        g.run(k, [x], o)
    return o if o in g.env else None


def factor_shape(r, n):
    if n == 0:
        return r.choice([[0], [0, 3], [2, 0], [0, 1, 2]])
    out = []
    while n > 1 and len(out) < 3:
        divs = [d for d in range(2, n + 1) if n % d == 0]
        d = r.choice(divs)
        out.append(d)
        n //= d
    if n > 1:
        out.append(n)
    if r.random() < 0.3:
        out.insert(r.randrange(len(out) + 1), 1)
    return out


def step_reduce(g, x):
    r = g.rng
    t = g.env[x]
    nd = t.dim()
    op = r.choice(["sum", "sum", "mean", "max", "min", "argmax"])
    if op in ("sum", "mean") and not exact_sum_ok(t):
        return None
    if op == "mean" and t.dtype.is_floating_point is False and r.random() < 0.7:
        op = "sum"

    def dim():
        if r.random() < 0.05:
            return nd + 1
        if nd == 0:
            return r.choice([0, -1])
        d = r.randrange(nd)
        return d - nd if r.random() < 0.3 else d

    o = g.fresh("s")
    if op in ("sum", "mean"):
        c = r.random()
        if c < 0.25:
            g.run(op, [x], o)
        elif c < 0.35:
            g.run(op, [x, None, r.random() < 0.5], o)
        elif c < 0.4:
            g.run(op, [x, [], r.random() < 0.5], o)
        else:
            dims = sorted({dim() for _ in range(r.randrange(1, 3))}, key=str)
            if r.random() < 0.05 and dims:
                dims = dims + [dims[0]]
            g.run(op, [x, dims, r.random() < 0.5], o)
    elif op in ("max", "min"):
        if r.random() < 0.35:
            g.run(op, [x], o)
        else:
            o2 = g.fresh("i")
            g.run(op, [x, dim(), r.random() < 0.5], [o, o2])
    else:
        c = r.random()
        if c < 0.35:
            g.run(op, [x], o)
        elif c < 0.5:
            g.run(op, [x, None, True], o)
        else:
            g.run(op, [x, dim(), r.random() < 0.5], o)
    return o if o in g.env else None


def matmul_case(g):
    r = g.rng
    dt = r.choice(FLOATS + FLOATS + ["i32", "i64", "u8", "bool"])
    op = r.choice(["matmul", "matmul", "mm", "bmm", "addmm"])
    m, k, n = r.randrange(0, 5) if r.random() < 0.1 else r.randrange(1, 5), r.randrange(1, 5), \
        r.randrange(1, 5)
    if op in ("mm", "addmm"):
        sa, sb = [m, k], [k, n]
    elif op == "bmm":
        b = r.randrange(1, 4)
        sa, sb = [b, m, k], [b, k, n]
    else:
        c = r.random()
        if c < 0.15:
            sa, sb = [k], [k]
        elif c < 0.3:
            sa, sb = [k], ([2, k, n] if r.random() < 0.5 else [k, n])
        elif c < 0.45:
            sa, sb = [m, k], [k]
        else:
            batch = rand_shape(r, r.randrange(1, 3), allow_zero=False)
            sa = batch + [m, k]
            sb = bcast_partner(r, batch) + [k, n]
    if r.random() < 0.1:
        # a mismatch
        if sb:
            i = -2 if len(sb) >= 2 else -1
            sb = list(sb)
            sb[i] += 1
    if r.random() < 0.05:
        sa = sa[1:] if len(sa) > 1 else sa + [2, 2, 2]
    vals_small = dt in FLOATS
    a = g.operand(sa, dt)
    b = g.operand(sb, dt if r.random() < 0.9 else rand_dtype(r))
    if vals_small and not exact_matmul_ok(g.env[a], g.env[b]):
        raise Skip("inexact float matmul")
    if dt == "bool" and (g.env[a].numel() == 0 or g.env[b].numel() == 0):
        # PyTorch returns before its dtype check when there is nothing to compute
        raise Skip("bool matmul of an empty operand")
    args = [a, b]
    if op == "addmm":
        # The added tensor: broadcast to [m, n] (or, now and then, not).
        sc = r.choice([[n], [m, n], [m, 1], [1, n], [], [1], [m], [n + 1]])
        c = g.operand(sc, dt if r.random() < 0.9 else rand_dtype(r))
        if vals_small and not exact_addmm_ok(g.env[c], g.env[a], g.env[b]):
            raise Skip("inexact float matmul")
        args = [c, a, b]
    o = g.fresh("r")
    g.run(op, args, o)
    if o in g.env and r.random() < 0.3:
        step_elementwise(g, o)


def creation_case(g):
    r = g.rng
    c = r.random()
    o = g.fresh("c")
    if c < 0.5:
        op = r.choice(["zeros", "ones", "full"])
        shape = rand_shape(r)
        if r.random() < 0.05:
            shape = shape + [-1]
        args = [shape]
        if op == "full":
            args.append(scalar_json(rand_scalar(r)))
        if r.random() < 0.7:
            args.append(rand_dtype(r))
        g.run(op, args, o)
    else:
        kind = r.choice(["int", "int", "float"])
        if kind == "int":
            s0 = r.randrange(-5, 6)
            st = r.choice([1, 2, 3, -1, -2]) if r.random() > 0.05 else 0
            e = s0 + st * r.randrange(0, 6) + (r.randrange(-1, 2) if st else 3)
            args = [{"int": s0}, {"int": e}, {"int": st}]
            if r.random() < 0.6:
                args.append(rand_dtype(r))
                if args[-1] == "bool":
                    args[-1] = "i64"
        else:
            s0 = r.randrange(-8, 9) / 4
            st = r.choice([0.5, 0.25, -0.5, 1.5, 0.75])
            e = s0 + st * r.randrange(0, 6) + r.choice([0.0, 0.125, -0.125])
            args = [scalar_json(s0), scalar_json(e), scalar_json(st)]
            if r.random() < 0.6:
                args.append(r.choice(FLOATS + ["i64", "i32", "u8"]))
        g.run("arange", args, o)
    if o in g.env and isinstance(g.env[o], torch.Tensor):
        chain(g, o, r.randrange(1, 4))


def chain(g, x, n):
    r = g.rng
    cur = x
    for _ in range(n):
        if cur is None or cur not in g.env or not isinstance(g.env[cur], torch.Tensor):
            cands = g.tensors()
            if not cands:
                return
            cur = r.choice(cands)
        if cur in g.tol or g.env[cur].untyped_storage().data_ptr() in g.tainted:
            return
        c = r.random()
        if c < 0.3:
            cur = step_view(g, cur) or cur
        elif c < 0.55:
            cur = step_elementwise(g, cur)
        elif c < 0.8:
            step_inplace(g, cur)
            if g.steps and g.steps[-1]["op"] == "exp_":
                return
        else:
            cur = step_reduce(g, cur)


def signed_zero_case(g):
    """Element-wise steps whose zeros keep their sign (tag signed_zero): IEEE
    arithmetic on +-0.0, relu (which passes -0.0 through), conversions
    between float dtypes, copies and selections."""
    r = g.rng
    dt = r.choice(FLOATS)
    shape = rand_shape(r, r.choice([0, 1, 2]), allow_zero=False)
    zeros = [0.0, -0.0, 0.0, -0.0, 1.5, -2.0, float("inf"), float("-inf")]
    x = g.add_input(shape, dt, [r.choice(zeros) for _ in range(numel(shape))])
    g.tags.add("signed_zero")
    cur = x
    for _ in range(r.randrange(1, 4)):
        op = r.choice(["neg", "mul", "add", "sub", "div", "relu", "to_dtype", "where", "neg_",
                       "mul_", "copy_"])
        o = g.fresh("r")
        t = g.env[cur]
        if op in ("neg", "relu"):
            g.run(op, [cur], o)
        elif op == "to_dtype":
            g.run(op, [cur, r.choice(FLOATS)], o)
        elif op in ("mul", "add", "sub", "div"):
            if r.random() < 0.5:
                b = scalar_json(r.choice([-0.0, 0.0, -1.0, 2.0, float("-inf"), float("inf")]
                                         if op in ("mul", "div") else [-0.0, 0.0]))
            else:
                b = g.add_input(bcast_partner(r, list(t.shape)) if t.dim() else [], r.choice(FLOATS),
                                None)
                g.env[b].copy_(torch.tensor(0.0))
                vals = [r.choice(zeros) for _ in range(g.env[b].numel())]
                g.env[b].copy_(torch.tensor(vals, dtype=torch.float64).reshape(g.env[b].shape))
                g.inputs[-1]["data"] = [fmt(v) for v in g.env[b].reshape(-1).tolist()]
            g.run(op, [cur, b], o)
        elif op == "where":
            c = g.add_input(list(t.shape), "bool")
            g.run(op, [c, cur, scalar_json(r.choice([-0.0, 0.0]))], o)
        elif op == "neg_":
            g.run(op, [cur])
            continue
        elif op == "mul_":
            g.run(op, [cur, scalar_json(r.choice([-0.0, -1.0, 0.0]))])
            continue
        else:
            src = g.add_input(list(t.shape), r.choice(FLOATS),
                              [r.choice(zeros) for _ in range(t.numel())])
            g.run(op, [cur, src])
            continue
        if o in g.env:
            cur = o
    return "signed_zero"


def program(g):
    r = g.rng
    kind = r.choices(["views", "elementwise", "inplace", "reduce", "matmul", "creation",
                      "signed_zero"], [2.5, 6, 3, 2.5, 1.5, 1, 0.8])[0]
    if kind == "signed_zero":
        return signed_zero_case(g)
    if kind == "matmul":
        matmul_case(g)
        return kind
    if kind == "creation":
        creation_case(g)
        return kind
    dt = rand_dtype(r)
    shape = rand_shape(r)
    x = g.operand(shape, dt)
    if kind == "views":
        cur = x
        for _ in range(r.randrange(1, 4)):
            cur = step_view(g, cur) or cur
            if not isinstance(g.env.get(cur), torch.Tensor):
                cur = x
        if r.random() < 0.6:
            step_inplace(g, cur)
    elif kind == "inplace":
        cur = x
        if r.random() < 0.6:
            cur = step_view(g, cur) or cur
            if not isinstance(g.env.get(cur), torch.Tensor):
                cur = x
        step_inplace(g, cur)
        chain(g, cur, r.randrange(0, 3))
    elif kind == "reduce":
        if r.random() < 0.5:
            x = step_view(g, x) or x
            if not isinstance(g.env.get(x), torch.Tensor):
                x = g.order[0]
        step_reduce(g, x)
        if r.random() < 0.3:
            step_reduce(g, x)
    else:
        cur = step_elementwise(g, x)
        chain(g, cur or x, r.randrange(0, 3))
    return kind


def finish(g, kind):
    if not g.steps:
        raise Skip("no steps")
    env, order = g.env, g.order
    ptr = {n: env[n].untyped_storage().data_ptr() for n in order if isinstance(env[n], torch.Tensor)}
    expect = {}
    tags = set(g.tags)
    dts = set()
    # A storage written by exp_ carries the tolerance for every variable on it.
    for n in order:
        if isinstance(env[n], torch.Tensor) and ptr[n] in g.tainted and env[n].dtype.is_floating_point:
            g.tol[n] = NAME[env[n].dtype]
    for n in order:
        v = env[n]
        if isinstance(v, bool):
            expect[n] = {"value": v}
            continue
        first = next(m for m in order if m in ptr and ptr[m] == ptr[n])
        checked = g.is_checked(n)
        dt = NAME[v.dtype]
        dts.add(dt)
        data = v.reshape(-1).tolist()
        rec = {"shape": list(v.shape), "dtype": dt, "data": [fmt(x) for x in data],
               "strides": list(v.stride()), "offset": v.storage_offset(),
               "contiguous": v.is_contiguous(), "storage": first,
               "layout": "checked" if checked else "info"}
        if n in g.tol and dt in FLOATS:
            rec["tol"] = {"rtol": 4 * EPS[dt], "atol": 0.0}
        expect[n] = rec
        if checked and not v.is_contiguous():
            tags.add("noncontig")
        if v.dim() == 0:
            tags.add("zero_dim")
        if v.numel() == 0:
            tags.add("empty")
    for i in g.inputs:
        dts.add(i["dtype"])
    if any("error" in s for s in g.steps):
        tags.add("error")
    ops = sorted({s["op"] for s in g.steps})
    doc = f"fuzz ({kind}): " + "; ".join(
        s["op"] + ("!" + s["error"] if "error" in s else "") for s in g.steps)
    return {"id": g.cid, "doc": doc, "tags": sorted(tags), "ops": ops, "dtypes": sorted(dts),
            "inputs": g.inputs, "steps": g.steps, "expect": expect}


UNKNOWN = {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--count", type=int, default=700)
    ap.add_argument("--out", default="conformance/fuzz_core.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    cases, skipped, i = [], {}, 0
    while len(cases) < args.count:
        i += 1
        g = Gen(random.Random(rng.getrandbits(64)), f"fuzz_core.{args.seed}_{i:04d}")
        try:
            kind = program(g)
            cases.append(finish(g, kind))
        except Skip as e:
            key = str(e).split(":")[0]
            skipped[key] = skipped.get(key, 0) + 1
    doc = {"format": "strata-conformance", "format_version": 1,
           "torch_version": torch.__version__, "python_version": platform.python_version(),
           "oracle": "PyTorch on the CPU, one thread",
           "generator": "benches/anchors/fuzz_conformance_core.py --seed %d --count %d"
                        % (args.seed, args.count),
           "group": "fuzz_core", "split": "fuzz", "count": len(cases), "cases": cases}
    with open(args.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {args.out}; left out: {skipped}")
    for msg, op in sorted(UNKNOWN.items()):
        print(f"unclassified PyTorch error (step dropped): {op}: {msg}")


if __name__ == "__main__":
    main()
