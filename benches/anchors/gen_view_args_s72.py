#!/usr/bin/env python3
"""Session 72: PyTorch 2.15's CPU answers (one thread) for shape and view ops
called with hostile integer arguments, written to
crates/strata-tensor/tests/data/view_args_s72.json.gz
(crates/strata-tensor/tests/suite/view_args_s72.rs).

The ops: diagonal, diag_embed, diag, roll, tril, triu, narrow, select,
slice, chunk, split, repeat, tile, flip, squeeze (dims), unsqueeze,
transpose and flatten, on `arange(n)` (f32) of shapes with 0 to 3 dims,
empty ones included. Each integer argument is, two times in five, one of
HUGE (near ±2^31, ±2^32, ±2^62 and ±2^63), else a small valid or nearly
valid one. Each case keeps PyTorch's results (shapes and values) or the
fact that it raised; the test asks strata for the same.

Left out (the test could not agree with them on purpose):
- results over MAX_RESULT elements, and errors about allocating or
  overflowing (strata refuses such sizes with its own errors);
- PyTorch's internal limit on integer lists: a value at or below -2^62 in
  the shifts, dims or sizes of roll, repeat and tile fails with
  "SymIntArrayRef expected to contain only concrete integers" (strata takes
  the value for what it is);
- PyTorch's int64 arithmetic that wraps (conformance/README.md, "Known
  differences: PyTorch's int64 size arithmetic that wraps"): a repeat/tile
  size that is not the exact product, a chunk into nearly 2^63 pieces
  (PyTorch's split size wraps to a negative or zero one), a slice whose
  stride (step times stride) wrapped negative.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_view_args_s72.py \\
        crates/strata-tensor/tests/data/view_args_s72.json.gz
(under a few GB of address space, e.g. `ulimit -v 4000000`, so that a huge
result fails to allocate instead of filling the machine's memory).
"""
import json
import random
import sys

import torch

from fixture_io import write_fixture

torch.set_num_threads(1)

MAX_RESULT = 4096
HUGE = [-(2 ** 63), -(2 ** 63) + 1, -(2 ** 62), -(2 ** 32), -(2 ** 31) - 1, 2 ** 31, 2 ** 32,
        2 ** 62, 2 ** 63 - 1, 2 ** 63 - 2]
SHAPES = [[], [0], [3], [4], [2, 3], [3, 0], [1, 4], [2, 3, 2], [0, 2, 3], [2, 1, 3]]
OPS = ["diagonal", "diag", "diag_embed", "roll", "tril", "triu", "narrow", "select", "slice",
       "chunk", "split", "repeat", "tile", "flip", "squeeze_dims", "unsqueeze", "transpose",
       "flatten"]


class Skip(Exception):
    """The case is left out (see the module docstring)."""


def draw(r, shape):
    nd = len(shape)

    def iv(small):
        return r.choice(HUGE) if r.random() < 0.4 else r.choice(small)

    dims = list(range(-nd - 1, nd + 1)) or [0, -1, 1]
    idx = list(range(-5, 6))
    op = r.choice(OPS)
    if op in ("diagonal", "diag_embed"):
        return op, [iv(idx), iv(dims), iv(dims)]
    if op in ("diag", "tril", "triu"):
        return op, [iv(idx)]
    if op == "roll":
        m = r.randint(1, 2)
        return op, [[iv(idx) for _ in range(m)],
                    [iv(dims) for _ in range(m if r.random() < 0.9 else m + 1)]]
    if op == "narrow":
        return op, [iv(dims), iv(idx), iv(idx)]
    if op == "select":
        return op, [iv(dims), iv(idx)]
    if op == "slice":
        return op, [iv(dims), r.choice([None, iv(idx)]), r.choice([None, iv(idx)]),
                    iv([1, 2, 3])]
    if op in ("chunk", "split"):
        return op, [iv([1, 2, 3, 0, -1]), iv(dims)]
    if op in ("repeat", "tile"):
        lo = max(nd, 1) if op == "repeat" else 0
        return op, [[iv([0, 1, 2, 3]) for _ in range(r.randint(lo, nd + 1))]]
    if op in ("flip", "squeeze_dims"):
        return op, [[iv(dims) for _ in range(r.randint(0, 2))]]
    if op == "unsqueeze":
        return op, [iv(dims)]
    return op, [iv(dims), iv(dims)]  # transpose, flatten


def run(op, x, a):
    f = {
        "diagonal": lambda: torch.diagonal(x, *a),
        "diag_embed": lambda: torch.diag_embed(x, *a),
        "diag": lambda: torch.diag(x, *a),
        "roll": lambda: torch.roll(x, a[0], a[1]),
        "tril": lambda: torch.tril(x, *a),
        "triu": lambda: torch.triu(x, *a),
        "narrow": lambda: torch.narrow(x, *a),
        "select": lambda: torch.select(x, *a),
        "slice": lambda: torch.ops.aten.slice.Tensor(x, *a),
        "chunk": lambda: list(torch.chunk(x, *a)),
        "split": lambda: list(torch.split(x, a[0], a[1])),
        "repeat": lambda: x.repeat(*a),
        "tile": lambda: torch.tile(x, a[0]),
        "flip": lambda: torch.flip(x, a[0]),
        "squeeze_dims": lambda: torch.squeeze(x, a[0]),
        "unsqueeze": lambda: torch.unsqueeze(x, *a),
        "transpose": lambda: torch.transpose(x, *a),
        "flatten": lambda: torch.flatten(x, *a),
    }[op]
    return f()


def wraps(op, shape, a, ys, msg):
    """PyTorch's answer comes from int64 arithmetic that wrapped."""
    if op in ("repeat", "tile") and ys is not None:
        reps = list(a[0])
        if op == "tile":
            reps = [1] * (len(shape) - len(reps)) + reps
        full = [1] * (len(reps) - len(shape)) + list(shape)
        return list(ys[0].shape) != [s * k for s, k in zip(full, reps)]
    if op == "chunk" and msg is not None:
        # split size ceil(size / chunks) computed as (size + chunks - 1) /
        # chunks, which wraps for chunks near 2^63 (negative, or 0)
        return a[0] > 2 ** 62
    if op == "slice" and msg is not None:
        # the stride step * stride wrapped (negative, or -2^63)
        return ("Negative strides are not supported" in msg
                or "cannot be represented as a SymInt" in msg)
    return False


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/view_args_s72.json.gz"
    r = random.Random(7201)
    cases, left_out = [], 0
    for _ in range(20000):
        shape = r.choice(SHAPES)
        n = 1
        for s in shape:
            n *= s
        x = torch.arange(n, dtype=torch.float32).reshape(shape)
        op, a = draw(r, shape)
        ys, msg = None, None
        try:
            y = run(op, x, a)
            ys = y if isinstance(y, list) else [y]
        except Exception as e:  # noqa: BLE001 - PyTorch raises several types
            msg = str(e).split("\n")[0][:200]
        try:
            if msg is not None and any(k in msg.lower() for k in ("allocate", "overflow")):
                raise Skip
            if msg is not None and "SymIntArrayRef" in msg:
                raise Skip
            if ys is not None and (len(ys) > 64 or any(t.numel() > MAX_RESULT for t in ys)):
                raise Skip
            if wraps(op, shape, a, ys, msg):
                raise Skip
        except Skip:
            left_out += 1
            continue
        c = {"op": op, "shape": shape, "args": a}
        if msg is None:
            c["results"] = [{"shape": list(t.shape), "data": t.flatten().tolist()} for t in ys]
        else:
            c["error"] = msg
        cases.append(c)
    doc = {"generator": "benches/anchors/gen_view_args_s72.py", "torch": torch.__version__,
           "cases": cases}
    write_fixture(out_path, json.dumps(doc))
    print("%d cases (%d errors), %d left out -> %s"
          % (len(cases), sum("error" in c for c in cases), left_out, out_path))


if __name__ == "__main__":
    main()
