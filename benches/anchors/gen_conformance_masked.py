#!/usr/bin/env python3
"""Writes conformance/masked.json: PyTorch's answers to masked_select,
masked_scatter and masked_fill programs (issue 12 asks for vectors for the
first two; the shared folder has none).

The file has the format of conformance/pytorch/FORMAT.md (group `masked`)
and is replayed by crates/strata-tensor/tests/conformance.rs
(`project_conformance`, every *.json of conformance/) on the CPU and on
cuda:0. Ops beyond FORMAT.md section 7 (same conventions):

| op | args | PyTorch meaning |
| --- | --- | --- |
| `masked_select` | T x, T mask | `torch.masked_select(x, mask)`: x and mask broadcast; the elements of the broadcast x where the mask is true, row-major, 1-D; mask must be bool |
| `masked_scatter` | T x, T mask, T source | `x.masked_scatter(mask, source)`: a copy of x (of the broadcast shape) whose masked positions take source's first elements in row-major order; source must have x's dtype and at least as many elements as the mask has set positions |
| `masked_scatter_` | T x, T mask, T source | in place: the mask broadcasts to x's shape |

Cases: every dtype, broadcast masks (both ways), non-contiguous inputs
(transposes, steps, expands), empty and all-false and all-true masks, 0-d
operands, and the errors (non-bool mask: `dtype`; shapes that do not
broadcast: `broadcast`; a source with too few elements: `shape`; a source
of another dtype: `dtype`).

Usage (on a machine with PyTorch; one CPU thread, as the shared vectors):
    python3 benches/anchors/gen_conformance_masked.py [--out conformance/masked.json]
"""

import argparse
import json
import math
import random

DTYPES = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"]


def inp(name, shape, dtype, data):
    return {"name": name, "shape": shape, "dtype": dtype, "data": data}


def st(op, args, out=None, error=None):
    s = {"op": op, "args": args}
    if out is not None:
        s["out"] = out
    if error is not None:
        s["error"] = error
    return s


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def values(dtype, n, rng):
    """n values exactly representable in dtype (small integers and halves)."""
    if dtype == "bool":
        return [rng.random() < 0.5 for _ in range(n)]
    if dtype == "u8":
        return [rng.randrange(0, 256) for _ in range(n)]
    if dtype in ("i32", "i64"):
        return [rng.randrange(-1000, 1000) for _ in range(n)]
    return [rng.randrange(-64, 64) / 2 for _ in range(n)]


def mask(n, rng, p=0.5):
    return [rng.random() < p for _ in range(n)]


def build_cases():
    rng = random.Random(12)
    cases = []

    def add(cid, doc, inputs, steps, tags=()):
        cases.append({"id": "masked." + cid, "doc": doc, "tags": list(tags),
                      "inputs": inputs, "steps": steps})

    for dt in DTYPES:
        # Plain, same shape.
        add(f"select_{dt}", f"masked_select of a (3,5) {dt} tensor with a (3,5) mask",
            [inp("x", [3, 5], dt, values(dt, 15, rng)), inp("m", [3, 5], "bool", mask(15, rng))],
            [st("masked_select", ["x", "m"], "y")])
        # Broadcast mask (a row mask).
        add(f"select_bcast_mask_{dt}", f"masked_select of (4,6) {dt} with a (6,) mask (broadcast)",
            [inp("x", [4, 6], dt, values(dt, 24, rng)), inp("m", [6], "bool", mask(6, rng))],
            [st("masked_select", ["x", "m"], "y")])
        # Broadcast x (the mask is larger).
        add(f"select_bcast_x_{dt}", f"masked_select of (1,5) {dt} with a (3,5) mask: x broadcasts",
            [inp("x", [1, 5], dt, values(dt, 5, rng)), inp("m", [3, 5], "bool", mask(15, rng))],
            [st("masked_select", ["x", "m"], "y")])
        # Non-contiguous x (transpose) and mask (step slice).
        add(f"select_noncontig_{dt}", f"masked_select of a transposed {dt} with a sliced mask",
            [inp("x", [5, 4], dt, values(dt, 20, rng)), inp("m", [4, 10], "bool", mask(40, rng))],
            [st("transpose", ["x", 0, 1], "xt"), st("slice", ["m", 1, 0, 10, 2], "ms"),
             st("masked_select", ["xt", "ms"], "y")], ["noncontig"])
        # masked_scatter, same shape.
        m = mask(12, rng)
        n_set = sum(m)
        add(f"scatter_{dt}", f"masked_scatter into a (3,4) {dt} tensor from a longer source",
            [inp("x", [3, 4], dt, values(dt, 12, rng)), inp("m", [3, 4], "bool", m),
             inp("s", [n_set + 3], dt, values(dt, n_set + 3, rng))],
            [st("masked_scatter", ["x", "m", "s"], "y")])
        # masked_scatter with a broadcast mask and a 2-D source.
        add(f"scatter_bcast_{dt}", f"masked_scatter of (4,3) {dt} with a (4,1) mask, a (4,3) source",
            [inp("x", [4, 3], dt, values(dt, 12, rng)), inp("m", [4, 1], "bool", mask(4, rng)),
             inp("s", [4, 3], dt, values(dt, 12, rng))],
            [st("masked_scatter", ["x", "m", "s"], "y")])
        # In place on a transposed view: the base sees the writes.
        add(f"scatter_inplace_view_{dt}", f"masked_scatter_ into a transposed {dt} view",
            [inp("x", [3, 4], dt, values(dt, 12, rng)), inp("m", [4, 3], "bool", mask(12, rng)),
             inp("s", [12], dt, values(dt, 12, rng))],
            [st("transpose", ["x", 0, 1], "xt"), st("masked_scatter_", ["xt", "m", "s"])],
            ["noncontig"])
        # masked_fill with a broadcast mask on a non-contiguous x.
        add(f"fill_noncontig_{dt}", f"masked_fill of a step-sliced {dt} with a (1,3) mask",
            [inp("x", [4, 6], dt, values(dt, 24, rng)), inp("m", [1, 3], "bool", mask(3, rng))],
            [st("slice", ["x", 1, 0, 6, 2], "xs"),
             st("masked_fill", ["xs", "m", {"bool": True} if dt == "bool" else {"int": 1}], "y")],
            ["noncontig"])

    # Edge cases (f32 and i64).
    for dt in ("f32", "i64"):
        add(f"select_all_false_{dt}", "an all-false mask selects nothing (shape [0])",
            [inp("x", [2, 3], dt, values(dt, 6, rng)), inp("m", [2, 3], "bool", [False] * 6)],
            [st("masked_select", ["x", "m"], "y")], ["empty"])
        add(f"select_all_true_{dt}", "an all-true mask selects everything, row-major",
            [inp("x", [3, 2], dt, values(dt, 6, rng)), inp("m", [3, 2], "bool", [True] * 6)],
            [st("transpose", ["x", 0, 1], "xt"), st("masked_select", ["xt", "m2"], "y")]
            if False else [st("masked_select", ["x", "m"], "y")])
        add(f"select_empty_{dt}", "masked_select of a (0,4) tensor",
            [inp("x", [0, 4], dt, []), inp("m", [4], "bool", mask(4, rng))],
            [st("masked_select", ["x", "m"], "y")], ["empty"])
        add(f"select_zero_dim_{dt}", "masked_select of a 0-d tensor with a (5,) mask",
            [inp("x", [], dt, values(dt, 1, rng)), inp("m", [5], "bool", mask(5, rng, 0.7))],
            [st("masked_select", ["x", "m"], "y")], ["zero_dim"])
        add(f"select_zero_dim_mask_{dt}", "masked_select of (2,3) with a 0-d true mask",
            [inp("x", [2, 3], dt, values(dt, 6, rng)), inp("m", [], "bool", [True])],
            [st("masked_select", ["x", "m"], "y")], ["zero_dim"])
        add(f"select_expanded_{dt}", "masked_select of an expanded tensor (stride 0)",
            [inp("x", [3], dt, values(dt, 3, rng)), inp("m", [4, 3], "bool", mask(12, rng))],
            [st("expand", ["x", [4, 3]], "xe"), st("masked_select", ["xe", "m"], "y")],
            ["noncontig"])
        add(f"scatter_no_set_{dt}", "masked_scatter with an all-false mask and an empty source",
            [inp("x", [2, 2], dt, values(dt, 4, rng)), inp("m", [2, 2], "bool", [False] * 4),
             inp("s", [0], dt, [])],
            [st("masked_scatter", ["x", "m", "s"], "y")], ["empty"])
        add(f"scatter_exact_source_{dt}", "masked_scatter whose source has exactly the set count",
            [inp("x", [5], dt, values(dt, 5, rng)), inp("m", [5], "bool", [True, False, True, True, False]),
             inp("s", [3], dt, values(dt, 3, rng))],
            [st("masked_scatter", ["x", "m", "s"], "y")])
        add(f"scatter_noncontig_source_{dt}", "masked_scatter from a transposed source (row-major order of it)",
            [inp("x", [2, 3], dt, values(dt, 6, rng)), inp("m", [2, 3], "bool", [True] * 6),
             inp("s", [3, 2], dt, values(dt, 6, rng))],
            [st("transpose", ["s", 0, 1], "stt"), st("masked_scatter", ["x", "m", "stt"], "y")],
            ["noncontig"])
        # A long run crossing several 4096-element chunks of the compaction.
        n = 9000
        add(f"select_long_{dt}", "masked_select over 9000 elements (several compaction chunks)",
            [inp("x", [n], dt, values(dt, n, rng)), inp("m", [n], "bool", mask(n, rng, 0.3))],
            [st("masked_select", ["x", "m"], "y")])
        m = mask(n, rng, 0.6)
        add(f"scatter_long_{dt}", "masked_scatter over 9000 elements (several compaction chunks)",
            [inp("x", [n], dt, values(dt, n, rng)), inp("m", [n], "bool", m),
             inp("s", [n], dt, values(dt, n, rng))],
            [st("masked_scatter", ["x", "m", "s"], "y")])

    # Errors.
    add("select_u8_mask", "a u8 mask is rejected (dtype)",
        [inp("x", [3], "f32", [1.0, 2.0, 3.0]), inp("m", [3], "u8", [1, 0, 1])],
        [st("masked_select", ["x", "m"], "y", error="dtype")])
    add("select_no_broadcast", "shapes that do not broadcast (broadcast)",
        [inp("x", [3], "f32", [1.0, 2.0, 3.0]), inp("m", [4], "bool", [True] * 4)],
        [st("masked_select", ["x", "m"], "y", error="broadcast")])
    add("scatter_short_source", "a source with fewer elements than set positions (shape)",
        [inp("x", [4], "f32", [1.0, 2.0, 3.0, 4.0]), inp("m", [4], "bool", [True, True, True, False]),
         inp("s", [2], "f32", [9.0, 8.0])],
        [st("masked_scatter", ["x", "m", "s"], "y", error="shape")])
    add("scatter_source_dtype", "a source of another dtype is rejected (dtype)",
        [inp("x", [2], "f32", [1.0, 2.0]), inp("m", [2], "bool", [True, False]),
         inp("s", [2], "f64", [9.0, 8.0])],
        [st("masked_scatter", ["x", "m", "s"], "y", error="dtype")])
    add("scatter_inplace_enlarge", "masked_scatter_ whose mask would enlarge self (broadcast)",
        [inp("x", [3], "f32", [1.0, 2.0, 3.0]), inp("m", [2, 3], "bool", [True] * 6),
         inp("s", [6], "f32", [0.5] * 6)],
        [st("masked_scatter_", ["x", "m", "s"], error="broadcast")])
    return cases


def fmt_float(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def record(shape, dtype, data, strides, offset, contiguous, storage, layout):
    if dtype in ("f32", "f64", "f16", "bf16"):
        data = [fmt_float(x) for x in data]
    return {"shape": shape, "dtype": dtype, "data": data, "strides": strides,
            "offset": offset, "contiguous": contiguous, "storage": storage, "layout": layout}


VIEWS = {"transpose", "slice", "expand"}


class CaseMismatch(Exception):
    """PyTorch disagrees with a case's premise (an expected error that did
    not happen, or an unexpected one): the case is left out and reported."""


def torch_run(c, torch):
    tdt = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
           "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64,
           "u8": torch.uint8, "bool": torch.bool}
    name_of = {v: k for k, v in tdt.items()}
    env, order = {}, []

    def arg(v):
        if isinstance(v, str):
            return env[v]
        if isinstance(v, dict):
            (_, x), = v.items()
            return x
        return v

    for i in c["inputs"]:
        env[i["name"]] = torch.tensor(i["data"], dtype=tdt[i["dtype"]]).reshape(i["shape"])
        order.append(i["name"])
    steps = []
    for step in c["steps"]:
        step = dict(step)
        a, op = step["args"], step["op"]
        try:
            if op == "transpose":
                r = env[a[0]].transpose(a[1], a[2])
            elif op == "slice":
                idx = [slice(None)] * env[a[0]].dim()
                idx[a[1]] = slice(a[2], a[3], a[4])
                r = env[a[0]][tuple(idx)]
            elif op == "expand":
                r = env[a[0]].expand(a[1])
            elif op == "masked_select":
                r = torch.masked_select(env[a[0]], env[a[1]])
            elif op == "masked_scatter":
                r = env[a[0]].masked_scatter(env[a[1]], env[a[2]])
            elif op == "masked_scatter_":
                env[a[0]].masked_scatter_(env[a[1]], env[a[2]])
                r = None
            elif op == "masked_fill":
                r = env[a[0]].masked_fill(env[a[1]], arg(a[2]))
            else:
                raise SystemExit(f"gen: unknown op {op}")
            if "error" in step:
                raise CaseMismatch(f"{op} succeeded in PyTorch, a {step['error']} error was expected")
            if r is not None:
                env[step["out"]] = r
                order.append(step["out"])
        except (SystemExit, CaseMismatch):
            raise
        except Exception as e:  # noqa: BLE001 - PyTorch raises RuntimeError, IndexError, ...
            if "error" not in step:
                raise CaseMismatch(f"{op} failed in PyTorch ({e})") from e
            step["torch_message"] = str(e).split("\n")[0]
        steps.append(step)
    expect = {}
    for name in order:
        t = env[name]
        first = next(n for n in order
                     if env[n].untyped_storage().data_ptr() == t.untyped_storage().data_ptr())
        is_input = any(i["name"] == name for i in c["inputs"])
        made_by = next((s_["op"] for s_ in c["steps"] if s_.get("out") == name), None)
        layout = "checked" if is_input or made_by in VIEWS else "info"
        expect[name] = record(list(t.shape), name_of[t.dtype], t.reshape(-1).tolist(),
                              list(t.stride()), t.storage_offset(), t.is_contiguous(), first, layout)
    return expect, steps


def meta(c, expect):
    ops = sorted({s_["op"] for s_ in c["steps"]})
    dts = {i["dtype"] for i in c["inputs"]} | {v["dtype"] for v in expect.values()}
    tags = list(c["tags"])
    if any("error" in s_ for s_ in c["steps"]) and "error" not in tags:
        tags.append("error")
    return ops, sorted(dts), tags


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="conformance/masked.json")
    args = ap.parse_args()
    import platform

    import torch

    torch.set_num_threads(1)
    out, left_out = [], 0
    for c in build_cases():
        try:
            expect, steps = torch_run(c, torch)
        except CaseMismatch as e:
            print(f"LEFT OUT {c['id']}: {e}")
            left_out += 1
            continue
        ops, dts, tags = meta(c, expect)
        out.append({"id": c["id"], "doc": c["doc"], "tags": tags, "ops": ops, "dtypes": dts,
                    "inputs": c["inputs"], "steps": steps, "expect": expect})
    doc = {"format": "strata-conformance", "format_version": 1,
           "torch_version": torch.__version__, "python_version": platform.python_version(),
           "oracle": "PyTorch on the CPU, one thread",
           "generator": "benches/anchors/gen_conformance_masked.py",
           "group": "masked", "split": "project", "count": len(out), "cases": out}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {len(out)} cases to {args.out} ({left_out} left out, see LEFT OUT above)")


if __name__ == "__main__":
    main()
