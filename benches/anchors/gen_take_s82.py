#!/usr/bin/env python3
"""Session 82: PyTorch 2.15's CPU answers (one thread) for `torch.take`,
`Tensor.put_` (with and without `accumulate`) and `torch.broadcast_tensors`,
in the format of gen_shape_stats_s79.py (whose drawing and writing it
reuses), written to crates/strata-tensor/tests/data/take_s82.json.gz
(crates/strata-tensor/tests/suite/take_s82.rs).

Operands of every dtype, shapes with and without elements, 0-d,
transposed (positions follow the logical row-major order); positions of
any shape, negative, at and past both ends, index dtypes other than i64;
put_'s source of another dtype or count. Without `accumulate` the positions
of put_ are distinct (PyTorch leaves the winner of a repeated one
unspecified); an in-place form's result is its first operand afterwards.
broadcast_tensors gets two or three operands that broadcast or not.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_take_s82.py \\
        crates/strata-tensor/tests/data/take_s82.json.gz
"""
import math
import sys

import torch

import gen_math_s74 as m
import gen_shape_stats_s79 as s

INDEX_SHAPES = [[], [0], [1], [3], [2, 2], [4]]


def positions(r, n, count, distinct):
    """count positions for n elements: mostly in [-n, n), one time in
    eight at or past an end."""
    if distinct and n > 0:
        picks = r.sample(range(n), min(count, n))
        return [p - n if r.random() < 0.3 else p for p in picks]
    out = []
    for _ in range(count):
        if r.random() < 0.12 or n == 0:
            out.append(r.choice([n, -n - 1, n + 3, 0]))
        else:
            out.append(r.randint(-n, n - 1))
    return out


def index_record(vals, shape, dtype):
    t = torch.tensor(vals, dtype=m.DTYPES[dtype]).reshape(shape)
    return t, {"dtype": dtype, "shape": list(shape), "values": [int(v) for v in vals], "t": False}


def case(r, op):
    d = s.some_dtype(r)
    shape = r.choice(s.SHAPES)
    ts = [s.draw(r, d, shape, "tame")]
    n = math.prod(shape)
    if op == "broadcast_tensors":
        for _ in range(r.choice([1, 2])):
            ts.append(s.draw(r, s.some_dtype(r), m.broadcast_shape(r, shape), "tame"))
        return ts, {}, lambda *a: list(torch.broadcast_tensors(*a)), []
    ishape = r.choice(INDEX_SHAPES)
    count = math.prod(ishape)
    accumulate = r.random() < 0.5
    distinct = op == "put_" and not accumulate
    vals = positions(r, n, count, distinct)
    if len(vals) < count:  # fewer distinct positions than asked
        ishape, count = [len(vals)], len(vals)
    idt = "i64" if r.random() < 0.9 else r.choice(["i32", "u8"])
    if idt == "u8":
        vals = [abs(v) % 256 for v in vals]
    ts.append(index_record(vals, ishape, idt))
    if op == "take":
        return ts, {}, lambda a, i: [torch.take(a, i)], []
    sd = d if r.random() < 0.9 else s.some_dtype(r)
    scount = count if r.random() < 0.9 else count + 1
    ts.append(s.draw(r, sd, [scount], "tame"))
    args = {"accumulate": accumulate}

    def f(a, i, v):
        a.put_(i, v, accumulate=accumulate)
        return [a]

    return ts, args, f, []


def main():
    tensor_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/take_s82.json.gz"
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 8205
    per_op = int(sys.argv[3]) if len(sys.argv) > 3 else 600
    s.generate(["take", "put_", "broadcast_tensors"], case, "benches/anchors/gen_take_s82.py", tensor_path,
               "/dev/null", seed, per_op)


if __name__ == "__main__":
    main()
