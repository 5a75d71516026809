#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread) for
crates/strata-tensor/tests/suite/oracle_s58.rs, written to
crates/strata-tensor/tests/data/oracle_s58.json: what the session-58
conformance sweep (benches/anchors/fuzz_conformance_s58.py, seeds 3400-3415)
found.

"masked_fill": `masked_fill_` of `as_strided` views whose elements share
memory through strides smaller than the sizes they skip (not a stride 0):
PyTorch accepts them and writes the value through every masked element, so
a storage element is filled when any element addressing it is masked.
Each case: the base storage, the view (size, stride, offset), the mask and
the value; PyTorch's base storage after the call.

"errors": in-place ops whose PyTorch answer is an error of one class of
conformance/pytorch/FORMAT.md section 6, read from its message: in-place
ops on such self-aliasing views fail with the dtype or broadcast error
PyTorch checks before it writes (it sees only stride-0 aliasing);
`scatter_add_` checks self's memory (a stride-0 dim) before the range of
the indices; `layer_norm` checks the shapes before the dtypes. Each case:
the op, its operands (views of base storages) and arguments, the class and
PyTorch's message.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_oracle_s58.py \\
        crates/strata-tensor/tests/data/oracle_s58.json
"""
import json
import sys

import torch
import torch.nn.functional as F

from fixture_io import write_fixture

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}


def classify(msg):
    rules = [
        ("more than one element of the written-to tensor", "overlap"),
        ("some elements of the input tensor and the written-to tensor", "overlap"),
        ("can't be cast to the desired output type", "dtype"),
        ("not implemented for", "dtype"),
        ("mixed dtype", "dtype"),
        ("doesn't match the broadcast shape", "broadcast"),
        ("must match the size of tensor", "broadcast"),
        ("is out of bounds", "index"),
        ("normalized_shape", "shape"),
        ("Expected weight to be of same shape", "shape"),
    ]
    for k, c in rules:
        if k in msg:
            return c
    raise SystemExit(f"unclassified: {msg}")


def base_of(dt, n, start=1):
    if dt == "bool":
        return [bool(i % 3) for i in range(n)]
    if dt in ("f32", "f64", "f16", "bf16"):
        return [(start + i) * 0.5 - 2.0 for i in range(n)]
    return [start + i for i in range(n)]


def view(spec):
    b = torch.tensor(spec["base"], dtype=DT[spec["dtype"]])
    return b, b.as_strided(spec["size"], spec["stride"], spec["offset"])


def opnd(dt, n, size, stride, offset=0, start=1):
    return {"dtype": dt, "base": base_of(dt, n, start), "size": size, "stride": stride,
            "offset": offset}


def num(v):
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def masked_fill_cases():
    out = []
    specs = [
        ("f32", 8, [4, 2], [1, 1], 0, 2.5),
        ("bf16", 12, [4, 2], [1, 1], 0, 1),
        ("i64", 10, [3, 3], [2, 1], 1, -7),
        ("i32", 9, [2, 3, 2], [2, 1, 1], 0, 100),
        ("bool", 7, [3, 3], [1, 1], 2, False),
        ("f64", 6, [5], [0], 3, 9.0),  # stride 0: the path strata had already
        ("u8", 16, [3, 4], [3, 2], 0, 255),
        ("f16", 5, [2, 2], [1, 1], 1, -0.25),
    ]
    g = torch.Generator().manual_seed(58)
    for dt, n, size, stride, off, value in specs:
        spec = opnd(dt, n, size, stride, off)
        b, v = view(spec)
        mask = (torch.rand(size, generator=g) < 0.4)
        v.masked_fill_(mask, value)
        out.append({**spec, "mask": mask.reshape(-1).tolist(), "value": value,
                    "after": [num(x) for x in b.tolist()]})
    return out


def error_cases():
    cases = []

    def rec(name, fn, operands, args):
        ts = [view(o)[1] for o in operands]
        try:
            fn(*ts)
        except Exception as e:  # noqa: BLE001
            msg = str(e).split("\n")[0]
            cases.append({"name": name, "operands": operands, "args": args,
                          "error": classify(msg), "message": msg})
            return
        raise SystemExit(f"{name}: PyTorch succeeded")

    alias = lambda dt: opnd(dt, 8, [4, 2], [1, 1])  # noqa: E731
    full = lambda dt, start=1: opnd(dt, 8, [4, 2], [2, 1], 0, start)  # noqa: E731
    for dt in ("i32", "i64", "u8"):
        rec(f"sigmoid_ {dt} aliasing", lambda x: x.sigmoid_(), [alias(dt)], {"op": "sigmoid_"})
        rec(f"exp_ {dt} aliasing", lambda x: x.exp_(), [alias(dt)], {"op": "exp_"})
        rec(f"add_ f32 into {dt} aliasing", lambda x, y: x.add_(y), [alias(dt), full("f32")],
            {"op": "add_"})
        rec(f"div_ into {dt} aliasing", lambda x, y: x.div_(y), [alias(dt), full(dt, 3)],
            {"op": "div_"})
        rec(f"addcmul_ f32 into {dt} aliasing", lambda x, y, z: x.addcmul_(y, z, value=1),
            [alias(dt), full("f32"), full("f32", 2)], {"op": "addcmul_"})
        rec(f"sqrt_ {dt} aliasing", lambda x: x.sqrt_(), [alias(dt)], {"op": "sqrt_"})
    rec("copy_ [3] into aliasing [4, 2]", lambda x, y: x.copy_(y),
        [alias("f32"), opnd("f32", 3, [3], [1])], {"op": "copy_"})
    rec("add_ [3] into aliasing [4, 2]", lambda x, y: x.add_(y),
        [alias("f32"), opnd("f32", 3, [3], [1])], {"op": "add_"})
    # scatter_add_: a stride-0 self is refused before the indices' range is
    # read; a self aliasing through small strides (which PyTorch cannot
    # tell) and a plain one fail on the range
    for nm, selfspec in [("expanded", opnd("f32", 2, [4, 2], [0, 1])),
                         ("aliasing", alias("f32")), ("plain", full("f32"))]:
        for bad in (-1, 4, 2 ** 31 - 1):
            idx = {"dtype": "i64", "base": [0, bad, 1, 2], "size": [2, 2], "stride": [2, 1],
                   "offset": 0}
            src = opnd("f32", 4, [2, 2], [2, 1])
            rec(f"scatter_add_ {nm} self, index {bad}",
                lambda x, i, s: x.scatter_add_(0, i, s), [selfspec, idx, src],
                {"op": "scatter_add_", "dim": 0})
    # layer_norm: shapes before dtypes
    ln = [("i32 0-d, [1]", opnd("i32", 1, [], []), [1], None),
          ("i32 [2, 3], [2]", opnd("i32", 6, [2, 3], [3, 1]), [2], None),
          ("i64 [2, 3], [3] with a [2] weight", opnd("i64", 6, [2, 3], [3, 1]), [3],
           opnd("i64", 2, [2], [1])),
          ("i32 [2, 3], [3]", opnd("i32", 6, [2, 3], [3, 1]), [3], None),
          ("f32 [2, 3], [3] with an i32 weight", opnd("f32", 6, [2, 3], [3, 1]), [3],
           opnd("i32", 3, [3], [1])),
          ("u8 [2, 3], [3] with an f32 weight", opnd("u8", 6, [2, 3], [3, 1]), [3],
           opnd("f32", 3, [3], [1]))]
    for nm, x, ns, w in ln:
        ops = [x] + ([w] if w else [])
        rec(f"layer_norm {nm}", (lambda a, ww=None, ns=ns: F.layer_norm(a, ns, ww)), ops,
            {"op": "layer_norm", "normalized_shape": ns})
    return cases


def main():
    torch.set_num_threads(1)
    out = sys.argv[1] if len(sys.argv) > 1 else "crates/strata-tensor/tests/data/oracle_s58.json"
    doc = {"torch": torch.__version__, "masked_fill": masked_fill_cases(),
           "errors": error_cases()}
    write_fixture(out, json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {out}: {len(doc['masked_fill'])} masked_fill, {len(doc['errors'])} errors",
          file=sys.stderr)


if __name__ == "__main__":
    main()
