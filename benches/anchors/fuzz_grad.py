#!/usr/bin/env python3
"""Seeded random small programs over strata-autograd's differentiable ops,
with PyTorch's forward values AND gradients: the gradient oracle replayed by
crates/strata-autograd/tests/suite/grad_oracle.rs.

The forward oracle (fuzz_conformance_ops.py) checks values; the autograd
tests check gradients against finite differences, which cannot see the
conventions at kinks and ties. Here every input is f32 and mostly drawn from
a small pool of exact fractions (so ties, zeros and the bounds of relu, abs,
sign, maximum/minimum, clamp, the ties of max/min/amax/amin, std and norm at
0, sqrt/log/pow at 0 ... come up often), the rest from a normal distribution. A program is 1-3 steps on a current value
(each step may add new leaf inputs or constant index/mask tensors), then
`out.backward(upstream)` with a random upstream gradient (or `out.sum()`
when `upstream` is null). Recorded: every input, the steps, the forward
output and each leaf's `.grad`.

Some inputs carry +-inf and NaN, and some upstream gradients a NaN or
infinite element (where PyTorch masks a gradient it stays 0, where it
multiplies it becomes NaN).

A program is `exact` when all its float inputs are pool fractions and all
its steps are exact ops (no rounding on either side: the replay compares
bit for bit, -0.0 == 0.0, NaN == NaN); otherwise the replay allows a
relative 1e-5 (plus an absolute 1e-6 of the tensor's largest magnitude)
plus twice PyTorch's own f32 error, estimated by running the same program
(the same f32 inputs) in f64 (`err_out`, `err_grads`). That estimate can be
lucky: on ill-conditioned programs (a value that is 0 in exact arithmetic
fed to sqrt, 1/x near a pole) about 1 in 4000 programs of the seeds with
NaN inputs still differs by rounding alone; these are not left out. The
training programs of seeds >= 173 add one such case in about 4000: a
gradient that is 0 in exact arithmetic (the gradient of a softmax's sum, a
log_softmax over equal values) where PyTorch's f32 and f64 both happen to
round to exactly 0 and strata to a few ulps, which clip_grad_norm_ reports
or Adam, whose eps is small, turns into a step of a good part of lr.

Usage (PyTorch on the CPU, one thread; the checked-in file is seed 0):
    /tmp/tv/bin/python benches/anchors/fuzz_grad.py --seed 0 --count 300 \
        --out crates/strata-autograd/tests/grad_oracle.json
Larger runs (`--count 1000` per seed into a folder) are replayed with
`STRATA_GRAD_ORACLE_DIR=<folder> cargo test --release -p strata-autograd
--test suite grad_oracle`.

Seeds from 127 on (NEW_OPS_SEED) also draw `more_step`'s ops (attention,
gelu_linear, dropout with p 0 or 1, dtype round trips, in-place ops on a
non-leaf, non-reentrant checkpoints of small functions) and a NaN norm order;
earlier seeds draw exactly the programs they drew before.

Seeds from 165 on (S43_SEED) also draw `s43_step`'s ops: recorded in-place
ops on chains of views of a fresh non-leaf (PyTorch's CopySlices; views of
views, views taken before or after another in-place op and read afterwards,
ops in no_grad mode, and ops that return their input itself in PyTorch:
dropout that draws no mask, a cast to the same dtype, flatten with
start == end), chains of view ops, split into sections, cross_entropy and
nll_loss over [N, C, d...], softmax/log_softmax with a dtype (from an f16 or
bf16 input), masked_fill/where with a broadcast mask, linear over 1-D and
>2-D inputs, batched matmul, attention keeping its probabilities
(`AttentionSaving::SaveProbs`), and reductions over negative, unsorted dims;
seeds below 165 draw exactly the programs they drew before.

Seeds from 173 on (S43B_SEED) draw session 43's second round: a program is
a graph program as above (4 in 10; its steps may also be `s43b_step`'s: a
non-reentrant checkpoint of 1-3 random steps whose leaves are captured
parameters, 1-3 random steps in a CPU bf16 autocast region with each
result's dtype recorded in `dtypes`, `x * c + x.detach()`, and index
arguments not drawn before), a training program (`build_train`, 3 in 10:
the program's leaves are parameters, stored in f32, f64, bf16 or f16, and
1-4 iterations of zero_grad, forward, backward, clip_grad_norm_, and an
SGD/Adam/AdamW step, through a GradScaler now and then; recorded: each
iteration's output, clip norm and scaler state, the parameters and
gradients at the end) or a program of the gradient API (`build_api`, 3 in
10: retain_grad, tensor hooks and post-accumulate-grad hooks, then
`torch.autograd.backward`/`grad` passes from several outputs with
retain_graph, allow_unused, materialize_grads, and zero_grad between
passes). The replay allows programs with autocast steps 2^-6 of each
value plus the tensor's largest magnitude besides the error estimate
(which, run in f64, autocast leaves alone), and bf16/f16 parameters one
unit in their last place. Left out for these seeds (PyTorch quirks no
program should rely on; comments at each):
- with several inputs, a `grad` input whose node also runs in the pass and
  that has tensor hooks (PyTorch captures its gradient before its hooks
  then, after them otherwise); retain_grad and hooks on the single output
  of a `grad` pass that no input lies behind (PyTorch runs that output's
  node for one output and none for several);
- SGD on f16/bf16 parameters (PyTorch's reduced-float `add(alpha)` rounds
  differently in its vectorized body and scalar tail, and these parameters
  are all tail); the default for-loop Adam/AdamW on
  bf16/f16 parameters (strata's step is the fused kernel), and the fused
  ones' `.grad` after a step a GradScaler skipped (left scaled);
  a GradScaler step without any gradient (PyTorch asserts);
- the in-place-on-views family takes a contiguous base (PyTorch's `x + 0`
  keeps a permuted x's strides, so whether a later reshape is a view
  differs; PyTorch documents it as unspecified).
PyTorch 2.15's CPU autocast casts only matrix products (to bf16) and losses
(to f32): a softmax, layer_norm or sum of a bf16 product stays bf16, and
strata's CPU autocast does the same since this round. Seeds below 173 draw
exactly the programs they drew before (byte-identical files for seeds 5,
130, 161, 166 and 172).

Seeds from 181 on (S44_SEED) also draw `s44_step`'s families in graph
and API programs (training programs draw as before), and their JSON names
each float tensor's dtype ("f64", "bf16", "f16"; earlier seeds write "f32"
for every float tensor):
- reuse: the current value with an earlier leaf or step output (add, sub,
  mul, div, where, and maximum/minimum while the program is exact): values
  reached by two paths, whose gradients add up;
- self_multi: one value several times in an op (cat/stack/where of x with
  itself, pow(x, x), x @ x^T, x * x * x - x);
- noncontig: a random op of the other families on a transposed, permuted,
  expanded or narrowed view of the current value;
- empty: a random op on an empty narrow of the current value;
- lowp: 1-2 random steps in f64, bf16 or f16 (leaves and constants of that
  dtype; the current value cast to it first, or promoted by the first
  binary op), cast back; each result's dtype recorded in `dtypes` (all-f64
  sub-programs keep the f32 tolerance, the others get autocast's);
- mixed_operand: an i64 or bool constant, a 0-d f64 constant or leaf (the
  result stays f32, the leaf's gradient is f64) or a bf16/f16 leaf as the
  other operand of add/sub/mul/div/maximum/minimum/pow/where;
- split_both: two pieces of one split/chunk combined;
- reduce_corner: reductions and dim ops of a 0-d value with dim 0 or -1,
  empty dim lists (not for var/std: PyTorch's backward then divides by
  1 - correction, not its forward's count), var/std with corrections 2,
  0.5, 3;
- index_i32: index_select and embedding with int32 indices;
- inplace_after: y = x + 0, z = f(y) (unary ops, binary ones with a new
  leaf, y * y), an in-place op on y, y.detach() or z.detach(), then z and y
  combined; leaf_nograd: y = f(x, w), then w changed in place under
  no_grad. Where PyTorch's backward fails because a saved tensor was
  modified, the program records `expect_error: "saved_modified"` (strata
  must fail with SavedTensorModified; the gradients are not compared);
- second_pass: 25% of graph programs run a second backward from the same
  output after a first with retain_graph ("retain": the gradients add up)
  or without it ("released": PyTorch fails where the second pass reaches
  a node whose saved tensors were freed, `expect_error: "graph_released"`,
  and runs through nodes that saved none). The upstream gradient is passed
  as a copy (a leaf's .grad can be a view of it, which the second pass
  adds to in place). strata's checkpoint refuses every second pass after
  a release, PyTorch's only where an op inside saved something: the
  replay accepts that one error (and compares twice strata's gradients).
double backward (create_graph) is not drawn: strata has none.

Seeds from 208 on (S45_SEED) also draw, in training programs, the
optimizer options strata gained in sessions 44 and 45: SGD's dampening,
nesterov and maximize; Adam's and AdamW's amsgrad and maximize; and fused
Adam/AdamW under a GradScaler for f32/f64 parameters too (the scaler hands
the fused step its scale, which divides the gradients in f32/f64). Seeds
below 208 draw exactly the programs they drew before (byte-identical files
for seeds 185, 195 and 203).

Seeds from 220 on (S46_SEED) close two gaps the oracle found in seed 223
that are not strata's to follow:
- the base of an in-place-on-views program inside a sub-program (a `seq`,
  a checkpointed or autocast region) is contiguous too, as it has been
  outside them since S43B_SEED (`sub_steps` turns the s43b families off,
  and with them that rule: PyTorch's `x + 0` of a transposed x kept its
  strides, its `reshape(-1)` copied, and the in-place op left the copy
  alone, where strata's contiguous sum gave a view);
- a program whose second backward adds to leaf gradients that share
  storage after the first is left out: PyTorch's AccumulateGrad keeps an
  incoming gradient as the leaf's `.grad` when nothing else holds it, so
  two leaves stacked and summed can both get views of one upstream element
  (strides 0), and the second pass adds into that element twice (3 times
  the gradient for both where the arithmetic gives 2 times). strata
  copies a first gradient into fresh storage.

Seeds from 275 on (S49_SEED) close two more, found in seeds 276 and 278:
- a training program whose leaf gradients share storage after a backward
  is left out (the same aliasing: the scaler's unscale_ then divides the
  shared element once per leaf);
- an f16/bf16 layer_norm is left out where PyTorch's CPU kernel, which
  saves the rows' mean and rstd in that dtype, is off by more than 1e-3
  through the rounded mean (`step`).

Seeds from 296 on (S52_SEED) leave out aliased leaf gradients before a
second backward pass without retain_graph as well (found in seed 295: the
released graph's second pass runs through nodes that saved no tensors and
adds into the shared element as the retained one does).

Seeds from 331 on (S55_SEED) also draw, in graph and API programs (not in
sub-programs; training programs draw as before), `s55_step`'s families:
keepdim reductions over several dims broadcast back against their input,
two views of the current value combined (overlapping narrows, a square
value with its transpose, `v.unsqueeze(0) op v.unsqueeze(1)`, a value with
a narrow of size 1 of itself), a tied-embedding model on a 2-D current value
(embedding, a broadcast positional leaf, layer_norm, linear with the table
itself, cross_entropy or log_softmax), s43's in-place ops on views of a
non-leaf with operands of another dtype (f64, bf16, f16), and a bf16
autocast region around a checkpoint of random steps (the recomputation runs
outside the region). Seeds below 331 draw exactly the programs they drew
before (byte-identical file for seed 322).

Seeds from 400 on (S58_SEED) also draw `s58_step`'s families in graph and
API programs: cross_entropy/nll_loss over [C], [N, C] and [N, C, d] with
class weights that are negative, all zero or of mixed sign, every target
ignored (or ignore_index a class), label smoothing 0, 0.3 or 1 and every
reduction; whole rows or single elements set to -inf by masked_fill before
softmax, log_softmax or logsumexp; mse_loss with a weight of mixed sign or
all zeros. Seeds below 400 draw exactly the programs they drew before
(byte-identical file for seed 382).

Seeds from 500 on (S59_SEED) also draw `s59_step`'s families in graph and
API programs: binary ops, where and addmm with a new leaf that broadcasts
against the current value (gradients summed back over size-1, leading and
0-d dims); the current value expanded or joined to itself before amax/amin/
max/min/norm/max_dim/logsumexp/softmax/var/sum (gradients of tied copies);
matmul whose batch dims broadcast on both sides; index_select/gather/
scatter_add/embedding with one position repeated (and padding_idx among
the repeats); a keepdim reduction broadcast back against its input and
combined with it again. From seed 500 on, a program whose f64 twin parts
from its f32 answer beyond rounding anywhere (a tie or bound decided by the
last bit of an inexact value; about 1 in 100) is left out (`diverges`):
seed 417's program 417:1949 failed in strata at an element where the twin
happened to agree. Seeds below 500 draw exactly the programs they drew
before.

Op cases deliberately left out (comments at each in `step`/`build`):
- dropout with 0 < p < 1 (random); mse_loss's `weight` with a broadcast
  target;
- an in-place op whose other operand shares the written tensor's storage
  (`y.mul_(y)`, another view of the same base): PyTorch refuses mul_/div_
  at backward (the saved operand's version changed), strata copies such an
  operand first and gives the gradient;
- differences of strata-tensor kernels that strata-autograd cannot change
  (reported): a zero loss of reduction "none" or zero of a matrix product fed
  to a later step (-0.0 vs +0.0); layer_norm with eps=0, rows of 1-2 elements or of variance < 0.01
  (precision of layer_norm_backward).
Class-target cross_entropy/nll_loss with non-finite logits, a zero total
weight under the mean, no classes, or a non-finite upstream gradient were left
out until strata-tensor's loss kernels took PyTorch's conventions (session 37);
they are drawn again.
"""

import argparse
import warnings
import json
import math
import random

import torch
import torch.nn.functional as F

INF = float("inf")
NAN = float("nan")
POOL = [-2.0, -1.5, -1.0, -0.5, -0.25, 0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0]
# Ops whose f32 result is exact on pool fractions (and on their results).
EXACT = {"neg", "relu", "abs", "sign", "add", "sub", "mul", "rsub", "maximum", "minimum",
         "sum", "cumsum", "index_select", "gather", "scatter_add", "embedding",
         "masked_fill", "masked_select", "where", "triu", "tril", "cat", "stack", "split",
         "chunk", "transpose", "t", "reshape", "unsqueeze", "squeeze", "flatten", "narrow",
         "expand", "permute", "matmul", "mm", "addmm", "linear", "pow_int", "mse_sum",
         "nll_sum"}


class Skip(Exception):
    pass


def enc(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def tjson(t):
    t = t.detach()
    if t.dtype == torch.bool:
        data = [bool(v) for v in t.reshape(-1).tolist()]
        dt = "bool"
    elif t.dtype in (torch.int64, torch.int32):
        data = [int(v) for v in t.reshape(-1).tolist()]
        dt = "i64" if t.dtype == torch.int64 else "i32"
    else:
        data = [enc(v) for v in t.reshape(-1).tolist()]
        # Seeds >= S44_SEED name a float tensor's own dtype (leaves and
        # constants of f64/bf16/f16, their gradients); earlier seeds write
        # "f32" for every float tensor, as before.
        dt = TYPED.get(t.dtype, "f32") if TYPED else "f32"
    return {"dtype": dt, "shape": list(t.shape), "data": data}


# Set by `main` for seeds >= S44_SEED: the dtype names `tjson` writes.
TYPED = {}


class Prog:
    def __init__(self, rng, dtype, more=False, s43=False, s43b=False, given=None, s44=False):
        self.rng = rng
        # Seeds >= S44_SEED: `s44_step`'s families.
        self.s44 = s44
        self.more = more
        self.s43 = s43
        # Seeds >= S43B_SEED: `s43b_step`'s ops. `given(name, t)`: the
        # tensor a new leaf stands for (a training program's parameter,
        # read in the program's dtype) instead of `t`. `replay`: a
        # checkpointed sub-program drawn again (its recomputation): leaves
        # and constants are handed out again instead of made.
        self.s43b = s43b
        self.given = given
        self.replay = False
        self.leaf_dtype = None  # new leaves' dtype where not the program's (S55_SEED)
        self.in_ckpt = False  # drawing a checkpointed sub-program's first run
        self.env = {}  # step output name -> tensor
        self.dtypes = {}  # autocast sub-program step output name -> dtype name
        # f32 for the recorded program; f64 for the same program (the same
        # f32 input values) to estimate PyTorch's own f32 rounding error.
        self.dtype = dtype
        self.special = rng.random() < 0.3
        self.inputs = {}  # name -> torch tensor (leaves require grad)
        # name -> the value a leaf had when made, where the program later
        # changes it in place (`leaf_nograd`): what the JSON records
        self.initial = {}
        self.order = []
        self.steps = []
        self.exact = True
        self.n = 0

    def values(self, shape, pool_only=False):
        r = self.rng
        k = 1
        for d in shape:
            k *= d
        mode = r.random()
        if not pool_only and self.special and mode < 0.12:
            # Pool values with some infinities and NaNs (softmax/logsumexp of -inf
            # rows, maximum/relu/abs of inf ...).
            v = [r.choice(POOL + [INF, -INF, -INF, NAN]) for _ in range(k)]
        elif pool_only or mode < 0.65:
            v = [r.choice(POOL) for _ in range(k)]
        else:
            self.exact = False
            v = [r.gauss(0.0, 1.0) if r.random() < 0.8 else r.choice(POOL) for _ in range(k)]
        return torch.tensor(v, dtype=torch.float32).reshape(shape).to(self.dtype)

    def leaf(self, shape, data=None):
        name = f"x{self.n}"
        self.n += 1
        t = self.values(shape) if data is None else data.detach().clone()
        if self.leaf_dtype is not None and data is None:
            # (S55_SEED's `inplace_view_mixed`: operands of another dtype)
            t = t.to(self.leaf_dtype)
        t = t.requires_grad_(True)
        if self.replay:
            return name, self.inputs[name]
        if self.given is not None:
            t = self.given(self, name, t)
        self.inputs[name] = t
        self.order.append(name)
        return name, t

    def const(self, t):
        name = f"c{self.n}"
        self.n += 1
        if self.replay:
            return name, self.inputs[name]
        self.inputs[name] = t
        self.order.append(name)
        return name, t


def rshape(r, lo=1, hi=3):
    # Now and then a size-0 dim (empty reductions, empty gathers).
    return [r.randint(0 if r.random() < 0.03 else 1, 4) for _ in range(r.randint(lo, hi))]


def bshape(r, shape):
    """A shape broadcastable to `shape` (dims dropped in front or set to 1)."""
    s = list(shape)
    if s and r.random() < 0.3:
        s = s[r.randint(1, len(s)):]
    return [1 if r.random() < 0.3 else d for d in s]


def rdim(r, nd):
    d = r.randrange(nd)
    return d - nd if r.random() < 0.4 else d


def rdims(r, nd, neg=False):
    """Dims to reduce over (None: all). With `neg` (seeds >= S43_SEED; the
    extra draws would change earlier seeds' programs) each dim is negative
    half of the time and the list is in random order."""
    if nd == 0 or r.random() < 0.2:
        return None
    k = r.randint(1, nd)
    ds = sorted(r.sample(range(nd), k))
    if neg:
        ds = [d - nd if r.random() < 0.5 else d for d in ds]
        r.shuffle(ds)
    return ds


UNARY = ["neg", "relu", "exp", "log", "sqrt", "rsqrt", "abs", "tanh", "sigmoid", "silu",
         "gelu", "sin", "cos", "erf", "log1p", "expm1", "reciprocal", "sign"]


def step(p, cur, x):
    """One random step on value `cur` (torch tensor `x`); returns
    (op, inputs, args, result, exact)."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    kinds = ["unary"] * 6 + ["binary"] * 5 + ["pow"] * 2 + ["reduce"] * 4 + ["dimop"] * 3 + \
        ["index"] * 5 + ["view"] * 2 + ["join"] * 2 + ["nn"] * 4 + ["matmul"] * 2 + \
        ["extrema"] * 5
    if p.more:
        # Seeds from NEW_OPS_SEED on also draw the ops added in session 38
        # (earlier seeds keep the list above, so their programs are unchanged).
        kinds += ["more"] * 8
    if p.s43:
        # Seeds from S43_SEED on also draw the ops added in session 43.
        kinds += ["s43"] * 10
    if p.s43b:
        # Seeds from S43B_SEED on also draw the second round of session 43.
        kinds += ["s43b"] * 8
    if p.s44:
        # Seeds from S44_SEED on also draw session 44's families.
        kinds += ["s44"] * 30
    if p.s44 and S55:
        # Seeds from S55_SEED on also draw session 55's (graph and API
        # programs, not in sub-programs; training programs draw as before).
        kinds += ["s55"] * 20
    if p.s44 and S58:
        # Seeds from S58_SEED on also draw session 58's.
        kinds += ["s58"] * 12
    if p.s44 and S59:
        # Seeds from S59_SEED on also draw session 59's.
        kinds += ["s59"] * 16
    kind = r.choice(kinds)
    if kind == "s59":
        return s59_step(p, cur, x)
    if kind == "s58":
        return s58_step(p, cur, x)
    if kind == "s55":
        return s55_step(p, cur, x)
    if kind == "s44":
        return s44_step(p, cur, x)
    if kind == "s43b":
        return s43b_step(p, cur, x)
    if kind == "more":
        return more_step(p, cur, x)
    if kind == "s43":
        return s43_step(p, cur, x)
    if kind == "unary":
        op = r.choice(UNARY)
        args = {}
        if op == "gelu":
            args["approximate"] = r.choice(["none", "tanh"])
            y = F.gelu(x, approximate=args["approximate"])
        elif op == "silu":
            y = F.silu(x)
        else:
            y = getattr(torch, op)(x)
        return op, [cur], args, y, op in EXACT
    if kind == "binary":
        op = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "maximum", "minimum",
                       "rsub"])
        if op == "rsub":
            c = r.choice([0.0, 1.0, -0.5, 2.0])
            return op, [cur], {"c": c}, c - x, True
        which = r.random()
        if which < 0.15 and op in ("maximum", "minimum", "mul", "sub"):
            # The same value as both operands.
            other, o = cur, x
        elif which < 0.45 and p.exact:
            # A new leaf equal to the current value: ties everywhere. Only
            # while the program is exact: a value rounded by an inexact op
            # can be an ulp off in strata, and a tie in PyTorch is none there.
            other, o = p.leaf(shape, x)
        else:
            other, o = p.leaf(bshape(r, shape))
        ins = [cur, other]
        if r.random() < 0.3 and other != cur:
            ins, (x, o) = [other, cur], (o, x)
        y = getattr(torch, op)(x, o) if op != "sub" else x - o
        return op, ins, {}, y, op in EXACT
    if kind == "pow":
        w = r.random()
        if w < 0.5:
            e = r.choice([0.0, 1.0, 2.0, 3.0, -1.0, 0.5, 2.5, -2.0])
            y = torch.pow(x, e)
            exact = e in (0.0, 1.0, 2.0)
            return "pow_scalar", [cur], {"e": e}, y, exact
        if w < 0.75:
            b = r.choice([0.0, 2.0, 0.5, 1.0])
            return "scalar_pow", [cur], {"base": b}, torch.pow(b, x), False
        other, o = p.leaf(bshape(r, shape))
        return "pow", [cur, other], {}, torch.pow(x, o), False
    if kind == "reduce":
        op = r.choice(["sum", "mean", "var", "std", "logsumexp", "sum", "std"])
        dims = rdims(r, nd, p.s43)
        keep = r.random() < 0.4
        if op == "logsumexp":
            if dims is None:
                dims = list(range(nd))
            y = torch.logsumexp(x, dims, keepdim=keep)
            return op, [cur], {"dims": dims, "keepdim": keep}, y, False
        args = {"dims": dims, "keepdim": keep}
        # None (all dims) is passed as dim=None: PyTorch's var/std backward
        # differs between dim=None and a list of every dim where no degree
        # of freedom is left (strata's None and [] are dim=None's).
        kw = {"dim": dims, "keepdim": keep}
        if op in ("var", "std"):
            c = r.choice([0.0, 1.0])
            args["correction"] = c
            kw["correction"] = c
            y = getattr(torch, op)(x, **kw)
        else:
            y = getattr(torch, op)(x, **kw)
        return op, [cur], args, y, op in EXACT
    if kind == "extrema":
        op = r.choice(["clamp", "clamp", "max_all", "min_all", "max_dim", "min_dim", "amax",
                       "amin", "norm", "norm"])
        keep = r.random() < 0.4
        if op == "clamp":
            # Pool bounds (boundary values come up often: PyTorch 2.15 gives
            # them no gradient), one of them missing now and then, and
            # min > max (every result is max, every gradient 0).
            # Rarely a NaN bound (every result NaN, every gradient 0).
            lo = r.choice([None, -1.0, -0.5, 0.0, 0.5, 1.0] + ([NAN] if r.random() < 0.1 else []))
            hi = r.choice([None, -0.5, 0.0, 0.5, 1.0, 2.0])
            if lo is None and hi is None:
                hi = 1.0
            y = torch.clamp(x, min=lo, max=hi)
            return op, [cur], {"min": None if lo is None else enc(lo), "max": hi}, y, True
        if op in ("max_all", "min_all"):
            # The gradient is split evenly among the ties (g / count: a
            # division that rounds for 3 ties; marked inexact).
            y = torch.max(x) if op == "max_all" else torch.min(x)
            return op, [cur], {}, y, False
        if op in ("max_dim", "min_dim"):
            d = rdim(r, nd) if nd else r.choice([0, -1])
            y = (torch.max if op == "max_dim" else torch.min)(x, d, keepdim=keep).values
            return op, [cur], {"dim": d, "keepdim": keep}, y, True
        if op in ("amax", "amin"):
            dims = rdims(r, nd, p.s43)
            y = getattr(torch, op)(x, dims if dims is not None else (), keepdim=keep)
            return op, [cur], {"dims": dims, "keepdim": keep}, y, False
        # A NaN order only for seeds >= NEW_OPS_SEED (earlier seeds' draws
        # unchanged): PyTorch gives |x| over one element, 0 over none, NaN
        # otherwise.
        pv = r.choice([2.0, 2.0, 1.0, 0.0, INF, -INF, 3.0, 0.5, 1.5, -1.0] +
                      ([NAN] if p.more else []))
        dims = rdims(r, nd, p.s43)
        y = torch.linalg.vector_norm(x, ord=pv, dim=dims, keepdim=keep)
        return op, [cur], {"p": enc(pv), "dims": dims, "keepdim": keep}, y, pv in (0.0, 1.0)
    if kind == "dimop":
        if nd == 0:
            raise Skip
        op = r.choice(["softmax", "log_softmax", "cumsum"])
        d = rdim(r, nd)
        y = getattr(torch, op)(x, d)
        return op, [cur], {"dim": d}, y, op in EXACT
    if kind == "index":
        op = r.choice(["index_select", "gather", "scatter_add", "embedding", "masked_fill",
                       "masked_select", "where", "triu", "tril"])
        if op in ("triu", "tril"):
            if nd < 2:
                raise Skip
            dg = r.randint(-2, 2)
            return op, [cur], {"diagonal": dg}, getattr(torch, op)(x, dg), True
        if op in ("masked_fill", "masked_select", "where"):
            m = torch.tensor([r.random() < 0.5 for _ in range(x.numel())]).reshape(shape)
            if op == "masked_fill":
                if r.random() < 0.3:
                    m = m.reshape(-1)[: max(1, 1)].reshape([1] * nd) if nd else m
                c, _ = p.const(m)
                v = r.choice([0.0, -1.0, 2.5, -INF])
                return op, [cur, c], {"value": enc(v)}, x.masked_fill(m, v), True
            c, _ = p.const(m)
            if op == "masked_select":
                return op, [cur, c], {}, torch.masked_select(x, m), True
            other, o = p.leaf(bshape(r, shape))
            ins = [c, cur, other]
            if r.random() < 0.5:
                ins, (x, o) = [c, other, cur], (o, x)
            return op, ins, {}, torch.where(m, x, o), True
        if nd == 0:
            raise Skip
        d = rdim(r, nd)
        n = shape[d]
        if op == "index_select":
            idx = torch.tensor([r.randrange(n) for _ in range(r.randint(1, 5))])
            c, _ = p.const(idx)
            return op, [cur, c], {"dim": d}, torch.index_select(x, d, idx), True
        if op == "gather":
            ishape = list(shape)
            ishape[d] = r.randint(1, 4)
            idx = torch.randint(0, n, ishape, generator=torch.Generator().manual_seed(
                r.randrange(1 << 30)))
            c, _ = p.const(idx)
            return op, [cur, c], {"dim": d}, torch.gather(x, d, idx), True
        if op == "scatter_add":
            ishape = [r.randint(1, s) for s in shape]
            idx = torch.randint(0, n, ishape, generator=torch.Generator().manual_seed(
                r.randrange(1 << 30)))
            c, _ = p.const(idx)
            src, s = p.leaf(list(ishape))
            return op, [cur, c, src], {"dim": d}, torch.scatter_add(x, d, idx, s), True
        if op == "embedding":
            if nd != 2:
                raise Skip
            rows = shape[0]
            idx = torch.tensor([r.randrange(rows) for _ in range(r.randint(1, 6))])
            if r.random() < 0.5:
                idx = idx.reshape(1, -1)
            pad = r.choice([None, 0, rows - 1, -1]) if True else None
            c, _ = p.const(idx)
            y = F.embedding(idx, x, padding_idx=pad)
            return op, [cur, c], {"padding_idx": pad}, y, True
    if kind == "view":
        op = r.choice(["transpose", "reshape", "unsqueeze", "squeeze", "flatten", "narrow",
                       "expand", "permute", "t"])
        if op == "transpose":
            if nd < 2:
                raise Skip
            a, b = rdim(r, nd), rdim(r, nd)
            return op, [cur], {"d0": a, "d1": b}, x.transpose(a, b), True
        if op == "t":
            if nd > 2:
                raise Skip
            return op, [cur], {}, x.t(), True
        if op == "reshape":
            return op, [cur], {"shape": [-1]}, x.reshape(-1), True
        if op == "unsqueeze":
            d = r.randint(-nd - 1, nd)
            return op, [cur], {"dim": d}, x.unsqueeze(d), True
        if op == "squeeze":
            ones = [i for i, s in enumerate(shape) if s == 1]
            if not ones:
                raise Skip
            return op, [cur], {"dims": ones}, x.squeeze(ones), True
        if op == "flatten":
            if nd == 0:
                raise Skip
            return op, [cur], {"start": 0, "end": -1}, x.flatten(0, -1), True
        if op == "narrow":
            if nd == 0:
                raise Skip
            d = rdim(r, nd)
            n = shape[d]
            st = r.randrange(n)
            ln = r.randint(1, n - st)
            return op, [cur], {"dim": d, "start": st, "length": ln}, x.narrow(d, st, ln), True
        if op == "expand":
            ns = [2] + [s if s != 1 or r.random() < 0.5 else 3 for s in shape]
            return op, [cur], {"shape": ns}, x.expand(ns), True
        if op == "permute":
            perm = list(range(nd))
            r.shuffle(perm)
            return op, [cur], {"dims": perm}, x.permute(perm), True
    if kind == "join":
        op = r.choice(["cat", "stack", "split", "chunk"])
        if nd == 0 and op != "stack":
            raise Skip
        if op in ("cat", "stack"):
            d = rdim(r, nd) if op == "cat" else r.randint(-nd - 1, nd)
            os_ = list(shape)
            if op == "cat":
                os_[d] = r.randint(1, 3)
            other, o = p.leaf(os_)
            ins = [cur, other] if r.random() < 0.5 else [other, cur]
            ts = [x if n_ == cur else o for n_ in ins]
            y = torch.cat(ts, d) if op == "cat" else torch.stack(ts, d)
            return op, ins, {"dim": d}, y, True
        d = rdim(r, nd)
        if op == "split":
            sz = r.randint(1, 3)
            parts = torch.split(x, sz, d)
            args = {"size": sz, "dim": d}
        else:
            ch = r.randint(1, 3)
            parts = torch.chunk(x, ch, d)
            args = {"chunks": ch, "dim": d}
        k = r.randrange(len(parts))
        args["piece"] = k
        return op, [cur], args, parts[k], True
    if kind == "matmul":
        op = r.choice(["matmul", "mm", "addmm", "linear"])
        if nd == 0:
            raise Skip
        k = shape[-1]
        m = r.randint(1, 3)
        if op == "matmul":
            osh = [k, m] if r.random() < 0.7 else [k]
            other, o = p.leaf(osh)
            return op, [cur, other], {}, torch.matmul(x, o), True
        if nd != 2:
            raise Skip
        if op == "mm":
            other, o = p.leaf([k, m])
            return op, [cur, other], {}, torch.mm(x, o), True
        if op == "addmm":
            m1, a = p.leaf([shape[0], 2])
            m2, b = p.leaf([2, shape[1]])
            return op, [cur, m1, m2], {}, torch.addmm(x, a, b), True
        w, wt = p.leaf([m, k])
        if r.random() < 0.5:
            b, bt = p.leaf([m])
            return op, [cur, w, b], {}, F.linear(x, wt, bt), True
        return op, [cur, w], {}, F.linear(x, wt), True
    if kind == "nn":
        op = r.choice(["layer_norm", "cross_entropy", "cross_entropy", "nll_loss",
                       "mse_loss"])
        red = r.choice(["mean", "sum", "none"])
        if op == "layer_norm":
            if nd == 0:
                raise Skip
            k = r.randint(1, nd)
            ns = shape[nd - k:]
            ins = [cur]
            wt = bt = None
            # eps=0 left out: on nearly constant rows rstd is large and the
            # gradient (0 in exact arithmetic for a constant upstream) is
            # rounding noise of 1e-6..1e-5 in strata where PyTorch's f32 is
            # near 0: a precision difference, not a convention.
            args = {"normalized_shape": ns, "eps": r.choice([1e-5, 1e-3, 0.1]),
                    "weight": False, "bias": False}
            if r.random() < 0.5:
                w, wt = p.leaf(ns)
                ins.append(w)
                args["weight"] = True
            if r.random() < 0.5:
                b, bt = p.leaf(ns)
                ins.append(b)
                args["bias"] = True
            # Left out (precision of strata-tensor's layer_norm_backward, not
            # a convention; reported): rows of 1 or 2 elements, where x_hat
            # is exactly 0 or +-1 in exact arithmetic (PyTorch gets a
            # gradient of exactly 0 for a constant upstream by symmetry,
            # strata rounding noise; a later log/log1p at the pole turns the
            # last ulp into a large difference), and rows with a variance
            # under 0.01 (rstd > 10 amplifies rounding noise past 1e-6).
            rows_ = x.detach().reshape(-1, math.prod(ns)) if x.numel() else None
            if math.prod(ns) <= 2 or (rows_ is not None and rows_.shape[0] and
                                      (rows_.var(1, correction=0) < 0.01).any()):
                raise Skip
            # Left out from S49_SEED on (a PyTorch CPU precision quirk, not
            # a convention): for an f16/bf16 input (weight and bias, if any,
            # of its dtype, as the programs draw them), PyTorch's CPU kernel saves the rows' mean and
            # rstd in that dtype (its CUDA kernel and strata keep them in
            # f32), and its backward through the rounded mean is off by
            # about rstd^2 * |mean| * ulp (seed 278 program 673: 0.041 where
            # the exact gradient of a summed layer_norm is 0 and strata's
            # is 1e-15). Rows where that exceeds 1e-3 are not a case.
            if S49 and x.dtype in (torch.bfloat16, torch.float16) and rows_ is not None \
                    and rows_.shape[0]:
                rf = rows_.float()
                ulp = 2.0 ** -8 if x.dtype == torch.bfloat16 else 2.0 ** -11
                rstd2 = 1.0 / (rf.var(1, correction=0) + args["eps"])
                if (rstd2 * rf.mean(1).abs() * ulp > 1e-3).any():
                    raise Skip
            y = F.layer_norm(x, ns, wt, bt, args["eps"])
            return op, ins, args, y, False
        if op == "mse_loss":
            tg, t = p.leaf(bshape(r, shape) if r.random() < 0.3 else shape)
            args = {"reduction": red, "weight": None}
            ins = [cur, tg]
            if list(t.shape) == shape and r.random() < 0.3:
                wv = torch.tensor([r.choice([0.0, 0.5, 1.0, 2.0]) for _ in range(x.numel())],
                                  dtype=torch.float32).reshape(shape).to(p.dtype)
                c, _ = p.const(wv)
                ins.append(c)
                args["weight"] = True
                y = F.mse_loss(x, t, reduction=red, weight=wv)
            else:
                y = F.mse_loss(x, t, reduction=red)
            return op, ins, args, y, red != "mean"
        # cross_entropy / nll_loss over [N, C] or [C].
        if nd not in (1, 2):
            raise Skip
        C = shape[-1]
        rows = shape[0] if nd == 2 else None
        ign = r.choice([-100, 0, 1])
        tshape = [rows] if nd == 2 else []
        tv = torch.tensor([r.choice(list(range(C)) + [ign] if r.random() < 0.3 else
                                    list(range(C))) for _ in range(rows or 1)])
        tv = tv.reshape(tshape)
        if ((tv >= C) | (tv < 0)).any() and not (((tv == ign) | ((tv >= 0) & (tv < C))).all()):
            raise Skip
        c, _ = p.const(tv)
        ins = [cur, c]
        wv = None
        if r.random() < 0.3:
            wv = torch.tensor([r.choice([0.0, 0.5, 1.0, 2.0]) for _ in range(C)],
                              dtype=torch.float32).to(p.dtype)
            cw, _ = p.const(wv)
            ins.append(cw)
        args = {"reduction": red, "ignore_index": ign, "weight": wv is not None}
        if op == "nll_loss":
            y = F.nll_loss(x, tv, weight=wv, ignore_index=ign, reduction=red)
            return op, ins, args, y, red != "mean" and wv is None
        if r.random() < 0.25:
            # Probability targets (a float tensor of the input's shape).
            pt = torch.softmax(p.values(shape), -1)
            ins = [cur] + [p.const(pt)[0]] + ins[2:]
            args["probs"] = True
        ls = r.choice([0.0, 0.0, 0.1, 1.0])
        args["label_smoothing"] = ls
        tgt = pt if args.get("probs") else tv
        y = F.cross_entropy(x, tgt, weight=wv, ignore_index=ign, reduction=red,
                            label_smoothing=ls)
        return op, ins, args, y, False
    raise Skip


# The first seed whose programs also draw `more_step`'s ops.
NEW_OPS_SEED = 127

# Unary functions a checkpoint may wrap (by name; "identity" returns its
# input itself, "sin_mul" is two ops: t * sin(t)).
CKPT_FUNS = ["identity", "sin_mul", "exp", "tanh", "relu", "abs", "sqrt", "neg"]


def ckpt_fun(name):
    if name == "identity":
        return lambda t: t
    if name == "sin_mul":
        return lambda t: t * torch.sin(t)
    return getattr(torch, name)


def attention_prog(p, cur, x):
    """attention(cur, k, v) with new leaves k and v (more_step's and
    s43_step's)."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    op = "attention"
    if nd < 2:
        raise Skip
    L, E = shape[-2], shape[-1]
    S = r.randint(1, 3)
    Ev = r.randint(1, 3)
    batch = shape[:-2]
    kb = batch if r.random() < 0.7 else [1] * len(batch)
    kn, k = p.leaf(kb + [S, E])
    vn, v = p.leaf(kb + [S, Ev])
    causal = r.random() < 0.4
    scale = r.choice([None, None, 0.5, 1.0, 2.0])
    sc = scale if scale is not None else 1.0 / math.sqrt(E) if E else None
    if sc is None:
        raise Skip
    s = torch.matmul(x, k.transpose(-2, -1)) * sc
    if causal:
        m = torch.ones(L, S, dtype=torch.bool).triu(1)
        s = s.masked_fill(m, -INF)
    # A row whose scores hold a NaN (or are all -inf) is NaN through and
    # through, masked columns included (exp(-inf - nan)), and so is
    # their v gradient; strata-tensor's `scaled_softmax(causal)` makes
    # them NaN too since session 39 (drawn again).
    pr = torch.softmax(s, -1)
    y = torch.matmul(pr, v)
    return op, [cur, kn, vn], {"causal": causal, "scale": scale}, y, False


def more_step(p, cur, x):
    """The ops added in session 38 (drawn for seeds >= NEW_OPS_SEED):
    attention (the eager math of PyTorch's SDPA, which is what strata's op
    computes), gelu_linear (linear(gelu(x))), dropout with p 0 or 1 (no
    random draw), dtype round trips (f16/bf16/f64 and back: the gradient is
    rounded on its way back), in-place ops on a fresh non-leaf (add_ sub_
    mul_ div_ zero_) and non-reentrant checkpoints of small functions."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    op = r.choice(["attention", "attention", "gelu_linear", "dropout", "cast", "inplace",
                   "inplace", "checkpoint", "checkpoint"])
    if op == "attention":
        return attention_prog(p, cur, x)
    if op == "gelu_linear":
        if nd == 0:
            raise Skip
        k = shape[-1]
        m = r.randint(1, 3)
        appr = r.choice(["none", "tanh"])
        w, wt = p.leaf([m, k])
        ins = [cur, w]
        bt = None
        if r.random() < 0.5:
            b, bt = p.leaf([m])
            ins.append(b)
        y = F.linear(F.gelu(x, approximate=appr), wt, bt)
        return op, ins, {"approximate": appr}, y, False
    if op == "dropout":
        pr = r.choice([0.0, 1.0])
        train = r.random() < 0.7
        return op, [cur], {"p": pr, "train": train}, F.dropout(x, pr, train), True
    if op == "cast":
        dt = r.choice(["f16", "bf16", "f64"])
        tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}[dt]
        # In the f64 run (the error estimate) the round trip goes through
        # the same narrow dtype and back to f64.
        y = x.to(tdt).to(p.dtype)
        # f16/bf16 round to nearest even on both sides: exact when the
        # program is (pool fractions fit both).
        return op, [cur], {"dtype": dt}, y, True
    if op == "inplace":
        which = r.choice(["add_", "sub_", "mul_", "div_", "zero_", "mul_scalar_",
                          "div_scalar_"])
        # In place on a fresh non-leaf (x + 0: a leaf requiring grad is
        # refused, a view of one too).
        y = x + 0.0
        if which == "zero_":
            y.zero_()
            return op, [cur], {"op": which}, y, True
        if which in ("mul_scalar_", "div_scalar_"):
            c = r.choice([2.0, -0.5, 0.0])
            (y.mul_ if which == "mul_scalar_" else y.div_)(c)
            return op, [cur], {"op": which, "c": c}, y, which == "mul_scalar_"
        other, o = p.leaf(bshape(r, shape))
        getattr(y, which)(o)
        return op, [cur, other], {"op": which}, y, which != "div_"
    name = r.choice(CKPT_FUNS)
    from torch.utils.checkpoint import checkpoint
    y = checkpoint(ckpt_fun(name), x, use_reentrant=False)
    exact = name in ("identity", "relu", "abs", "neg")
    return "checkpoint", [cur], {"fn": name}, y, exact


# The first seed whose programs also draw `s43_step`'s ops (and negative,
# unsorted reduction dims).
S43_SEED = 165

# View ops, and ops that return their input itself in PyTorch (dropout that
# draws no mask, a cast to the same dtype; flatten with start == end too).
VIEW_OPS = ["narrow", "narrow", "transpose", "permute", "unsqueeze", "squeeze", "t", "reshape",
            "view", "flatten", "flatten", "dropout", "to_same"]


def rand_reshape(r, shape):
    """A random target shape with `shape`'s elements: flattened, two
    neighbour dims merged, one dim split, a 1 added; sometimes one size
    given as -1."""
    nd = len(shape)
    n = math.prod(shape)
    opts = [list(shape) + [1], [1] + list(shape)]
    if n:
        opts.append([-1])
    if nd >= 2:
        i = r.randrange(nd - 1)
        opts.append(shape[:i] + [shape[i] * shape[i + 1]] + shape[i + 2:])
    splits = [(i, a) for i, s in enumerate(shape) for a in range(2, s) if s % a == 0]
    if splits:
        i, a = r.choice(splits)
        opts.append(shape[:i] + [a, shape[i] // a] + shape[i + 1:])
    tgt = list(r.choice(opts))
    if n and tgt != [-1] and r.random() < 0.3:
        tgt[r.randrange(len(tgt))] = -1
    return tgt


def rand_view(r, shape, expand=False):
    """A random view op (as the replay's `view_step` reads it) on a tensor of
    `shape`, or None. `reshape` copies where the strides allow no view (as
    in PyTorch: then an in-place op on it leaves the base alone); `view`
    there fails and the program is not a case. `dropout` (drawing no mask)
    and `to_same` return their input itself, as does `flatten` with
    start == end."""
    nd = len(shape)
    ops = VIEW_OPS + (["expand"] if expand else [])
    for _ in range(10):
        op = r.choice(ops)
        if op == "narrow" and nd:
            d = rdim(r, nd)
            n = shape[d]
            if n == 0:
                continue
            st = r.randrange(n)
            ln = r.randint(0 if r.random() < 0.1 else 1, n - st)
            return {"op": op, "dim": d, "start": st, "length": ln}
        if op == "transpose" and nd >= 1:
            return {"op": op, "d0": rdim(r, nd), "d1": rdim(r, nd)}
        if op == "permute" and nd >= 2:
            perm = list(range(nd))
            r.shuffle(perm)
            return {"op": op, "dims": [d - nd if r.random() < 0.3 else d for d in perm]}
        if op == "unsqueeze":
            return {"op": op, "dim": r.randint(-nd - 1, nd)}
        if op == "squeeze":
            ones = [i - nd if r.random() < 0.3 else i for i, s in enumerate(shape) if s == 1]
            if ones:
                return {"op": op, "dims": ones}
        if op == "t" and nd <= 2:
            return {"op": op}
        if op in ("reshape", "view"):
            return {"op": op, "shape": rand_reshape(r, shape)}
        if op == "flatten" and nd:
            a = r.randrange(nd)
            b = a if r.random() < 0.3 else r.randrange(a, nd)
            return {"op": op, "start": a - nd if r.random() < 0.3 else a,
                    "end": b - nd if r.random() < 0.3 else b}
        if op == "dropout":
            return {"op": op, **r.choice([{"p": 0.0, "train": True}, {"p": 0.5, "train": False},
                                          {"p": 1.0, "train": False}])}
        if op == "to_same":
            return {"op": op}
        if op == "expand":
            ns = [r.randint(1, 2)] if r.random() < 0.5 else []
            ns += [-1 if r.random() < 0.3 else (s if s != 1 or r.random() < 0.5 else 3)
                   for s in shape]
            return {"op": op, "shape": ns}
    return None


def apply_view(t, v):
    op = v["op"]
    if op == "narrow":
        return t.narrow(v["dim"], v["start"], v["length"])
    if op == "transpose":
        return t.transpose(v["d0"], v["d1"])
    if op == "permute":
        return t.permute(v["dims"])
    if op == "unsqueeze":
        return t.unsqueeze(v["dim"])
    if op == "squeeze":
        return t.squeeze(v["dims"])
    if op == "t":
        return t.t()
    if op == "reshape":
        return t.reshape(v["shape"])
    if op == "view":
        return t.view(v["shape"])
    if op == "flatten":
        return t.flatten(v["start"], v["end"])
    if op == "dropout":
        return F.dropout(t, v["p"], v["train"])
    if op == "to_same":
        return t.to(t.dtype)
    return t.expand(v["shape"])


def view_chain(r, t, lo, hi, expand=False):
    """lo..hi random view ops from `t`: (steps, result)."""
    steps = []
    for _ in range(r.randint(lo, hi)):
        v = rand_view(r, list(t.shape), expand)
        if v is None:
            break
        t = apply_view(t, v)
        steps.append(v)
    if not steps:
        raise Skip
    return steps, t


def s43_step(p, cur, x, force=None):
    """The ops added in session 43 (drawn for seeds >= S43_SEED): recorded
    in-place ops on views of a fresh non-leaf (PyTorch's CopySlices: 1-2
    ops on chains of 1-2 views of the base or of an earlier view, taken
    before the first op or just before one; the result is the base or one
    of the views, whose history is then regenerated; sometimes the ops run
    in no_grad mode; a chain may hold ops that return their input itself),
    chains of view ops (negative dims, reshapes that copy, expand with -1),
    split into sections, class losses over [N, C, d...] inputs,
    softmax/log_softmax with a dtype (from an f16/bf16 cast of the input, as
    under autocast), masked_fill/where with a broadcast mask, linear over
    1-D and >2-D inputs, batched matmul and attention keeping its
    probabilities."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    # `force` (S55_SEED's families): that op without a draw.
    op = force or r.choice(["inplace_view"] * 4 + ["inplace_view_no_grad", "attention_probs"] +
                           ["loss_kdim"] * 2 + ["softmax_cast", "masked_bcast", "linear_nd",
                                                "matmul_batched", "view_chain", "split_sections"])
    if op == "attention_probs":
        # Keeping the probabilities for backward instead of recomputing them.
        op, ins, args, y, exact = attention_prog(p, cur, x)
        args["saving"] = "probs"
        return op, ins, args, y, exact
    if op in ("inplace_view", "inplace_view_no_grad"):
        # Events on a fresh non-leaf `base`: "take" a chain of 1-2 views of
        # the base or of an earlier view (chains are numbered in the order
        # taken), or an in-place op on one of them. 1-3 chains are taken
        # before the first op (some may never be modified: their history is
        # regenerated when read), more just before an op now and then.
        # "inplace_view_no_grad": the ops run in no_grad mode (not recorded:
        # the base keeps its history, operands get no gradient), views are
        # taken in either mode.
        no_grad = op == "inplace_view_no_grad"
        op = "inplace_view"
        base = x + 0.0
        if p.s43b or S46:
            # PyTorch's `x + 0` keeps a permuted x's strides, so a later
            # reshape/flatten of the base can be a copy in PyTorch and a
            # view in strata (whose results were contiguous before
            # session 56); whether reshape copies is documented as
            # unspecified. Seeds >= S43B_SEED take a contiguous base
            # (earlier seeds still take `x + 0`, so their programs are
            # unchanged), and so does the replay (`Env::contiguous_base`
            # in grad_oracle.rs).
            base = base.contiguous()
        views, events = [], []

        def take():
            src = -1 if not views or r.random() < 0.6 else r.randrange(len(views))
            ng = no_grad and r.random() < 0.5
            with torch.set_grad_enabled(not ng):
                steps, v = view_chain(r, base if src < 0 else views[src], 1, 2)
            views.append(v)
            events.append({"take": steps, "from": src, "no_grad": ng})

        for _ in range(r.randint(1, 3)):
            take()
        ins, exact = [cur], True
        for _ in range(r.randint(1, 2)):
            if r.random() < 0.4:
                take()
            j = r.randrange(len(views)) if r.random() < 0.5 else len(views) - 1
            v = views[j]
            which = r.choice(["add_", "add_", "sub_", "mul_", "mul_", "div_", "zero_",
                              "add_scalar_", "mul_scalar_", "div_scalar_"])
            o = {"op": which, "chain": j}
            if which == "zero_":
                c = t = None
            elif which.endswith("_scalar_"):
                c, t = r.choice([2.0, -0.5, 0.0, 1.5]), None
                o["c"] = c
                exact = exact and which != "div_scalar_"
            else:
                name, t = p.leaf(bshape(r, list(v.shape)))
                o["operand"] = len(ins)
                ins.append(name)
                exact = exact and which != "div_"
            with torch.set_grad_enabled(not no_grad):
                if which == "zero_":
                    v.zero_()
                else:
                    getattr(v, which[:3] + "_")(c if t is None else t)
            events.append(o)
        out = -1 if r.random() < 0.5 else r.randrange(len(views))
        y = base if out < 0 else views[out]
        return op, ins, {"events": events, "out": out, "no_grad": no_grad}, y, exact
    if op == "view_chain":
        steps, y = view_chain(r, x, 1, 3, expand=True)
        return op, [cur], {"steps": steps}, y, True
    if op == "split_sections":
        if nd == 0:
            raise Skip
        d = rdim(r, nd)
        rem = shape[d]
        secs = []
        while rem > 0 or not secs:
            s = r.randint(0 if r.random() < 0.1 else min(1, rem), rem)
            secs.append(s)
            rem -= s
        k = r.randrange(len(secs))
        y = torch.split(x, secs, d)[k]
        return "split", [cur], {"sections": secs, "dim": d, "piece": k}, y, True
    if op == "loss_kdim":
        # cross_entropy / nll_loss over [N, C, d1, ...] (targets [N, d1, ...]).
        if nd < 3:
            raise Skip
        which = r.choice(["cross_entropy", "cross_entropy", "nll_loss"])
        red = r.choice(["mean", "sum", "none"])
        C = shape[1]
        tshape = [shape[0]] + shape[2:]
        ign = r.choice([-100, 0, 1])
        tv = torch.tensor([r.choice(list(range(C)) + [ign] if r.random() < 0.3 else
                                    list(range(C))) for _ in range(math.prod(tshape))],
                          dtype=torch.int64).reshape(tshape)
        if not ((tv == ign) | ((tv >= 0) & (tv < C))).all():
            raise Skip
        c, _ = p.const(tv)
        ins = [cur, c]
        wv = None
        if r.random() < 0.3:
            wv = torch.tensor([r.choice([0.0, 0.5, 1.0, 2.0]) for _ in range(C)],
                              dtype=torch.float32).to(p.dtype)
            ins.append(p.const(wv)[0])
        args = {"reduction": red, "ignore_index": ign, "weight": wv is not None}
        if which == "nll_loss":
            y = F.nll_loss(x, tv, weight=wv, ignore_index=ign, reduction=red)
            return which, ins, args, y, red != "mean" and wv is None
        tgt = tv
        if r.random() < 0.25:
            tgt = torch.softmax(p.values(shape), 1)
            ins = [cur, p.const(tgt)[0]] + ins[2:]
            args["probs"] = True
        ls = r.choice([0.0, 0.0, 0.1, 1.0])
        args["label_smoothing"] = ls
        y = F.cross_entropy(x, tgt, weight=wv, ignore_index=ign, reduction=red,
                            label_smoothing=ls)
        return which, ins, args, y, False
    if op == "softmax_cast":
        # softmax(x.to(src), dim, dtype=dt).to(f32); in the f64 run (the
        # error estimate) dtype f32 stands for the run's own dtype.
        if nd == 0:
            raise Skip
        fn = r.choice(["softmax", "log_softmax"])
        d = rdim(r, nd)
        src = r.choice([None, "f16", "bf16"])
        dt = r.choice(["f32", "f64"])
        xi = x if src is None else x.to({"f16": torch.float16, "bf16": torch.bfloat16}[src])
        odt = torch.float64 if dt == "f64" else p.dtype
        y = getattr(torch, fn)(xi, d, dtype=odt).to(p.dtype)
        return op, [cur], {"fn": fn, "dim": d, "src": src, "dtype": dt}, y, False
    if op == "masked_bcast":
        # A mask broadcast to the input's shape (a causal [L, S] mask over
        # [B, L, S] scores); now and then a larger one, which broadcasts the
        # input too (out-of-place masked_fill and where do both ways).
        ms = bshape(r, shape)
        if r.random() < 0.15:
            ms = [r.randint(1, 2)] + ([r.randint(1, 2)] if not ms else ms)
        m = torch.tensor([r.random() < 0.5 for _ in range(math.prod(ms))],
                         dtype=torch.bool).reshape(ms)
        c, _ = p.const(m)
        if r.random() < 0.6:
            v = r.choice([0.0, -1.0, 2.5, -INF])
            return "masked_fill", [cur, c], {"value": enc(v)}, x.masked_fill(m, v), True
        other, o = p.leaf(bshape(r, shape))
        ins = [c, cur, other]
        a, b = x, o
        if r.random() < 0.5:
            ins, a, b = [c, other, cur], o, x
        return "where", ins, {}, torch.where(m, a, b), True
    if op == "linear_nd":
        # [2-D inputs are the `matmul` family's]
        if nd in (0, 2):
            raise Skip
        k = shape[-1]
        m = r.randint(1, 3)
        w, wt = p.leaf([m, k])
        if r.random() < 0.5:
            b, bt = p.leaf([m])
            return "linear", [cur, w, b], {}, F.linear(x, wt, bt), True
        return "linear", [cur, w], {}, F.linear(x, wt), True
    # matmul with a batched operand (x @ o or o @ x, batch dims broadcast).
    if nd == 0:
        raise Skip
    m = r.randint(1, 3)
    batch = shape[:-2]
    ob = bshape(r, batch) if batch and r.random() < 0.6 else \
        [r.randint(1, 3) for _ in range(r.randint(1, 2))]
    if nd >= 2 and r.random() < 0.4:
        other, o = p.leaf(ob + [m, shape[-2]])
        return "matmul", [other, cur], {}, torch.matmul(o, x), True
    other, o = p.leaf(ob + [shape[-1], m])
    return "matmul", [cur, other], {}, torch.matmul(x, o), True


# The first seed whose programs also draw the second round of session 43
# (`s43b_step`'s ops, training programs and programs of the gradient API).
S43B_SEED = 173

DTYPES = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16,
          "f16": torch.float16}


def dname(dt):
    return {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
            torch.float16: "f16", torch.int64: "i64", torch.bool: "bool"}[dt]


# Ops whose result holds a zero of the wrong sign in strata-tensor when fed
# on (see `draw`).
def zero_sign(op, args):
    return (op in ("nll_loss", "cross_entropy") and args["reduction"] == "none") \
        or op in ("matmul", "mm", "addmm", "linear", "attention", "gelu_linear")


def sub_steps(p, x, seed, k, prefix, autocast=False):
    """k steps from `x` (named prefix + "0"), drawn from their own generator
    Random(seed) (the ops of every family but s43b's: no sub-program in a
    sub-program): a checkpointed function or an autocast region. Returns
    (steps, result name, result, exact)."""
    saved = (p.rng, p.s43b, p.s44)
    p.rng, p.s43b, p.s44 = random.Random(seed), False, False
    cur, steps, exact = prefix + "0", [], True
    try:
        for i in range(k):
            op, ins, args, y, ex = step(p, cur, x)
            exact = exact and ex
            out = f"{prefix}{i + 1}"
            steps.append({"op": op, "in": ins, "args": args, "out": out})
            # (the sign of a zero: as in `draw`, for whatever comes next)
            if zero_sign(op, args) and (y == 0).any():
                raise Skip
            if y.numel() > 200:
                raise Skip
            if autocast and not p.replay:
                p.dtypes[out] = dname(y.dtype)
            cur, x = out, y
    finally:
        p.rng, p.s43b, p.s44 = saved
    return steps, cur, x, exact


def s43b_step(p, cur, x, force=None):
    """The ops of session 43's second round (drawn for seeds >= S43B_SEED):
    a non-reentrant checkpoint of 1-3 random steps (leaves made inside are
    parameters the function captures; its recomputation draws the same
    steps again from their own generator and hands out the same leaves),
    1-3 random steps in an autocast region (CPU, bf16; each result's dtype
    is recorded in the program's `dtypes`, the result is cast back),
    `x * c + x.detach()`, and index arguments not drawn before: gather with
    an index smaller than the input in the other dims, scatter_add with a
    source larger than the index, index_select with a 0-d or empty index,
    embedding of 0-d and 3-d indices with negative padding_idx,
    masked_select with a mask broadcast either way, cumsum in f64, and
    softmax/log_softmax/cumsum of a 0-d input."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    op = force or r.choice(["ckpt_steps"] * 3 + ["autocast_steps"] * 3 +
                  ["detach_mix", "gather_small", "scatter_add_big", "index_select_0d",
                   "embedding_nd", "masked_select_bcast", "cumsum_dtype", "dim_0d"])
    prefix = f"s{len(p.steps)}."
    if op == "ckpt_steps":
        seed = r.randrange(1 << 30)
        k = r.randint(1, 3)
        n0, exact0 = p.n, p.exact
        first = {}

        def fn(t):
            if first:
                # The recomputation: the same draws, the same leaves.
                saved = (p.n, p.exact, p.replay)
                p.n, p.exact, p.replay = n0, exact0, True
                try:
                    return sub_steps(p, t, seed, k, prefix)[2]
                finally:
                    p.n, p.exact, p.replay = saved
            p.in_ckpt = True
            try:
                steps, res, y, exact = sub_steps(p, t, seed, k, prefix)
            finally:
                p.in_ckpt = False
            first.update(steps=steps, res=res, exact=exact)
            return y

        from torch.utils.checkpoint import checkpoint
        y = checkpoint(fn, x, use_reentrant=False)
        return op, [cur], {"steps": first["steps"], "result": first["res"]}, y, first["exact"]
    if op == "autocast_steps":
        seed = r.randrange(1 << 30)
        k = r.randint(1, 3)
        # In the f64 run (the error estimate) nothing is cast: f64 is not
        # autocast's, so the estimate allows bf16's rounding.
        with torch.autocast("cpu", dtype=torch.bfloat16):
            steps, res, y, _ = sub_steps(p, x, seed, k, prefix, autocast=True)
        return op, [cur], {"steps": steps, "result": res}, y.to(p.dtype), False
    if op == "detach_mix":
        c = r.choice([2.0, -1.0, 0.5, 0.0])
        return op, [cur], {"c": c}, x * c + x.detach(), True
    if op == "dim_0d":
        if nd != 0:
            raise Skip
        fn = r.choice(["softmax", "log_softmax", "cumsum"])
        d = r.choice([0, -1])
        return fn, [cur], {"dim": d}, getattr(torch, fn)(x, d), fn == "cumsum"
    if op == "cumsum_dtype":
        d = rdim(r, nd) if nd else r.choice([0, -1])
        y = torch.cumsum(x, d, dtype=torch.float64).to(p.dtype)
        return op, [cur], {"dim": d}, y, True
    if op == "masked_select_bcast":
        ms = bshape(r, shape)
        if r.random() < 0.3:
            ms = [r.randint(1, 2)] + ([r.randint(1, 2)] if not ms else ms)
        m = torch.tensor([r.random() < 0.5 for _ in range(math.prod(ms))],
                         dtype=torch.bool).reshape(ms)
        c, _ = p.const(m)
        return "masked_select", [cur, c], {}, torch.masked_select(x, m), True
    if op == "embedding_nd":
        if nd != 2 or shape[0] == 0:
            raise Skip
        rows = shape[0]
        ishape = r.choice([[], [2, 1, 3], [1, 2], [0]])
        idx = torch.tensor([r.randrange(rows) for _ in range(math.prod(ishape))],
                           dtype=torch.int64).reshape(ishape)
        pad = r.choice([None, -1, -rows, 0])
        c, _ = p.const(idx)
        return "embedding", [cur, c], {"padding_idx": pad}, F.embedding(idx, x, padding_idx=pad), \
            True
    if nd == 0:
        raise Skip
    d = rdim(r, nd)
    n = shape[d]
    if op == "index_select_0d":
        if r.random() < 0.6:
            if n == 0:
                raise Skip
            idx = torch.tensor(r.randrange(n))
        else:
            idx = torch.zeros(0, dtype=torch.int64)
        c, _ = p.const(idx)
        return "index_select", [cur, c], {"dim": d}, torch.index_select(x, d, idx), True
    if n == 0:
        raise Skip
    g = torch.Generator().manual_seed(r.randrange(1 << 30))
    if op == "gather_small":
        # index.size(k) <= input.size(k) for k != dim.
        ishape = [r.randint(min(1, s), s) for s in shape]
        ishape[d] = r.randint(1, 4)
        idx = torch.randint(0, n, ishape, generator=g)
        c, _ = p.const(idx)
        return "gather", [cur, c], {"dim": d}, torch.gather(x, d, idx), True
    # scatter_add: index.size(k) <= src.size(k) for every k and <=
    # self.size(k) for k != dim; the source may be larger than the index.
    ishape = [r.randint(min(1, s), s) for s in shape]
    ishape[d] = r.randint(1, 3)
    idx = torch.randint(0, n, ishape, generator=g)
    c, _ = p.const(idx)
    src, st = p.leaf([s + r.randint(0, 1) for s in ishape])
    return "scatter_add", [cur, c, src], {"dim": d}, torch.scatter_add(x, d, idx, st), True


# The first seed whose graph and API programs also draw `s44_step`'s
# families (and whose JSON names each float tensor's dtype: `TYPED`).
S44_SEED = 181

# Unary ops `inplace_after` applies before the in-place op (PyTorch saves
# the input of some, the result of others: exp, tanh, sigmoid, relu, sqrt,
# rsqrt, reciprocal and expm1 keep their result, which the in-place op on
# the input leaves alone).
S44_UNARY = ["exp", "tanh", "sigmoid", "relu", "sqrt", "rsqrt", "reciprocal", "expm1",
             "sin", "cos", "log", "abs", "erf", "log1p", "silu", "gelu", "neg", "sign"]


def unary_torch(op, x):
    if op == "gelu":
        return F.gelu(x)
    if op == "silu":
        return F.silu(x)
    return getattr(torch, op)(x)


def earlier(p, cur, x, float_only=True):
    """Names and tensors of the program's earlier values (leaves, float
    constants and step outputs other than `cur`) whose shape broadcasts
    with `x`'s to a result of at most 200 elements."""
    out = []
    for n, t in [(n, p.inputs[n]) for n in p.order] + list(p.env.items()):
        if n == cur or not isinstance(t, torch.Tensor) or \
                (float_only and not t.is_floating_point()):
            continue
        try:
            s = torch.broadcast_shapes(t.shape, x.shape)
        except RuntimeError:
            continue
        if math.prod(s) <= 200:
            out.append((n, t))
    return out


def combine(p, o, cur, x, n, t, mask_shape):
    """The current value `x` (named `cur`) with another operand `t` (named
    `n`) by binary op `o`, either side first, or by `where` under a random
    bool mask of `mask_shape`: the step's inputs and PyTorch's result."""
    r = p.rng
    if o == "where":
        m = torch.tensor([r.random() < 0.5 for _ in range(math.prod(mask_shape))],
                         dtype=torch.bool).reshape(mask_shape)
        c, _ = p.const(m)
        if r.random() < 0.5:
            return [c, cur, n], torch.where(m, x, t)
        return [c, n, cur], torch.where(m, t, x)
    a, b, ins = x, t, [cur, n]
    if r.random() < 0.4:
        a, b, ins = t, x, [n, cur]
    return ins, a - b if o == "sub" else getattr(torch, o)(a, b)


def s44_step(p, cur, x):
    """Session 44's families (drawn for seeds >= S44_SEED; named in the
    module docstring). Sub-programs are steps named `q<i>.<k>` (replayed by
    the `seq` op) so that they never collide with the `s<i>.<k>` names of
    s43b's checkpoint and autocast sub-programs and their `dtypes`."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    pre = f"q{len(p.steps)}."
    op = r.choice(["reuse"] * 4 + ["self_multi"] * 3 + ["noncontig"] * 4 + ["lowp"] * 4 +
                  ["mixed_operand"] * 3 + ["split_both"] * 2 + ["inplace_after"] * 3 +
                  ["empty"] * 3 + ["index_i32"] * 2 + ["leaf_nograd"] * 2 +
                  ["reduce_corner"] * 3)
    if op == "reduce_corner":
        # Reductions and dim ops of a 0-d value with dim 0 or -1 (the
        # current value, or its sum), an empty dim list, var/std with a
        # correction of 2, 0.5 or more than the count (inf/NaN).
        w = r.choice(["var", "std", "sum", "mean", "amax", "amin", "norm", "logsumexp",
                      "max_dim", "min_dim", "cumsum", "softmax", "log_softmax", "var", "std"])
        steps, c2, v = [], pre + "0", x
        if nd > 0 and r.random() < 0.5:
            steps.append({"op": "sum", "in": [c2], "args": {"dims": None, "keepdim": False},
                          "out": pre + "1"})
            c2, v = pre + "1", x.sum()
        vd = v.dim()
        keep = r.random() < 0.5
        if vd == 0:
            dims = r.choice([[0], [-1], []])
        else:
            dims = r.choice([[], rdims(r, vd, True)])
        if w in ("max_dim", "min_dim", "cumsum", "softmax", "log_softmax"):
            d = rdim(r, vd) if vd else r.choice([0, -1])
            if w in ("max_dim", "min_dim"):
                y = (torch.max if w == "max_dim" else torch.min)(v, d, keepdim=keep).values
                a2 = {"dim": d, "keepdim": keep}
            else:
                y = getattr(torch, w)(v, d)
                a2 = {"dim": d}
        elif w in ("var", "std"):
            # (no empty dim list: PyTorch's var/std forward reduces every
            # dim for dim=[], its backward divides by the size of no dim,
            # 1 - correction, a gradient that is not its forward's:
            # var(x, dim=[], correction=1) gives -inf/NaN gradients; strata
            # reads [] as None in both)
            if dims == []:
                dims = [0] if vd == 0 else None
            cr = r.choice([2.0, 0.5, 3.0, 0.0, 1.0])
            y = getattr(torch, w)(v, dim=dims, correction=cr, keepdim=keep)
            a2 = {"dims": dims, "keepdim": keep, "correction": cr}
        elif w == "norm":
            pv = r.choice([2.0, 1.0, INF, 0.0, 3.0])
            y = torch.linalg.vector_norm(v, ord=pv, dim=dims, keepdim=keep)
            a2 = {"p": enc(pv), "dims": dims, "keepdim": keep}
        elif w == "logsumexp":
            # (PyTorch's logsumexp takes no dim=None: every dim, listed;
            # no random draw, so the programs that did not fail are as
            # before)
            if dims is None:
                dims = list(range(vd))
            y = torch.logsumexp(v, dims, keepdim=keep)
            a2 = {"dims": dims, "keepdim": keep}
        elif w in ("amax", "amin"):
            y = getattr(torch, w)(v, dims, keepdim=keep)
            a2 = {"dims": dims, "keepdim": keep}
        else:
            y = getattr(torch, w)(v, dim=dims, keepdim=keep)
            a2 = {"dims": dims, "keepdim": keep}
        ex = w in ("sum", "amax", "amin", "max_dim", "min_dim", "cumsum")
        if not steps:
            return w, [cur], a2, y, ex
        steps.append({"op": w, "in": [c2], "args": a2, "out": pre + "2"})
        return "seq", [cur], {"steps": steps, "result": pre + "2"}, y, ex
    if op == "index_i32":
        # index_select and embedding with int32 indices (PyTorch takes
        # them; gather and scatter_add want int64).
        if nd == 0 or 0 in shape:
            raise Skip
        if nd == 2 and r.random() < 0.5:
            rows = shape[0]
            ishape = r.choice([[], [3], [2, 2]])
            idx = torch.tensor([r.randrange(rows) for _ in range(math.prod(ishape))],
                               dtype=torch.int32).reshape(ishape)
            pad = r.choice([None, 0, -1])
            c, _ = p.const(idx)
            return "embedding", [cur, c], {"padding_idx": pad}, \
                F.embedding(idx, x, padding_idx=pad), True
        d = rdim(r, nd)
        idx = torch.tensor([r.randrange(shape[d]) for _ in range(r.randint(1, 5))],
                           dtype=torch.int32)
        c, _ = p.const(idx)
        return "index_select", [cur, c], {"dim": d}, torch.index_select(x, d, idx), True
    if op == "empty":
        # A random op (any family but this one's) on an empty narrow of
        # the current value (reductions to their identities, NaN means,
        # -inf logsumexp, empty gradients).
        if nd == 0:
            raise Skip
        d = rdim(r, nd)
        st = r.randint(0, shape[d])
        vs = [{"op": "narrow", "dim": d, "start": st, "length": 0}]
        v = x.narrow(d, st, 0)
        steps = [{"op": "view_chain", "in": [pre + "0"], "args": {"steps": vs},
                  "out": pre + "1"}]
        saved = p.s44
        p.s44 = False
        try:
            op2, ins2, args2, y, ex = step(p, pre + "1", v)
        finally:
            p.s44 = saved
        steps.append({"op": op2, "in": ins2, "args": args2, "out": pre + "2"})
        return "seq", [cur], {"steps": steps, "result": pre + "2"}, y, ex
    if op == "reuse":
        # The current value with an earlier one (a leaf, a step output): a
        # value reached by two paths, its gradients added up.
        cands = earlier(p, cur, x)
        if not cands:
            raise Skip
        n, t = r.choice(cands)
        ops = ["add", "sub", "mul", "mul", "div", "where"]
        if p.exact:
            # (ties of computed values only while the program is exact)
            ops += ["maximum", "minimum"]
        o = r.choice(ops)
        ins, y = combine(p, o, cur, x, n, t, list(torch.broadcast_shapes(t.shape, x.shape)))
        return o, ins, {}, y, o in EXACT
    if op == "self_multi":
        # The current value several times in one op or a short sub-program.
        w = r.choice(["cat", "stack", "where", "gram", "poly", "pow_self"])
        if w in ("cat", "stack"):
            if nd == 0 and w == "cat":
                raise Skip
            d = rdim(r, nd) if w == "cat" else r.randint(-nd - 1, nd)
            y = torch.cat([x, x], d) if w == "cat" else torch.stack([x, x], d)
            return w, [cur, cur], {"dim": d}, y, True
        if w == "where":
            m = torch.tensor([r.random() < 0.5 for _ in range(x.numel())],
                             dtype=torch.bool).reshape(shape)
            c, _ = p.const(m)
            return "where", [c, cur, cur], {}, torch.where(m, x, x), True
        if w == "pow_self":
            return "pow", [cur, cur], {}, torch.pow(x, x), False
        i0 = pre + "0"
        if w == "gram":
            if nd == 0:
                raise Skip
            if nd == 1:
                steps = [{"op": "matmul", "in": [i0, i0], "args": {}, "out": pre + "1"}]
                return "seq", [cur], {"steps": steps, "result": pre + "1"}, \
                    torch.matmul(x, x), True
            steps = [{"op": "transpose", "in": [i0], "args": {"d0": -1, "d1": -2},
                      "out": pre + "1"},
                     {"op": "matmul", "in": [i0, pre + "1"], "args": {}, "out": pre + "2"}]
            y = torch.matmul(x, x.transpose(-1, -2))
            if (y == 0).any():
                raise Skip  # (the sign of a zero of a product: see `draw`)
            return "seq", [cur], {"steps": steps, "result": pre + "2"}, y, True
        # x * x * x - x
        steps = [{"op": "mul", "in": [i0, i0], "args": {}, "out": pre + "1"},
                 {"op": "mul", "in": [pre + "1", i0], "args": {}, "out": pre + "2"},
                 {"op": "sub", "in": [pre + "2", i0], "args": {}, "out": pre + "3"}]
        return "seq", [cur], {"steps": steps, "result": pre + "3"}, x * x * x - x, True
    if op == "noncontig":
        # A random op (any family but this one's) on a non-contiguous view
        # of the current value: transposed, permuted, expanded, narrowed.
        vs, v = view_chain(r, x, 1, 2, expand=True)
        if v.is_contiguous() and v.dim() >= 2:
            vs.append({"op": "transpose", "d0": -1, "d1": -2})
            v = v.transpose(-1, -2)
        if v.numel() > 200:
            raise Skip
        steps = [{"op": "view_chain", "in": [pre + "0"], "args": {"steps": vs},
                  "out": pre + "1"}]
        saved = p.s44
        p.s44 = False
        try:
            op2, ins2, args2, y, ex = step(p, pre + "1", v)
        finally:
            p.s44 = saved
        if zero_sign(op2, args2) and (y == 0).any():
            raise Skip
        steps.append({"op": op2, "in": ins2, "args": args2, "out": pre + "2"})
        return "seq", [cur], {"steps": steps, "result": pre + "2"}, y, ex
    if op == "lowp":
        # 1-2 random steps in f64, bf16 or f16 (new leaves and constants of
        # that dtype; the current value cast to it first, or not: then the
        # steps mix dtypes and promote), cast back to the program's dtype.
        # Each result's dtype is recorded in `dtypes` (as autocast's).
        dn = r.choice(["bf16", "f16", "f64"])
        tdt = DTYPES[dn]
        steps, c2, v = [], pre + "0", x
        if r.random() < 0.7:
            steps.append({"op": "to_dtype", "in": [c2], "args": {"dtype": dn}, "out": pre + "1"})
            c2, v = pre + "1", x.to(tdt)
            if not p.replay:
                p.dtypes[c2] = dn
        saved = (p.s44, p.s43b, p.dtype)
        p.s44, p.s43b, p.dtype = False, False, tdt
        try:
            exact = True
            for _ in range(r.randint(1, 2)):
                op2, ins2, args2, y, ex = step(p, c2, v)
                exact = exact and ex
                if op2 in ("cast", "softmax_cast"):
                    # (these cast back to the program's dtype: this one's)
                    args2["to"] = dn
                out = f"{pre}{len(steps) + 1}"
                steps.append({"op": op2, "in": ins2, "args": args2, "out": out})
                if zero_sign(op2, args2) and (y == 0).any():
                    raise Skip
                if y.numel() > 200:
                    raise Skip
                p.dtypes[out] = dname(y.dtype)
                c2, v = out, y
        finally:
            p.s44, p.s43b, p.dtype = saved
        out = f"{pre}{len(steps) + 1}"
        steps.append({"op": "to_main", "in": [c2], "args": {}, "out": out})
        return "seq", [cur], {"steps": steps, "result": out}, v.to(p.dtype), exact
    if op == "mixed_operand":
        # An operand of another dtype: an integer or bool constant (PyTorch
        # promotes to the float), a 0-d f64 constant or leaf (a 0-d tensor
        # does not raise a dimensioned f32 tensor's dtype: the result is
        # f32, the leaf's gradient f64), a bf16/f16 leaf (f32 wins).
        w = r.choice(["i64", "i64", "bool", "f64_0d", "f64_0d_leaf", "low_leaf"])
        o = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "pow", "where"])
        if w in ("f64_0d", "f64_0d_leaf") and nd == 0:
            raise Skip
        if w == "i64":
            s_ = bshape(r, shape)
            t = torch.tensor([r.choice([-2, -1, 0, 1, 2, 3]) for _ in range(math.prod(s_))],
                             dtype=torch.int64).reshape(s_)
            n, _ = p.const(t)
        elif w == "bool":
            s_ = bshape(r, shape)
            t = torch.tensor([r.random() < 0.5 for _ in range(math.prod(s_))],
                             dtype=torch.bool).reshape(s_)
            n, _ = p.const(t)
        elif w == "f64_0d":
            t = torch.tensor(r.choice([2.0, -0.5, 0.0, 1.5, 0.1]), dtype=torch.float64)
            n, _ = p.const(t)
        elif w == "f64_0d_leaf":
            n, t = p.leaf([], p.values([]).to(torch.float64))
        else:
            n, t = p.leaf(bshape(r, shape), p.values(bshape(r, shape)).to(
                r.choice([torch.bfloat16, torch.float16])))
        ins, y = combine(p, o, cur, x, n, t, shape)
        if o != "where" and y.dtype != x.dtype:
            raise Skip  # (a result of another dtype: `lowp`'s)
        return o, ins, {}, y, False
    if op == "split_both":
        # Two pieces of one split/chunk (the same piece twice now and then)
        # combined: the input's gradient gathers from both.
        if nd == 0:
            raise Skip
        d = rdim(r, nd)
        if r.random() < 0.5:
            sz = r.randint(1, 3)
            parts = torch.split(x, sz, d)
            a0 = {"size": sz, "dim": d}
            sop = "split"
        else:
            ch = r.randint(1, 3)
            parts = torch.chunk(x, ch, d)
            a0 = {"chunks": ch, "dim": d}
            sop = "chunk"
        k1 = r.randrange(len(parts))
        same = [k for k in range(len(parts)) if parts[k].shape == parts[k1].shape]
        k2 = r.choice(same)
        comb = r.choice(["add", "mul", "sub", "maximum", "minimum", "cat"])
        i0 = pre + "0"
        steps = [{"op": sop, "in": [i0], "args": {**a0, "piece": k1}, "out": pre + "1"},
                 {"op": sop, "in": [i0], "args": {**a0, "piece": k2}, "out": pre + "2"}]
        # The program records two split/chunk steps, so the second piece comes
        # from a second call: one call's piece taken twice would gather both
        # gradients in one node before they reach x, an order of additions
        # the recorded program does not have (seed 7357, program 2022).
        again = torch.split(x, sz, d) if sop == "split" else torch.chunk(x, ch, d)
        a_, b_ = parts[k1], again[k2]
        if comb == "cat":
            cd = rdim(r, nd)
            steps.append({"op": "cat", "in": [pre + "1", pre + "2"], "args": {"dim": cd},
                          "out": pre + "3"})
            y = torch.cat([a_, b_], cd)
        else:
            steps.append({"op": comb, "in": [pre + "1", pre + "2"], "args": {}, "out": pre + "3"})
            y = a_ - b_ if comb == "sub" else getattr(torch, comb)(a_, b_)
        return "seq", [cur], {"steps": steps, "result": pre + "3"}, y, True
    if op == "leaf_nograd":
        # y = f(x, w) for a new leaf w, then w modified in place under
        # no_grad (as an optimizer step does): PyTorch's backward fails
        # where f saved w (mul, div, pow, maximum ...), and not where it
        # saved nothing of it (add, sub); strata must agree on which.
        fn = r.choice(["add", "sub", "mul", "div", "pow", "maximum", "minimum", "rdiv"])
        which = r.choice(["mul_", "add_", "zero_"])
        w, wt = p.leaf(bshape(r, shape))
        if fn == "rdiv":
            y = wt / x
        elif fn == "sub":
            y = x - wt
        else:
            y = getattr(torch, fn)(x, wt)
        c = r.choice([2.0, -0.5, 0.0])
        p.initial[w] = wt.detach().clone()
        with torch.no_grad():
            if which == "zero_":
                wt.zero_()
            else:
                getattr(wt, which)(c)
        return "leaf_nograd", [cur, w], {"fn": fn, "op": which, "c": c}, y, False
    # inplace_after: y = x + 0; z = f(y) (a unary op, or a binary one with
    # a new leaf w); an in-place op on y, or on y.detach() or z.detach()
    # (which share y's and z's storage and version counter); then z and y
    # combined. Where f saved the modified tensor for backward (PyTorch's
    # choice of what each op saves), PyTorch's backward fails ("modified
    # by an inplace operation"): recorded as `expect_error` (see `build`),
    # strata must fail alike (SavedTensorModified), and must not where f
    # saved something else.
    fn = r.choice(S44_UNARY + ["mul_leaf", "div_leaf", "pow_leaf", "maximum_leaf",
                               "rdiv_leaf", "mul_self"])
    target = r.choice(["y", "y", "y", "y_detach", "z_detach"])
    which = r.choice(["add_", "sub_", "mul_", "div_", "zero_", "mul_scalar_", "add_scalar_"]
                     if target == "y" else ["zero_", "mul_scalar_", "add_scalar_"])
    y = x + 0.0
    ins = [cur]
    args = {"fn": fn, "op": which, "target": target}
    if fn.endswith("_leaf"):
        w, wt = p.leaf(bshape(r, shape))
        args["w"] = len(ins)
        ins.append(w)
        if fn == "rdiv_leaf":
            z = wt / y
        else:
            z = getattr(torch, fn[:-5])(y, wt)
    elif fn == "mul_self":
        z = y * y
    else:
        z = unary_torch(fn, y)
    t = y if target == "y" else y.detach() if target == "y_detach" else z.detach()
    if which == "zero_":
        t.zero_()
    elif which.endswith("_scalar_"):
        c = r.choice([2.0, -0.5, 0.0])
        args["c"] = c
        (t.mul_ if which == "mul_scalar_" else t.add_)(c)
    else:
        other, o = p.leaf(bshape(r, shape))
        args["operand"] = len(ins)
        ins.append(other)
        getattr(t, which)(o)
    comb = r.choice(["add", "mul", "cat", "stack"])
    if comb == "cat" and nd == 0:
        comb = "stack"
    args["combine"] = comb
    d = 0
    if comb in ("cat", "stack"):
        d = rdim(r, nd) if comb == "cat" else r.randint(-nd - 1, nd)
        args["dim"] = d
    if comb == "add":
        out = z + y
    elif comb == "mul":
        out = z * y
    elif comb == "cat":
        out = torch.cat([z, y], d)
    else:
        out = torch.stack([z, y], d)
    return "inplace_after", ins, args, out, False


# The first seed whose graph and API programs also draw session 55's
# families (`s55_step`); `main` sets S55 for it.
S55_SEED = 331
S55 = False

S55_REDUCE = ["sum", "mean", "amax", "amin", "std", "var", "logsumexp", "norm"]


def reduce_step(r, red, nd, dims, keep):
    """A reduction step's args as `step` writes them (and the torch
    function computing it)."""
    if red == "logsumexp":
        ds = dims if dims is not None else list(range(nd))
        return {"dims": ds, "keepdim": keep}, lambda t: torch.logsumexp(t, ds, keepdim=keep)
    if red in ("amax", "amin"):
        return {"dims": dims, "keepdim": keep}, \
            lambda t: getattr(torch, red)(t, dims if dims is not None else (), keepdim=keep)
    if red == "norm":
        pv = r.choice([2.0, 1.0, INF])
        return {"p": enc(pv), "dims": dims, "keepdim": keep}, \
            lambda t: torch.linalg.vector_norm(t, ord=pv, dim=dims, keepdim=keep)
    if red in ("std", "var"):
        c = r.choice([0.0, 1.0])
        return {"dims": dims, "keepdim": keep, "correction": c}, \
            lambda t: getattr(torch, red)(t, dim=dims, keepdim=keep, correction=c)
    return {"dims": dims, "keepdim": keep}, \
        lambda t: getattr(torch, red)(t, dim=dims, keepdim=keep)


def s55_step(p, cur, x):
    """Session 55's families (drawn for seeds >= S55_SEED in graph and API
    programs), compositions users write:
    - keepdim_bcast: a reduction over one or several (negative, unsorted)
      dims with keepdim, broadcast back against its input
      (`x - x.mean(dims, keepdim=True)`, `x / x.norm(...)`, ...);
    - two_views: two views of the current value combined by a broadcasting
      binary op (overlapping narrows, x with its transpose, x.unsqueeze(0)
      with x.unsqueeze(1), x with a narrow of size 1 of itself);
    - mini_model: the current value [V, D] as a tied embedding table:
      embedding, (+ a broadcast positional leaf), layer_norm, linear with
      the table itself (the leaf used twice), then cross_entropy or
      log_softmax;
    - inplace_view_mixed: s43's in-place ops on views of a non-leaf whose
      operands are leaves of another dtype (f64, bf16, f16);
    - autocast_ckpt: a CPU bf16 autocast region around a non-reentrant
      checkpoint of random steps (the recomputation in backward runs
      outside the region: the checkpoint must restore autocast)."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    pre = f"r{len(p.steps)}."
    i0 = pre + "0"
    op = r.choice(["keepdim_bcast"] * 4 + ["two_views"] * 4 + ["mini_model"] * 4 +
                  ["inplace_view_mixed"] * 3 + ["autocast_ckpt"] * 3)
    if op == "keepdim_bcast":
        if nd == 0:
            raise Skip
        red = r.choice(S55_REDUCE)
        dims = rdims(r, nd, True)
        a1, fn = reduce_step(r, red, nd, dims, True)
        y1 = fn(x)
        b = r.choice(["sub", "div", "mul", "add"])
        swap = r.random() < 0.3
        ins = [pre + "1", i0] if swap else [i0, pre + "1"]
        a_, b_ = (y1, x) if swap else (x, y1)
        y = a_ - b_ if b == "sub" else getattr(torch, b)(a_, b_)
        steps = [{"op": red, "in": [i0], "args": a1, "out": pre + "1"},
                 {"op": b, "in": ins, "args": {}, "out": pre + "2"}]
        ex = red in ("sum", "amax", "amin") and b != "div"
        return "seq", [cur], {"steps": steps, "result": pre + "2"}, y, ex
    if op == "two_views":
        if nd == 0:
            raise Skip
        w = r.choice(["narrows", "narrows", "transpose", "outer", "slice1"])
        if w == "transpose":
            if nd < 2 or shape[-1] != shape[-2]:
                raise Skip
            v1, v2 = [{"op": "to_same"}], [{"op": "transpose", "d0": -1, "d1": -2}]
        elif w == "outer":
            if nd != 1:
                raise Skip
            v1, v2 = [{"op": "unsqueeze", "dim": 0}], [{"op": "unsqueeze", "dim": 1}]
        elif w == "slice1":
            d = rdim(r, nd)
            if shape[d] == 0:
                raise Skip
            v1 = [{"op": "to_same"}]
            v2 = [{"op": "narrow", "dim": d, "start": r.randrange(shape[d]), "length": 1}]
        else:
            d = rdim(r, nd)
            n = shape[d]
            if n < 2:
                raise Skip
            ln = r.randint(1, n - 1)
            v1 = [{"op": "narrow", "dim": d, "start": r.randint(0, n - ln), "length": ln}]
            v2 = [{"op": "narrow", "dim": d, "start": r.randint(0, n - ln), "length": ln}]
        t1, t2 = x, x
        for v in v1:
            t1 = apply_view(t1, v)
        for v in v2:
            t2 = apply_view(t2, v)
        ops = ["add", "sub", "mul", "mul", "div"] + (["maximum", "minimum"] if p.exact else [])
        b = r.choice(ops)
        y = t1 - t2 if b == "sub" else getattr(torch, b)(t1, t2)
        if y.numel() > 200:
            raise Skip
        steps = [{"op": "view_chain", "in": [i0], "args": {"steps": v1}, "out": pre + "1"},
                 {"op": "view_chain", "in": [i0], "args": {"steps": v2}, "out": pre + "2"},
                 {"op": b, "in": [pre + "1", pre + "2"], "args": {}, "out": pre + "3"}]
        return "seq", [cur], {"steps": steps, "result": pre + "3"}, y, b in EXACT
    if op == "mini_model":
        if nd != 2 or shape[0] < 2 or shape[1] < 3:
            raise Skip
        V, D = shape
        ishape = r.choice([[r.randint(1, 5)], [r.randint(1, 2), r.randint(1, 3)]])
        idx = torch.tensor([r.randrange(V) for _ in range(math.prod(ishape))],
                           dtype=torch.int64).reshape(ishape)
        pad = r.choice([None, None, 0, -1])
        c, _ = p.const(idx)
        steps = [{"op": "embedding", "in": [i0, c], "args": {"padding_idx": pad},
                  "out": pre + "1"}]
        h = F.embedding(idx, x, padding_idx=pad)
        last = pre + "1"
        if r.random() < 0.4:
            pn, pt = p.leaf(r.choice([[D], list(ishape[-1:]) + [D]]))
            h = h + pt
            steps.append({"op": "add", "in": [last, pn], "args": {}, "out": pre + "2"})
            last = pre + "2"
        rows_ = h.detach().reshape(-1, D)
        eps = r.choice([1e-5, 1e-3, 0.1])
        if (rows_.var(1, correction=0) < 0.01).any():
            raise Skip  # (layer_norm's precision: see `step`)
        ins = [last]
        largs = {"normalized_shape": [D], "eps": eps, "weight": False, "bias": False}
        wt = bt = None
        if r.random() < 0.5:
            wn, wt = p.leaf([D])
            ins.append(wn)
            largs["weight"] = True
        if r.random() < 0.5:
            bn, bt = p.leaf([D])
            ins.append(bn)
            largs["bias"] = True
        h = F.layer_norm(h, [D], wt, bt, eps)
        steps.append({"op": "layer_norm", "in": ins, "args": largs, "out": pre + "3"})
        logits = F.linear(h, x)
        steps.append({"op": "linear", "in": [pre + "3", i0], "args": {}, "out": pre + "4"})
        if (logits == 0).any():
            raise Skip  # (the sign of a zero of a product: see `draw`)
        if r.random() < 0.3:
            y = torch.log_softmax(logits, -1)
            steps.append({"op": "log_softmax", "in": [pre + "4"], "args": {"dim": -1},
                          "out": pre + "5"})
            return "seq", [cur], {"steps": steps, "result": pre + "5"}, y, False
        vs = [{"op": "reshape", "shape": [-1, V]}]
        steps.append({"op": "view_chain", "in": [pre + "4"], "args": {"steps": vs},
                      "out": pre + "5"})
        lg = logits.reshape(-1, V)
        n = lg.shape[0]
        ign = r.choice([-100, 0])
        tv = torch.tensor([r.randrange(V) for _ in range(n)], dtype=torch.int64)
        tc, _ = p.const(tv)
        red = r.choice(["mean", "sum", "none"])
        ls = r.choice([0.0, 0.0, 0.1])
        steps.append({"op": "cross_entropy", "in": [pre + "5", tc],
                      "args": {"reduction": red, "ignore_index": ign, "weight": False,
                               "label_smoothing": ls}, "out": pre + "6"})
        y = F.cross_entropy(lg, tv, ignore_index=ign, reduction=red, label_smoothing=ls)
        return "seq", [cur], {"steps": steps, "result": pre + "6"}, y, False
    if op == "inplace_view_mixed":
        p.leaf_dtype = r.choice([torch.float64, torch.bfloat16, torch.float16])
        try:
            return s43_step(p, cur, x, force="inplace_view")
        finally:
            p.leaf_dtype = None
    # autocast_ckpt
    P = f"a{len(p.steps)}."
    with torch.autocast("cpu", dtype=torch.bfloat16):
        op2, ins2, args2, y, _ = s43b_step(p, P + "0", x, force="ckpt_steps")
    if not p.replay:
        p.dtypes[P + "1"] = dname(y.dtype)
    steps = [{"op": op2, "in": ins2, "args": args2, "out": P + "1"}]
    return "autocast_steps", [cur], {"steps": steps, "result": P + "1"}, y.to(p.dtype), False


# The first seed whose graph and API programs also draw session 58's
# families (`s58_step`); `main` sets S58 for it.
S58_SEED = 400
S58 = False


def s58_step(p, cur, x):
    """Session 58's families (drawn for seeds >= S58_SEED in graph and API
    programs), the edges of the losses and normalisations that the other
    families reach rarely:
    - loss_weights: cross_entropy / nll_loss over [C], [N, C] or [N, C, d]
      with class weights that are negative, all zero or of mixed sign,
      targets that are all ignore_index (or ignore_index a class), label
      smoothing 0, 0.3 or 1, every reduction (mean over a zero or negative
      total weight included);
    - inf_rows: whole rows (or single elements) set to -inf by masked_fill
      before softmax, log_softmax or logsumexp along a dim;
    - mse_weights: mse_loss with a weight of mixed sign or all zeros."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    pre = f"q{len(p.steps)}."
    i0 = pre + "0"
    op = r.choice(["loss_weights"] * 5 + ["inf_rows"] * 4 + ["mse_weights"] * 2)
    red = r.choice(["mean", "mean", "sum", "none"])
    if op == "loss_weights":
        if nd not in (1, 2, 3) or 0 in shape:
            raise Skip
        C = shape[0] if nd == 1 else shape[1]
        tshape = [] if nd == 1 else [shape[0]] + shape[2:]
        n = math.prod(tshape)
        ign = r.choice([-100, 0, 1, C - 1])
        k = r.random()
        if k < 0.3:
            tv = [ign] * n
        else:
            tv = [ign if r.random() < 0.4 else r.randrange(C) for _ in range(n)]
        if any(not (0 <= t < C) and t != ign for t in tv):
            raise Skip
        tt = torch.tensor(tv, dtype=torch.int64).reshape(tshape)
        c, _ = p.const(tt)
        ins = [cur, c]
        wk = r.random()
        if wk < 0.3:
            wv = [0.0] * C
        elif wk < 0.8:
            wv = [r.choice([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0]) for _ in range(C)]
        else:
            wv = None
        wt = None
        if wv is not None:
            wt = torch.tensor(wv, dtype=torch.float32).to(p.dtype)
            cw, _ = p.const(wt)
            ins.append(cw)
        which = r.choice(["cross_entropy", "cross_entropy", "nll_loss"])
        args = {"reduction": red, "ignore_index": ign, "weight": wt is not None}
        if which == "nll_loss":
            y = F.nll_loss(x, tt, weight=wt, ignore_index=ign, reduction=red)
        else:
            ls = r.choice([0.0, 0.3, 1.0])
            args["label_smoothing"] = ls
            y = F.cross_entropy(x, tt, weight=wt, ignore_index=ign, reduction=red,
                                label_smoothing=ls)
        return which, ins, args, y, False
    if op == "inf_rows":
        if nd == 0 or 0 in shape:
            raise Skip
        d = r.randrange(nd)
        m = torch.zeros(shape, dtype=torch.bool)
        if r.random() < 0.6:
            # whole rows along d: a -inf row of softmax/logsumexp
            sel = [slice(None)] * nd
            other = [i for i in range(nd) if i != d]
            if other:
                o = r.choice(other)
                sel[o] = r.randrange(shape[o])
            m[tuple(sel)] = True
        else:
            m.view(-1)[r.randrange(m.numel())] = True
        c, _ = p.const(m)
        xm = x.masked_fill(m, -INF)
        steps = [{"op": "masked_fill", "in": [i0, c], "args": {"value": "-inf"},
                  "out": pre + "1"}]
        f = r.choice(["softmax", "log_softmax", "logsumexp"])
        if f == "logsumexp":
            keep = r.random() < 0.5
            steps.append({"op": f, "in": [pre + "1"], "args": {"dims": [d], "keepdim": keep},
                          "out": pre + "2"})
            y = torch.logsumexp(xm, [d], keepdim=keep)
        else:
            steps.append({"op": f, "in": [pre + "1"], "args": {"dim": d}, "out": pre + "2"})
            y = getattr(torch, f)(xm, d)
        return "seq", [cur], {"steps": steps, "result": pre + "2"}, y, False
    # mse_weights
    tg, t = p.leaf(shape)
    if r.random() < 0.3:
        wv = torch.zeros(shape)
    else:
        wv = torch.tensor([r.choice([-1.0, 0.0, 0.5, 1.0, 2.0]) for _ in range(x.numel())],
                          dtype=torch.float32).reshape(shape)
    wv = wv.to(p.dtype)
    c, _ = p.const(wv)
    y = F.mse_loss(x, t, reduction=red, weight=wv)
    return "mse_loss", [cur, tg, c], {"reduction": red, "weight": True}, y, red != "mean"


S59_SEED = 500
S59 = False


def bcast_to(r, shape):
    """A shape that broadcasts with `shape` to `shape` or beyond: size-1
    dims, dims dropped in front, a new leading dim, 0-d."""
    s = [1 if r.random() < 0.5 else d for d in shape]
    k = r.random()
    if k < 0.3 and s:
        s = s[r.randint(1, len(s)):]
    elif k < 0.4 and len(s) < 4:
        s = [r.choice([1, 2])] + s
    return s


def s59_step(p, cur, x):
    """Session 59's families (drawn for seeds >= S59_SEED in graph and API
    programs):
    - bcast: add/sub/mul/div/maximum/minimum/pow/where/addmm whose other
      operand is a new leaf that broadcasts against the current value (or
      that the current value broadcasts against): the gradients are summed
      back to each operand's shape, over size-1 dims, new leading dims and
      0-d leaves;
    - ties: the current value expanded (every element repeated) or joined to
      itself, then amax/amin/max_all/min_all/norm/max_dim/logsumexp/
      softmax/var of the repeats: gradients split among or routed to tied
      copies and summed back;
    - matmul_b: matmul whose batch dims broadcast on both sides ([b, n, k]
      against [B, 1, k, m] ...) with the current value on either side;
    - dup_index: index_select/gather/scatter_add/embedding whose indices
      repeat one position (gradients accumulated into it), a padding_idx
      among the repeats;
    - reuse3: the current value in three roles: a keepdim reduction of it
      broadcast back against it, then combined with it once more."""
    r = p.rng
    nd = x.dim()
    shape = list(x.shape)
    pre = f"q{len(p.steps)}."
    i0 = pre + "0"
    fam = r.choice(["bcast"] * 5 + ["ties"] * 4 + ["matmul_b"] * 3 + ["dup_index"] * 3 +
                   ["reuse3"] * 3)
    if fam == "bcast":
        f = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "pow", "where",
                      "addmm"])
        if f == "addmm":
            if nd > 2:
                raise Skip
            dims = [1] * (2 - nd) + shape
            n = dims[0] if dims[0] != 1 else r.choice([1, 2, 3])
            m = dims[1] if dims[1] != 1 else r.choice([1, 2, 3])
            k = r.randint(1, 3)
            m1, a = p.leaf([n, k])
            m2, b = p.leaf([k, m])
            y = torch.addmm(x, a, b)
            if (y == 0).any():
                raise Skip  # (the sign of a zero of a product: see `draw`)
            return "addmm", [cur, m1, m2], {}, y, True
        other, o = p.leaf(bcast_to(r, shape))
        if f == "where":
            msh = bcast_to(r, list(torch.broadcast_shapes(x.shape, o.shape)))
            m = torch.tensor([r.random() < 0.5 for _ in range(math.prod(msh))],
                             dtype=torch.bool).reshape(msh)
            c, _ = p.const(m)
            if r.random() < 0.5:
                return "where", [c, cur, other], {}, torch.where(m, x, o), True
            return "where", [c, other, cur], {}, torch.where(m, o, x), True
        ins, (a, b) = [cur, other], (x, o)
        if r.random() < 0.5:
            ins, (a, b) = [other, cur], (o, x)
        y = a - b if f == "sub" else getattr(torch, f)(a, b)
        return f, ins, {}, y, f in EXACT
    if fam == "ties":
        if nd == 0 or x.numel() == 0 or x.numel() > 24:
            raise Skip
        if r.random() < 0.6:
            ns = [r.choice([2, 3])] + [s_ if s_ != 1 else r.choice([1, 3]) for s_ in shape]
            steps = [{"op": "expand", "in": [i0], "args": {"shape": ns}, "out": pre + "1"}]
            v = x.expand(ns)
        else:
            d = rdim(r, nd)
            steps = [{"op": "cat", "in": [i0, i0], "args": {"dim": d}, "out": pre + "1"}]
            v = torch.cat([x, x], d)
        vn = v.dim()
        g = r.choice(["amax", "amin", "max_all", "min_all", "norm", "max_dim", "min_dim",
                      "logsumexp", "softmax", "var", "sum"])
        keep = r.random() < 0.4
        if g in ("amax", "amin"):
            dims = rdims(r, vn, True)
            args = {"dims": dims, "keepdim": keep}
            y = getattr(torch, g)(v, dims if dims is not None else (), keepdim=keep)
        elif g in ("max_all", "min_all"):
            args = {}
            y = torch.max(v) if g == "max_all" else torch.min(v)
        elif g == "norm":
            pv = r.choice([INF, -INF, 2.0, 1.0, 3.0])
            dims = rdims(r, vn, True)
            args = {"p": enc(pv), "dims": dims, "keepdim": keep}
            y = torch.linalg.vector_norm(v, ord=pv, dim=dims, keepdim=keep)
        elif g in ("max_dim", "min_dim"):
            d = rdim(r, vn)
            args = {"dim": d, "keepdim": keep}
            y = (torch.max if g == "max_dim" else torch.min)(v, d, keepdim=keep).values
        elif g == "logsumexp":
            dims = rdims(r, vn, True) or list(range(vn))
            args = {"dims": dims, "keepdim": keep}
            y = torch.logsumexp(v, dims, keepdim=keep)
        elif g == "softmax":
            d = rdim(r, vn)
            args = {"dim": d}
            y = torch.softmax(v, d)
        elif g == "var":
            dims = rdims(r, vn, True)
            cr = r.choice([0.0, 1.0])
            args = {"dims": dims, "keepdim": keep, "correction": cr}
            y = torch.var(v, dim=dims, keepdim=keep, correction=cr)
        else:
            dims = rdims(r, vn, True)
            args = {"dims": dims, "keepdim": keep}
            y = torch.sum(v, dim=dims, keepdim=keep)
        steps.append({"op": g, "in": [pre + "1"], "args": args, "out": pre + "2"})
        ex = g in ("sum", "max_dim", "min_dim") or (g == "norm" and args["p"] == 1.0)
        return "seq", [cur], {"steps": steps, "result": pre + "2"}, y, ex
    if fam == "matmul_b":
        if nd == 0 or x.numel() == 0:
            raise Skip
        m = r.randint(1, 3)
        batch = shape[:-2] if nd >= 2 else []
        lb = []
        for i in range(r.randint(0, 3)):
            # right-aligned against the current value's batch dims
            j = len(batch) - 1 - i
            if j >= 0:
                lb.insert(0, 1 if batch[j] != 1 and r.random() < 0.5 else
                          (batch[j] if batch[j] != 1 else r.choice([1, 2])))
            else:
                lb.insert(0, r.choice([1, 2]))
        if nd == 1 or r.random() < 0.5:
            k = shape[-1]
            other, o = p.leaf(lb + [k, m])
            ins, y = [cur, other], torch.matmul(x, o)
        else:
            k = shape[-2]
            other, o = p.leaf(lb + [m, k])
            ins, y = [other, cur], torch.matmul(o, x)
        if y.numel() > 200 or (y == 0).any():
            raise Skip  # (the sign of a zero of a product: see `draw`)
        return "matmul", ins, {}, y, True
    if fam == "dup_index":
        if nd == 0 or 0 in shape:
            raise Skip
        d = rdim(r, nd)
        n = shape[d]
        j = r.randrange(n)
        pool = [j] if r.random() < 0.5 else [j, r.randrange(n)]
        g = r.choice(["index_select", "gather", "scatter_add", "embedding"])
        if g == "index_select":
            idx = torch.tensor([r.choice(pool) for _ in range(r.randint(2, 6))])
            if r.random() < 0.3:
                idx = idx.to(torch.int32)
            c, _ = p.const(idx)
            return g, [cur, c], {"dim": d}, torch.index_select(x, d, idx), True
        if g == "gather":
            ish = list(shape)
            ish[d] = r.randint(1, 5)
            idx = torch.tensor([r.choice(pool) for _ in range(math.prod(ish))]).reshape(ish)
            c, _ = p.const(idx)
            return g, [cur, c], {"dim": d}, torch.gather(x, d, idx), True
        if g == "scatter_add":
            ish = [r.randint(1, s_) for s_ in shape]
            idx = torch.tensor([r.choice(pool) for _ in range(math.prod(ish))]).reshape(ish)
            c, _ = p.const(idx)
            src, sv = p.leaf(ish)
            return g, [cur, c, src], {"dim": d}, torch.scatter_add(x, d, idx, sv), True
        if nd != 2:
            raise Skip
        rows = shape[0]
        j = r.randrange(rows)
        idx = torch.tensor([r.choice([j, j, r.randrange(rows)]) for _ in range(r.randint(2, 6))])
        if r.random() < 0.4:
            idx = idx.reshape(1, -1)
        pad = r.choice([None, j, j - rows])
        c, _ = p.const(idx)
        return "embedding", [cur, c], {"padding_idx": pad}, F.embedding(idx, x, padding_idx=pad), \
            True
    # reuse3
    if nd == 0:
        raise Skip
    d = rdim(r, nd)
    g = r.choice(["sum", "amax", "mean", "logsumexp"])
    args = {"dims": [d], "keepdim": True}
    if g == "sum":
        s1 = x.sum([d], keepdim=True)
    elif g == "mean":
        s1 = x.mean([d], keepdim=True)
    elif g == "amax":
        s1 = x.amax([d], keepdim=True)
    else:
        s1 = torch.logsumexp(x, [d], keepdim=True)
    f1 = r.choice(["mul", "sub", "div", "add"])
    f2 = r.choice(["mul", "add", "maximum", "sub"])
    steps = [{"op": g, "in": [i0], "args": args, "out": pre + "1"},
             {"op": f1, "in": [i0, pre + "1"], "args": {}, "out": pre + "2"},
             {"op": f2, "in": [pre + "2", i0], "args": {}, "out": pre + "3"}]
    y1 = x - s1 if f1 == "sub" else getattr(torch, f1)(x, s1)
    y = y1 - x if f2 == "sub" else getattr(torch, f2)(y1, x)
    ex = g == "sum" and f1 in ("mul", "sub", "add") and f2 != "maximum"
    return "seq", [cur], {"steps": steps, "result": pre + "3"}, y, ex


def draw(rng, dtype=torch.float32, more=False, s43=False, s43b=False, given=None, s44=False):
    """A random program: its steps and upstream gradient, run forward.
    Returns (Prog, output name, output, upstream or None)."""
    p = Prog(rng, dtype, more, s43, s43b, given, s44)
    cur, x = p.leaf(rshape(rng, 0 if rng.random() < 0.1 else 1, 3))
    nsteps = rng.randint(1, 4)
    for i in range(nsteps):
        op, ins, args, y, exact = step(p, cur, x)
        p.exact = p.exact and exact
        out = f"s{i}"
        p.steps.append({"op": op, "in": ins, "args": args, "out": out})
        # Left out: a zero loss of reduction "none", or a zero of a matrix
        # product, fed to a later step. strata-tensor's nll/cross_entropy
        # forward writes -0.0 where PyTorch writes +0.0, its matmul +0.0
        # where PyTorch's keeps the -0.0 of a single product (-0.0 == 0.0 to
        # the comparison, but a later 1/x turns it into -inf vs inf; the
        # format does not fix which zero); reported, not fixable here.
        if zero_sign(op, args) and i + 1 < nsteps and (y == 0).any():
            raise Skip
        cur, x = out, y
        p.env[out] = y
        if y.numel() > 200:
            raise Skip
    if not x.requires_grad:
        raise Skip
    if rng.random() < 0.25:
        up = None
    else:
        up = p.values(list(x.shape), pool_only=rng.random() < 0.7)
        if rng.random() < 0.15 and up.numel():
            # A NaN or infinite upstream element: where PyTorch masks the
            # gradient (relu, maximum, masked_fill, pow at y == 0 ...) it
            # stays 0, where it multiplies it becomes NaN.
            flat = up.reshape(-1).clone()
            flat[rng.randrange(flat.numel())] = rng.choice([float("nan"), INF, -INF])
            up = flat.reshape(up.shape)
    return p, cur, x, up


def grads_json(p, names):
    return {n: None if p.inputs[n].grad is None else tjson(p.inputs[n].grad) for n in names}


def build(rng, pid, dtype=torch.float32, more=False, s43=False, s43b=False, s44=False):
    """A program (seeds >= S43B_SEED: a graph program, a training program
    or a program of the gradient API) and its recorded answers, with the
    tensors whose f32 error the f64 run estimates (`raw`)."""
    if s43b:
        kind = rng.choice(["graph"] * 4 + ["train"] * 3 + ["api"] * 3)
        if kind == "train":
            return build_train(rng, pid, dtype, more, s43)
        if kind == "api":
            return build_api(rng, pid, dtype, more, s43, s44)
    p, cur, x, up = draw(rng, dtype, more, s43, s43b, s44=s44)
    error = None
    # Seeds >= S44_SEED: now and then a second backward pass from the same
    # output, after a first with retain_graph (the gradients add up) or
    # without it (PyTorch fails where the second pass reaches a node whose
    # saved tensors were freed, and runs through nodes that saved none).
    second = None
    if s44 and rng.random() < 0.25:
        second = "retain" if rng.random() < 0.5 else "released"

    def backward(retain):
        if up is None:
            x.sum().backward(retain_graph=retain)
        elif s44:
            # (A copy: a leaf can take the upstream tensor, or a view of
            # it, as its .grad, which a second pass then adds to in place.)
            x.backward(up.clone(), retain_graph=retain)
        else:
            x.backward(up, retain_graph=retain)

    try:
        backward(second == "retain")
        if S46 and (second == "retain" or (S52 and second is not None)):
            # Leaf gradients sharing storage (see the docstring, S46_SEED;
            # from S52_SEED on before a second pass without retain_graph
            # too, which runs through nodes that saved no tensors).
            ptrs = [t.grad.untyped_storage().data_ptr() for t in p.inputs.values()
                    if t.requires_grad and t.grad is not None and t.grad.numel() > 0]
            if len(set(ptrs)) < len(ptrs):
                raise Skip
    except RuntimeError as e:
        # Seeds >= S44_SEED: a tensor saved for backward that an in-place
        # op modified (`inplace_after`) is a recorded failure; the
        # gradients are not compared (the leaves PyTorch reached before
        # failing depend on its order of execution).
        if not (s44 and "modified by an inplace operation" in str(e)):
            raise
        error = "saved_modified"
    if second is not None and error is None:
        try:
            backward(False)
        except RuntimeError as e:
            if "backward through the graph a second time" not in str(e):
                raise
            error = "graph_released"
    inputs = {}
    for n in p.order:
        t = p.inputs[n]
        j = tjson(p.initial.get(n, t))
        j["grad"] = t.requires_grad
        inputs[n] = j
    grads = {}
    for n in p.order:
        t = p.inputs[n]
        if t.requires_grad and error is None:
            grads[n] = None if t.grad is None else tjson(t.grad)
    raw = {"out": x.detach()}
    raw.update({n: p.inputs[n].grad for n in grads})
    prog = {"id": pid, "exact": p.exact, "inputs": inputs, "steps": p.steps, "out": cur,
            "upstream": None if up is None else tjson(up), "expect_out": tjson(x),
            "expect_grads": grads}
    if p.dtypes:
        prog["dtypes"] = p.dtypes
    if error is not None:
        prog["expect_error"] = error
    if second is not None:
        prog["second_pass"] = second
    return prog, raw


def inputs_json(p, values=None):
    inputs = {}
    for n in p.order:
        t = p.inputs[n] if values is None or n not in values else values[n]
        j = tjson(p.initial.get(n, t))
        j["grad"] = p.inputs[n].requires_grad
        inputs[n] = j
    return inputs


# The first seed whose training programs draw session 45's optimizer
# options (`draw_optimizer`); `main` sets S45 for it.
S45_SEED = 208
S45 = False

# The first seed whose in-place-on-views sub-programs take a contiguous base
# and whose programs with aliased leaf gradients are left out (docstring).
S46_SEED = 220
S46 = False

# The first seed whose training programs with aliased leaf gradients are
# left out (`build_train`), and whose f16/bf16 layer_norms leave out rows
# where PyTorch's CPU kernel's rounded mean matters (`step`).
S49_SEED = 275
S49 = False

# The first seed whose programs with aliased leaf gradients are left out
# before a second backward pass without retain_graph too (seed 295's
# program 1991: `stack` of two 0-d leaves under `sum`, whose gradients are
# views of one element; the released graph's second pass runs through
# `stack` and `sub`, which saved nothing, and adds into it twice).
S52_SEED = 296
S52 = False


def draw_optimizer(cfg, low, scaled):
    """A random optimizer's settings, as the replay reads them (PyTorch's
    optimizers; strata's Adam has no weight decay: not drawn; SGD's
    dampening, nesterov and maximize and Adam's and AdamW's amsgrad and
    maximize only from S45_SEED on). Adam/AdamW: strata's step is PyTorch's
    fused kernel (`fused=True`, the intermediates in f32 for bf16/f16
    parameters); the default for-loop step rounds each intermediate to the
    parameter's dtype, so it is drawn only for f32/f64 parameters (`low`:
    some are bf16/f16). Before S45_SEED, always with a GradScaler
    (`scaled`) unless some are bf16/f16: a GradScaler hands a fused
    optimizer the scale instead of unscaling the gradients, and a step it
    skips then leaves `.grad` scaled (PyTorch's other optimizers have it
    unscaled; see `build_train`); strata's Adam/AdamW made `with_fused`
    take the scale alike since session 45, so from S45_SEED on the fused
    step is drawn under a GradScaler for f32/f64 parameters too."""
    name = cfg.choice(["sgd", "sgd", "adam", "adamw"])
    if name == "sgd":
        c = {"name": name, "lr": cfg.choice([0.1, 0.5, 0.25, 0.01, 1.0]),
             "momentum": cfg.choice([0.0, 0.0, 0.5, 0.9]),
             "weight_decay": cfg.choice([0.0, 0.0, 0.1, 0.5])}
        if S45:
            # PyTorch: nesterov needs a momentum and no dampening.
            if c["momentum"] > 0 and cfg.random() < 0.3:
                c["nesterov"] = True
            elif c["momentum"] > 0 and cfg.random() < 0.3:
                c["dampening"] = cfg.choice([0.1, 0.5, 1.0])
            if cfg.random() < 0.2:
                c["maximize"] = True
        return c
    b1, b2 = cfg.choice([(0.9, 0.999), (0.9, 0.999), (0.5, 0.9), (0.0, 0.5)])
    c = {"name": name, "lr": cfg.choice([1e-3, 0.01, 0.1, 0.5]), "beta1": b1, "beta2": b2,
         "eps": cfg.choice([1e-8, 1e-6, 0.1])}
    if S45:
        # Fused under a GradScaler for f32/f64 parameters too.
        c["fused"] = True if low or cfg.random() < 0.5 else None
    else:
        c["fused"] = True if low else None if scaled else True if cfg.random() < 0.5 else None
    if name == "adamw":
        c["weight_decay"] = cfg.choice([0.0, 0.01, 0.1, 1.0])
    if S45:
        if cfg.random() < 0.3:
            c["amsgrad"] = True
        if cfg.random() < 0.2:
            c["maximize"] = True
    return c


def make_optimizer(c, params):
    """PyTorch's optimizer of settings `c` (`draw_optimizer`) over `params`."""
    if c["name"] == "sgd":
        return torch.optim.SGD(params, lr=c["lr"], momentum=c["momentum"],
                               weight_decay=c["weight_decay"],
                               dampening=c.get("dampening", 0.0),
                               nesterov=c.get("nesterov", False),
                               maximize=c.get("maximize", False))
    betas = (c["beta1"], c["beta2"])
    more = {"amsgrad": c.get("amsgrad", False), "maximize": c.get("maximize", False)}
    if c["name"] == "adam":
        return torch.optim.Adam(params, lr=c["lr"], betas=betas, eps=c["eps"], fused=c["fused"],
                                **more)
    return torch.optim.AdamW(params, lr=c["lr"], betas=betas, eps=c["eps"],
                             weight_decay=c["weight_decay"], fused=c["fused"], **more)


def build_train(rng, pid, dtype, more, s43):
    """A training program: a random program (drawn as `draw` draws it)
    whose leaves are parameters, some stored in f64, bf16 or f16 and read
    through a cast to the program's dtype; 1-4 iterations of zero_grad
    (set_to_none, in place, or none: gradients add up), forward, backward
    (through a GradScaler's scale now and then), clip_grad_norm_ (after
    the scaler's unscale_), and the optimizer's step (through the scaler).
    Each iteration draws the program again from the same generator state
    with the parameters as its leaves (a program whose draws depend on the
    values and change is not a case). Recorded: each iteration's output,
    clip norm, scaler step and scale, and the parameters and gradients at
    the end."""
    cfg = random.Random(rng.randrange(1 << 30))
    state = rng.getstate()
    p0, _, _, _ = draw(rng, dtype, more, s43, True)
    leaves = [n for n in p0.order if p0.inputs[n].requires_grad]
    store = {n: cfg.choice(["f64", "bf16", "f16"]) if cfg.random() < 0.25 else "f32"
             for n in leaves}
    low = any(store[n] in ("bf16", "f16") for n in leaves)
    scaled = cfg.random() < 0.3
    opt_cfg = draw_optimizer(cfg, low, scaled)
    fused = bool(opt_cfg.get("fused"))
    if opt_cfg["name"] == "sgd":
        # Left out: SGD on f16/bf16 parameters (f64 instead). PyTorch's
        # reduced-float `add(b, alpha)` rounds `p + alpha * b` once in its
        # vectorized loop (blocks of 32 elements on AVX2) and rounds
        # `alpha * b` first in its scalar loop (the rest), so an element's
        # update depends on its position, and these parameters are small
        # (all tail); strata rounds once, as the vectorized loop
        # (optim_state.rs checks a 32-element parameter).
        store = {n: "f64" if d in ("f16", "bf16") else d for n, d in store.items()}
    # In the f64 run (the error estimate) the f32 parameters are f64.
    params = {n: p0.inputs[n].detach().to(dtype if store[n] == "f32" else DTYPES[store[n]])
              .requires_grad_(True) for n in leaves}
    init = {n: params[n].detach().clone() for n in leaves}
    plist = [params[n] for n in leaves]
    opt = make_optimizer(opt_cfg, plist)
    iters = cfg.randint(1, 4)
    # (PyTorch's quirk of fused optimizers under a GradScaler: a skipped
    # step leaves `.grad` scaled, which gradients kept for the next
    # iteration would add to.)
    zg = cfg.choice(["none", "zeros"] if scaled and fused else ["none", "zeros", "keep"])
    clip = cfg.choice([None, None, 0.0, 0.5, 1.0, 10.0, INF])
    sc = None
    if scaled:
        sc = {"init_scale": cfg.choice([65536.0, 1024.0, 0.125, 3.0, 1e30]),
              "growth_factor": cfg.choice([2.0, 1.5]),
              "backoff_factor": cfg.choice([0.5, 0.25]),
              "growth_interval": cfg.choice([1, 2, 2000])}
        scaler = torch.amp.GradScaler("cpu", **sc)

    def given(p, name, t):
        q = params[name]
        if q.dtype == dtype:
            return q
        if p.in_ckpt:
            # The cast of a parameter made inside a checkpointed function:
            # the replay makes it before the program, and a non-leaf
            # captured by a checkpoint is refused (pass it as an input).
            raise Skip
        return q.to(dtype)

    outs, log, raw_norms = [], [], []
    for it in range(iters):
        if it > 0 and zg != "keep":
            opt.zero_grad(set_to_none=zg == "none")
        rng.setstate(state)
        p, cur, x, up = draw(rng, dtype, more, s43, True, given)
        if p.steps != p0.steps:
            raise Skip
        outs.append(x.detach().clone())
        loss = x if up is not None else x.sum()
        if sc is not None:
            loss = scaler.scale(loss)
        # (A copy: PyTorch's leaf can take the upstream tensor as its .grad,
        # which clip_grad_norm_ and unscale_ then scale in place.)
        loss.backward(None if up is None else up.clone())
        if S49:
            # Leaf gradients sharing storage (S49_SEED): PyTorch's
            # AccumulateGrad can keep views of one upstream element as two
            # leaves' .grad (stack then sum), and the scaler's unscale_ and
            # clip_grad_norm_ then divide that element once per leaf (seed
            # 276 program 1645: both gradients 1/65536 of what they are).
            ptrs = [q.grad.untyped_storage().data_ptr() for q in plist
                    if q.grad is not None and q.grad.numel() > 0]
            if len(set(ptrs)) < len(ptrs):
                raise Skip
        entry = {}
        if sc is not None and all(q.grad is None for q in plist):
            # PyTorch's GradScaler refuses a step without any gradient
            # (AssertionError "No inf checks were recorded"); strata's
            # steps (an optimizer step without gradients does nothing).
            raise Skip
        if clip is not None:
            if sc is not None:
                scaler.unscale_(opt)
            norm = torch.nn.utils.clip_grad_norm_(plist, clip)
            entry["norm"] = enc(norm.item())
            raw_norms.append(norm.detach().double().reshape(1))
        if sc is not None:
            scaler.step(opt)
            found = sum(v.item() for v in
                        scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values())
            scaler.update()
            entry["stepped"] = found == 0
            entry["scale"] = enc(scaler.get_scale())
        else:
            opt.step()
        log.append(entry)
    # The gradients after a step a GradScaler skipped are left scaled by
    # PyTorch's fused optimizers (see `make_optimizer`): not compared.
    grads_checked = not (sc is not None and fused and not all(e["stepped"] for e in log))
    train = {"params": leaves, "store": store, "optimizer": opt_cfg, "iters": iters,
             "grads_checked": grads_checked,
             "zero_grad": zg, "clip": None if clip is None else enc(clip), "scaler": sc}
    prog = {"id": pid, "kind": "train", "exact": False, "inputs": inputs_json(p0, init),
            "steps": p0.steps, "out": cur, "upstream": None if up is None else tjson(up),
            "train": train, "expect_outs": [tjson(o) for o in outs], "expect_log": log,
            "expect_params": {n: tjson(params[n]) for n in leaves},
            "expect_grads": {n: None if params[n].grad is None else tjson(params[n].grad)
                             for n in leaves}}
    if p.dtypes:
        prog["dtypes"] = p.dtypes
    raw = {"outs": outs, "params": {n: params[n].detach() for n in leaves},
           "grads": {n: params[n].grad for n in leaves},
           "norms": torch.cat(raw_norms) if raw_norms else None}
    return prog, raw


def reaches(out, targets):
    """Whether a gradient from `out` reaches one of `targets` (`out`
    itself included), through `grad_fn.next_functions`."""
    nodes = {t.grad_fn for t in targets if t.grad_fn is not None}
    leaves = {id(t) for t in targets if t.grad_fn is None}
    if any(t is out for t in targets):
        return True
    seen, todo = set(), [out.grad_fn]
    while todo:
        n = todo.pop()
        if n is None or n in seen:
            continue
        seen.add(n)
        if n in nodes or id(getattr(n, "variable", None)) in leaves:
            return True
        todo.extend(f for f, _ in n.next_functions)
    return False


def build_api(rng, pid, dtype, more, s43, s44=False):
    """A program of the gradient API: a random program, then 0-3
    registrations (retain_grad on step outputs, tensor hooks that scale a
    gradient by a power of 2 or 0 on leaves and step outputs,
    post-accumulate-grad hooks that scale a leaf's .grad in place) and 1-3
    passes: `torch.autograd.backward` or `torch.autograd.grad` from 1-2
    outputs (the result or step outputs, each with an upstream gradient or
    none for one element) with `retain_graph` (always but for the last
    pass, so that PyTorch's and strata's rules on a second pass through
    released nodes never matter), `grad` with respect to 1-3 leaves and
    step outputs (`allow_unused`, `materialize_grads`), and now and then a
    leaf's zero_grad between passes (gradients add up over passes).
    Recorded: the leaves' .grad, the retained gradients and what each
    `grad` returned."""
    cfg = random.Random(rng.randrange(1 << 30))
    p, cur, x, _ = draw(rng, dtype, more, s43, True, s44=s44)
    leaves = [n for n in p.order if p.inputs[n].requires_grad]
    outs = [n for n, t in p.env.items() if t.requires_grad]
    targets = leaves + outs

    def T(n):
        return p.inputs[n] if n in p.inputs else p.env[n]

    mode = cfg.choice(["backward", "grad", "hooks"])
    acts, retained, returned, raw_ret = [], [], [], []
    hooked = set()  # non-leaves with tensor hooks
    watched = set()  # non-leaves with tensor hooks or retain_grad
    for _ in range(cfg.randint(1, 3) if mode == "hooks" else cfg.randint(0, 1)):
        what = cfg.choice(["retain", "hook", "hook", "post"])
        c = cfg.choice([2.0, -0.5, 0.0, 4.0])
        if what == "retain":
            n = cfg.choice(outs)
            T(n).retain_grad()
            if T(n).grad_fn is not None:
                watched.add(id(T(n)))
            acts.append({"act": "retain_grad", "on": n})
            if n not in retained:
                retained.append(n)
        elif what == "hook":
            n = cfg.choice(targets)
            T(n).register_hook(lambda g, c=c: None if g is None else g * c)
            if T(n).grad_fn is not None:
                hooked.add(id(T(n)))
                watched.add(id(T(n)))
            acts.append({"act": "hook", "on": n, "c": c})
        else:
            n = cfg.choice(leaves)
            T(n).register_post_accumulate_grad_hook(
                lambda t, c=c: None if t.grad is None else t.grad.mul_(c))
            acts.append({"act": "post_hook", "on": n, "c": c})
    npass = cfg.randint(1, 3)
    for i in range(npass):
        last = i == npass - 1
        if i > 0 and cfg.random() < 0.25:
            n = cfg.choice(leaves)
            none = cfg.random() < 0.5
            if none:
                T(n).grad = None
            elif T(n).grad is not None:
                T(n).grad.zero_()
            acts.append({"act": "zero_grad", "on": n, "none": none})
        os_ = [cur] if cfg.random() < 0.6 else []
        while len(os_) < cfg.randint(1, 2):
            os_.append(cfg.choice(outs))
        ups = [None if T(o).numel() == 1 and cfg.random() < 0.4
               else p.values(list(T(o).shape), pool_only=True) for o in os_]
        retain = not last or cfg.random() < 0.3
        a = {"outputs": os_, "ups": [None if u is None else tjson(u) for u in ups],
             "retain": retain}
        if mode == "grad" and (not last or cfg.random() < 0.5):
            ins = cfg.sample(targets, cfg.randint(1, min(3, len(targets))))
            if len(ins) > 1:
                # Left out: PyTorch captures the gradient of an input whose
                # node also runs in the pass (another input lies behind it)
                # before that input's tensor hooks run, and after them
                # otherwise (`grad([y], [y, x])` gives y's gradient
                # unhooked, `grad([y], [y])` hooked); strata always runs
                # them first, as PyTorch documents.
                ins = [n for n in ins if id(T(n)) not in hooked] or ins[:1]
            if len(os_) == 1 and id(T(os_[0])) in watched and \
                    not reaches(T(os_[0]), [T(n) for n in ins]):
                # Left out: a `grad` pass from one output that no input
                # lies behind runs that output's node in PyTorch (its
                # tensor hooks and retain_grad see the gradient), from
                # several outputs it runs none of theirs (PyTorch skips
                # its root node for a single output); strata runs none.
                raise Skip
            mat = cfg.random() < 0.2
            allow = True if mat else cfg.random() < 0.7
            gs = torch.autograd.grad([T(o) for o in os_], [T(n) for n in ins], grad_outputs=ups,
                                     retain_graph=retain, allow_unused=None if mat else allow,
                                     materialize_grads=mat)
            a.update(act="grad", inputs=ins, allow_unused=allow, materialize=mat)
            returned.append([None if g is None else tjson(g) for g in gs])
            raw_ret.append(list(gs))
        else:
            torch.autograd.backward([T(o) for o in os_], grad_tensors=ups, retain_graph=retain)
            a["act"] = "backward"
        acts.append(a)
    prog = {"id": pid, "kind": "api", "exact": p.exact, "inputs": inputs_json(p),
            "steps": p.steps, "out": cur, "upstream": None, "expect_out": tjson(x),
            "actions": acts, "expect_grads": grads_json(p, leaves),
            "expect_retained": {n: None if T(n).grad is None else tjson(T(n).grad)
                                for n in retained},
            "expect_returned": returned}
    if p.dtypes:
        prog["dtypes"] = p.dtypes
    raw = {"out": x.detach(), "grads": {n: p.inputs[n].grad for n in leaves},
           "retained": {n: T(n).grad for n in retained}, "returned": raw_ret}
    return prog, raw


def err(a, b):
    """|a - b| per element (PyTorch's f32 answer against its f64 one): inf
    where exactly one is NaN, or one is infinite and they differ; 0 where
    both are the same non-finite value."""
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    out = []
    for u, v in zip(a.tolist(), b.tolist()):
        if math.isnan(u) and math.isnan(v):
            out.append(0.0)
        elif math.isfinite(u) and math.isfinite(v):
            out.append(abs(u - v))
        else:
            out.append(0.0 if u == v else "inf")
    return out


def err_opt(a, b):
    return None if a is None or b is None else err(a, b)


def add_errors(prog, raw, raw64):
    """The error estimates of a program's recorded tensors (see `err`)."""
    kind = prog.get("kind")
    if kind is None:
        prog["err_out"] = err(raw["out"], raw64["out"])
        prog["err_grads"] = {n: err_opt(raw[n], raw64[n]) for n in prog["expect_grads"]}
        return
    prog["err_grads"] = {n: err_opt(raw["grads"][n], raw64["grads"][n])
                         for n in prog["expect_grads"]}
    if kind == "train":
        prog["err_outs"] = [err(a, b) for a, b in zip(raw["outs"], raw64["outs"])]
        prog["err_params"] = {n: err(raw["params"][n], raw64["params"][n])
                              for n in prog["expect_params"]}
        prog["err_norms"] = err_opt(raw["norms"], raw64["norms"])
        return
    prog["err_out"] = err(raw["out"], raw64["out"])
    prog["err_retained"] = {n: err_opt(raw["retained"][n], raw64["retained"][n])
                            for n in prog["expect_retained"]}
    prog["err_returned"] = [[err_opt(a, b) for a, b in zip(r, r64)]
                            for r, r64 in zip(raw["returned"], raw64["returned"])]


def diverges(a, b):
    """Whether PyTorch's f32 answer and its f64 twin part by more than
    rounding anywhere (1e-3 of the larger magnitude, or a non-finite value
    against another): a discrete decision (a tie of maximum/minimum, a
    clamp bound, a sign) went the other way in the twin."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        x, y = a.double().reshape(-1), b.double().reshape(-1)
        if x.shape != y.shape:
            return True
        for u, v in zip(x.tolist(), y.tolist()):
            if math.isnan(u) or math.isnan(v) or math.isinf(u) or math.isinf(v):
                if not (u == v or (math.isnan(u) and math.isnan(v))):
                    return True
            elif abs(u - v) > 1e-3 * max(1.0, abs(u), abs(v)):
                return True
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return any(diverges(a[k], b.get(k)) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) != len(b) or any(diverges(u, v) for u, v in zip(a, b))
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    global S45, S46, S49, S52, S55, S58, S59
    S45 = a.seed >= S45_SEED
    S59 = a.seed >= S59_SEED
    S55 = a.seed >= S55_SEED
    S58 = a.seed >= S58_SEED
    S46 = a.seed >= S46_SEED
    S49 = a.seed >= S49_SEED
    S52 = a.seed >= S52_SEED
    if a.seed >= S44_SEED:
        TYPED.update({torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16",
                      torch.float16: "f16"})
    progs, skipped, attempt = [], 0, 0
    while len(progs) < a.count:
        # One generator per attempt: a program does not depend on the skips before it.
        rng = random.Random(a.seed * 1_000_003 + attempt)
        attempt += 1
        try:
            more = a.seed >= NEW_OPS_SEED
            s43 = a.seed >= S43_SEED
            s43b = a.seed >= S43B_SEED
            s44 = a.seed >= S44_SEED
            prog, raw = build(rng, f"{a.seed}:{attempt - 1}", more=more, s43=s43, s43b=s43b,
                              s44=s44)
            if not prog["exact"]:
                # The same program in f64 (the same f32 inputs): the error of
                # PyTorch's own f32 answer, which the replay allows strata
                # too (ill-conditioned elements: layer_norm of nearly
                # constant rows, cancellations, ties that f32 rounding made).
                p64, raw64 = build(random.Random(a.seed * 1_000_003 + attempt - 1), "",
                                   torch.float64, more, s43, s43b, s44)
                if p64["steps"] != prog["steps"] or p64.get("kind") != prog.get("kind") or \
                        p64.get("actions") != prog.get("actions") or \
                        p64.get("expect_error") != prog.get("expect_error"):
                    raise Skip
                add_errors(prog, raw, raw64)
                if S59 and diverges(raw, raw64):
                    # Seeds >= S59_SEED: a program whose f64 twin parts from
                    # its f32 answer beyond rounding is ill-conditioned (a
                    # tie or bound decided by the last bit of an inexact
                    # value), and agreement at the other elements is luck:
                    # seed 417's program 417:1949 (a `minimum` of an f32
                    # parameter and an f64 one read as f32, equal at first,
                    # through three SGD steps; the twin breaks 15 of the 32
                    # ties the other way) failed so in strata at an element
                    # where the twin happened to agree.
                    raise Skip
            progs.append(prog)
        except Skip:
            skipped += 1
        except (RuntimeError, IndexError, ValueError):
            # PyTorch refused the program (shapes that do not fit): not a case.
            skipped += 1
    with open(a.out, "w") as f:
        json.dump({"generator": "benches/anchors/fuzz_grad.py", "seed": a.seed,
                   "torch": torch.__version__, "programs": progs}, f, separators=(",", ":"))
    print(f"{len(progs)} programs, {skipped} skipped -> {a.out}")


if __name__ == "__main__":
    main()
