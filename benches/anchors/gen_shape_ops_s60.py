#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread) for
crates/strata-tensor/tests/suite/shape_ops.rs, written to
crates/strata-tensor/tests/data/shape_ops_s60.json.gz: flip, roll, repeat,
tile, repeat_interleave, F.pad (constant, reflect, replicate, circular) and
torch.clamp with tensor bounds, on random shapes, dtypes and views
(transposed, stepped, offset, expanded) of a base storage holding distinct
values, plus hand-picked edge cases and errors.

Each case: the input as a view (dtype, base length, size, stride, offset)
of `arange(base)` converted to the dtype (bool: odd values), the op and its
arguments, then PyTorch's result (shape, strides, values row-major) or its
error, classed by its message (shape, dim, value, dtype, broadcast,
overflow).

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_shape_ops_s60.py \\
        crates/strata-tensor/tests/data/shape_ops_s60.json.gz
"""
import json
import math
import random
import sys

import torch
import torch.nn.functional as F

from fixture_io import write_fixture

torch.set_num_threads(1)
DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "bool": torch.bool}


def classify(msg):
    rules = [
        ("negative dimension", "value"),
        ("Repeats must be non-negative", "value"),
        ("repeats can not be negative", "value"),
        ("Padding size should be less than", "value"),
        ("wrapping around more than once", "value"),
        ("refer to a single memory location", "value"),
        ("cannot be converted to type", "value"),
        ("At least one of 'min' or 'max'", "value"),
        ("`shifts` required", "value"),
        ("appears multiple times", "dim"),
        ("Dimension out of range", "dim"),
        ("tensor has no dimensions", "dim"),
        ("not implemented for", "dtype"),
        ("can't be cast to the desired output type", "dtype"),
        ("doesn't match the broadcast shape", "broadcast"),
        ("must match the size of tensor", "broadcast"),
        ("overflow", "overflow"),
        ("cannot be represented as a SymInt", "overflow"),
        ("negative output size", "overflow"),
        ("Padding length", "shape"),
        ("is not supported for", "shape"),
        ("Expected 2D or 3D", "shape"),
        ("Expected 3D or 4D", "shape"),
        ("Expected 4D or 5D", "shape"),
        ("is too small", "shape"),
        ("must be >= 1 in every dimension", "shape"),
        ("Argument #", "value"),
        ("Negative padding value", "shape"),
        ("narrow(): length must be non-negative", "shape"),
        ("Input must be >= ", "shape"),
        ("shifts and dimensions must align", "shape"),
        ("Number of dimensions of repeat dims", "shape"),
        ("repeats must have the same size", "shape"),
        ("repeats must be 0-dim or 1-dim", "shape"),
    ]
    for k, c in rules:
        if k in msg:
            return c
    raise SystemExit(f"unclassified: {msg}")


def enc(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v


def base_tensor(dt, n):
    b = torch.arange(n, dtype=torch.float64)
    if dt == "bool":
        return (b.long() % 3 == 1)
    if dt in ("u8",):
        b = b % 256
    if dt in ("f16", "bf16", "f32", "f64"):
        b = b - n // 2
    return b.to(DT[dt])


def view_spec(rng, dt, nd, max_size=4):
    shape = [rng.randint(0, max_size) if rng.random() < 0.08 else rng.randint(1, max_size) for _ in range(nd)]
    order = list(range(nd))
    kind = rng.choice(["contig", "contig", "perm", "step", "expand"])
    if kind == "perm":
        rng.shuffle(order)
    steps = [1] * nd
    if kind == "step":
        steps = [rng.choice([1, 2]) for _ in range(nd)]
    strides = [0] * nd
    acc = 1
    for d in reversed(order):
        strides[d] = acc * steps[d]
        acc *= max(shape[d], 1) * steps[d]
    if kind == "expand" and nd > 0:
        d = rng.randrange(nd)
        strides[d] = 0
    offset = rng.choice([0, 0, 1, 3])
    extent = offset + sum((s - 1) * st for s, st in zip(shape, strides) if s > 0) + 1
    return {"dtype": dt, "base": max(extent, 1), "size": shape, "stride": strides, "offset": offset}


def make(spec):
    b = base_tensor(spec["dtype"], spec["base"])
    return b.as_strided(spec["size"], spec["stride"], spec["offset"])


def result(r):
    vals = r.flatten().tolist()
    if r.dtype == torch.bool:
        vals = [1 if v else 0 for v in vals]
    return {"shape": list(r.shape), "stride": list(r.stride()), "values": [enc(float(v)) if isinstance(v, float) else v for v in vals]}


def run(case):
    x = make(case["x"])
    op, a = case["op"], case["args"]
    if op == "flip":
        return torch.flip(x, a["dims"])
    if op == "fliplr":
        return torch.fliplr(x)
    if op == "flipud":
        return torch.flipud(x)
    if op == "roll":
        return torch.roll(x, a["shifts"], a["dims"])
    if op == "repeat":
        return x.repeat(*a["sizes"]) if a["sizes"] else x.repeat(torch.Size([]))
    if op == "tile":
        return torch.tile(x, tuple(a["reps"]))
    if op == "repeat_interleave":
        r = a["repeats"]
        if isinstance(r, dict):
            r = torch.tensor(r["values"], dtype=DT[r["dtype"]]).reshape(r["shape"])
        return torch.repeat_interleave(x, r, dim=a["dim"])
    if op == "pad":
        mode = a["mode"]
        if mode == "constant":
            v = a["value"]
            return F.pad(x, a["pad"], mode="constant", value=v)
        return F.pad(x, a["pad"], mode=mode)
    raise SystemExit(op)


def wraps_twice(case):
    """Circular padding whose pad exceeds the elements left between the
    crops: PyTorch copies it from output elements it has not written
    (uninitialised memory, or its overlap error). strata refuses it (a value
    error), so the case expects that instead of PyTorch's garbage."""
    a = case["args"]
    if case["op"] != "pad" or a["mode"] != "circular":
        return False
    size, pad = case["x"]["size"], a["pad"]
    for i in range(len(pad) // 2):
        n = size[len(size) - 1 - i]
        l, r = pad[2 * i], pad[2 * i + 1]
        w = n + min(l, 0) + min(r, 0)
        if l > w or r > w:
            return True
    return False


def record(cases, case):
    try:
        case["ok"] = result(run(case))
        if wraps_twice(case):
            del case["ok"]
            case["err"] = "value"
            case["note"] = "PyTorch reads uninitialised elements here"
    except Exception as e:  # PyTorch's errors, classed
        case["err"] = classify(str(e))
    cases.append(case)


def main():
    rng = random.Random(6060)
    cases = []
    dts = list(DT)
    for i in range(700):
        dt = rng.choice(dts)
        nd = rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5])
        x = view_spec(rng, dt, nd)
        op = rng.choice(["flip", "roll", "repeat", "tile", "ri", "ri_t", "pad_c", "pad_m", "fliplr", "flipud"])
        args = {}
        if op == "flip":
            k = rng.randint(0, nd) if nd else rng.randint(0, 1)
            dims = rng.sample(range(-max(nd, 1), max(nd, 1)), k) if rng.random() < 0.9 else [0, 0]
            if nd and rng.random() < 0.1:
                dims = [nd]
            args = {"dims": [d for d in dims]}
        elif op == "roll":
            if rng.random() < 0.3:
                args = {"shifts": [rng.randint(-9, 9)], "dims": []}
            else:
                k = rng.randint(1, max(nd, 1))
                dims = [rng.randint(-max(nd, 1), max(nd, 1) - 1) for _ in range(k)]
                args = {"shifts": [rng.randint(-9, 9) for _ in range(k)], "dims": dims}
                if rng.random() < 0.1:
                    args["shifts"] = args["shifts"][:-1] or [1, 2]
        elif op in ("repeat", "tile"):
            k = nd + rng.choice([0, 0, 1, 2]) - (1 if (op == "tile" or rng.random() < 0.05) and nd else 0)
            sizes = [rng.choice([0, 1, 1, 2, 3]) for _ in range(max(k, 0))]
            if rng.random() < 0.05 and sizes:
                sizes[0] = -1
            args = {"sizes": sizes} if op == "repeat" else {"reps": sizes}
        elif op == "ri":
            dim = None if rng.random() < 0.3 else rng.randint(-max(nd, 1), max(nd, 1) - 1)
            args = {"repeats": rng.choice([0, 1, 2, 3]), "dim": dim}
            op = "repeat_interleave"
        elif op == "ri_t":
            dim = None if rng.random() < 0.3 else rng.randint(-max(nd, 1), max(nd, 1) - 1)
            n = 1
            xs = x["size"]
            if dim is None:
                n = 1
                for s in xs:
                    n *= s
            elif nd:
                n = xs[dim]
            form = rng.choice(["full", "full", "one", "zero_d", "bad"])
            if form == "full":
                vals, shape = [rng.randint(0, 3) for _ in range(n)], [n]
            elif form == "one":
                vals, shape = [rng.randint(0, 3)], [1]
            elif form == "zero_d":
                vals, shape = [rng.randint(0, 3)], []
            else:
                vals, shape = [rng.randint(0, 3) for _ in range(n + 1)], [n + 1]
            if rng.random() < 0.05 and vals:
                vals[0] = -1
            args = {"repeats": {"values": vals, "shape": shape, "dtype": rng.choice(["i64", "i32", "u8"])}, "dim": dim}
            op = "repeat_interleave"
        elif op == "pad_c":
            k = rng.randint(0, nd)
            pad = [rng.randint(-2, 3) for _ in range(2 * k)]
            if rng.random() < 0.05:
                pad = pad + [1]
            value = rng.choice([0, 1.5, -2, 7, float("nan")]) if dt in ("f32", "f64", "f16", "bf16") else rng.choice([0, 1, 5])
            args = {"pad": pad, "mode": "constant", "value": value}
            op = "pad"
        elif op == "pad_m":
            mode = rng.choice(["reflect", "replicate", "circular"])
            k = rng.randint(1, 3)
            pad = [rng.randint(-2, 4) for _ in range(2 * k)]
            args = {"pad": pad, "mode": mode}
            op = "pad"
            if rng.random() < 0.7:
                # Inputs of a rank the mode takes, sized 1-5.
                nd2 = k + rng.choice([1, 2])
                x = view_spec(rng, dt, nd2, 5)
        case = {"x": x, "op": op, "args": args}
        record(cases, case)

    # Larger inputs: rows past the CPU kernel's row table, several tasks.
    for (dt, size, op, args) in [
        ("f32", [3, 70000], "flip", {"dims": [1]}),
        ("f64", [70001], "roll", {"shifts": [12345], "dims": [0]}),
        ("f16", [2, 40000], "repeat", {"sizes": [2, 2]}),
        ("i64", [70000, 2], "pad", {"pad": [1, 1, 2, 3], "mode": "constant", "value": 9}),
        ("f32", [2, 3, 70000], "pad", {"pad": [3, 2], "mode": "reflect"}),
        ("u8", [1, 2, 65537], "pad", {"pad": [4, 5], "mode": "circular"}),
        ("bf16", [1, 3, 66000], "pad", {"pad": [7, 1], "mode": "replicate"}),
        ("i32", [7, 9000], "repeat_interleave", {"repeats": 3, "dim": 1}),
    ]:
        n = 1
        for s in size:
            n *= s
        x = {"dtype": dt, "base": n, "size": size, "stride": [0] * len(size), "offset": 0}
        acc = 1
        for d in reversed(range(len(size))):
            x["stride"][d] = acc
            acc *= size[d]
        case = {"x": x, "op": op, "args": args}
        try:
            r = run(case)
            # Only a checksum-free sample: every 97th value and the shape.
            flat = r.flatten()
            idx = list(range(0, flat.numel(), 97)) + [flat.numel() - 1]
            vals = flat[idx].double().tolist()
            case["ok"] = {"shape": list(r.shape), "stride": list(r.stride()), "sample": idx, "values": vals}
        except Exception as e:
            case["err"] = classify(str(e))
        cases.append(case)

    # Edge cases and errors picked by hand.
    def spec(dt, size, stride=None, offset=0):
        if stride is None:
            stride = [0] * len(size)
            acc = 1
            for d in reversed(range(len(size))):
                stride[d] = acc
                acc *= max(size[d], 1)
        n = offset + sum((s - 1) * st for s, st in zip(size, stride) if s > 0) + 1
        return {"dtype": dt, "base": max(n, 1), "size": size, "stride": stride, "offset": offset}
    hand = [
        (spec("f32", [2, 3]), "flip", {"dims": [0, 0]}),
        (spec("f32", [2, 3]), "flip", {"dims": [2]}),
        (spec("f32", []), "flip", {"dims": [0]}),
        (spec("f32", []), "flip", {"dims": [-1]}),
        (spec("f32", [3, 0], [1, 3]), "flip", {"dims": [0]}),
        (spec("f32", [3]), "fliplr", {}),
        (spec("f32", []), "flipud", {}),
        (spec("f32", [2, 3]), "roll", {"shifts": [1], "dims": [0, 1]}),
        (spec("f32", [2, 3]), "roll", {"shifts": [], "dims": []}),
        (spec("f32", [2, 3]), "roll", {"shifts": [1, 2], "dims": []}),
        (spec("f32", []), "roll", {"shifts": [1], "dims": [0]}),
        (spec("f32", []), "roll", {"shifts": [3], "dims": []}),
        (spec("f32", [2, 3]), "roll", {"shifts": [2 ** 62, -(2 ** 62)], "dims": [1, 0]}),
        (spec("f32", [2, 3]), "roll", {"shifts": [1, 1], "dims": [0, 0]}),
        (spec("f32", [0, 3]), "roll", {"shifts": [1], "dims": [0]}),
        (spec("f32", [2, 3]), "repeat", {"sizes": [2]}),
        (spec("f32", [2, 3]), "repeat", {"sizes": [-1, 1]}),
        (spec("f32", [2, 3]), "repeat", {"sizes": [2 ** 40, 2 ** 40]}),
        (spec("f32", []), "repeat", {"sizes": []}),
        (spec("f32", []), "repeat", {"sizes": [2, 3]}),
        (spec("f32", [2, 3]), "tile", {"reps": []}),
        (spec("f32", [2, 3]), "repeat_interleave", {"repeats": 2 ** 62, "dim": 0}),
        (spec("f32", []), "repeat_interleave", {"repeats": 3, "dim": None}),
        (spec("f32", []), "repeat_interleave", {"repeats": 3, "dim": 0}),
        (spec("f32", [2, 3]), "repeat_interleave", {"repeats": {"values": [1.0, 2.0], "shape": [2], "dtype": "f32"}, "dim": 0}),
        (spec("f32", [2, 3]), "repeat_interleave", {"repeats": {"values": [1, 2], "shape": [1, 2], "dtype": "i64"}, "dim": 0}),
        (spec("f32", [2, 3]), "repeat_interleave", {"repeats": {"values": [1, 2], "shape": [2], "dtype": "bool"}, "dim": 0}),
        (spec("f32", [2, 3]), "repeat_interleave", {"repeats": {"values": [1, -2], "shape": [2], "dtype": "i64"}, "dim": 0}),
        (spec("f32", [0, 2]), "repeat_interleave", {"repeats": {"values": [], "shape": [0], "dtype": "i64"}, "dim": 0}),
        (spec("f32", [2, 3]), "pad", {"pad": [1], "mode": "constant", "value": 0}),
        (spec("f32", [2, 3]), "pad", {"pad": [1, 1, 1, 1, 1, 1], "mode": "constant", "value": 0}),
        (spec("f32", [2, 3]), "pad", {"pad": [-2, -2], "mode": "constant", "value": 0}),
        (spec("f32", [2, 3]), "pad", {"pad": [-3, 0], "mode": "constant", "value": 0}),
        (spec("f32", [2, 3]), "pad", {"pad": [-4, 5], "mode": "constant", "value": 0}),
        (spec("f32", [2, 3]), "pad", {"pad": [2 ** 62, 2 ** 62], "mode": "constant", "value": 0}),
        (spec("u8", [2, 3]), "pad", {"pad": [1, 1], "mode": "constant", "value": -1}),
        (spec("f16", [2, 3]), "pad", {"pad": [1, 1], "mode": "constant", "value": 1e6}),
        (spec("f16", [2, 3]), "pad", {"pad": [-1, 0], "mode": "constant", "value": 1e6}),
        (spec("bool", [2, 3]), "pad", {"pad": [1, 1], "mode": "constant", "value": 2}),
        (spec("i64", [2, 3]), "pad", {"pad": [1, 1], "mode": "constant", "value": 2 ** 40}),
        (spec("f32", [2, 0]), "pad", {"pad": [1, 1], "mode": "constant", "value": 3}),
        (spec("f32", [0, 2]), "pad", {"pad": [1, 1, 1, 1], "mode": "constant", "value": 3}),
        (spec("f32", []), "pad", {"pad": [], "mode": "constant", "value": 0}),
        (spec("f32", [3, 4], [1, 3]), "pad", {"pad": [-1, 0], "mode": "constant", "value": 0}),
        (spec("f32", [3, 4], [1, 3]), "pad", {"pad": [0, 0, 0, 0], "mode": "constant", "value": 0}),
        (spec("f32", [2, 3, 4, 5], [60, 1, 15, 3]), "pad", {"pad": [1, 1], "mode": "constant", "value": 0}),
        (spec("f32", [4]), "pad", {"pad": [1, 1], "mode": "reflect"}),
        (spec("f32", [1, 4]), "pad", {"pad": [4, 0], "mode": "reflect"}),
        (spec("f32", [1, 4]), "pad", {"pad": [-4, 0], "mode": "reflect"}),
        (spec("f32", [1, 4]), "pad", {"pad": [-5, 3], "mode": "reflect"}),
        (spec("f32", [1, 0]), "pad", {"pad": [1, 1], "mode": "reflect"}),
        (spec("f32", [0, 3, 4]), "pad", {"pad": [1, 1], "mode": "reflect"}),
        (spec("f32", [2, 0, 4]), "pad", {"pad": [1, 1], "mode": "replicate"}),
        (spec("f32", [2, 0, 4]), "pad", {"pad": [1, 1], "mode": "circular"}),
        (spec("bool", [1, 3, 4]), "pad", {"pad": [1, 1], "mode": "reflect"}),
        (spec("bool", [1, 3, 4]), "pad", {"pad": [1, 1], "mode": "replicate"}),
        (spec("bool", [1, 3, 4]), "pad", {"pad": [1, 1], "mode": "circular"}),
        (spec("f32", [1, 4]), "pad", {"pad": [5, 0], "mode": "circular"}),
        (spec("f32", [1, 4]), "pad", {"pad": [4, -2], "mode": "circular"}),
        (spec("f32", [1, 4]), "pad", {"pad": [-3, -2], "mode": "circular"}),
        (spec("f32", [1, 4]), "pad", {"pad": [-2, -2], "mode": "circular"}),
        (spec("f32", [1, 4]), "pad", {"pad": [4, 4], "mode": "circular"}),
        (spec("f32", [1, 4]), "pad", {"pad": [-1, 2], "mode": "circular"}),
        (spec("f32", [1, 4]), "pad", {"pad": [-5, 2], "mode": "replicate"}),
        (spec("f32", [1, 4]), "pad", {"pad": [-4, 0], "mode": "replicate"}),
        (spec("f32", [1, 1, 1, 2, 3, 4]), "pad", {"pad": [1, 1], "mode": "circular"}),
        (spec("f32", [1, 2, 3, 4]), "pad", {"pad": [1, 1, 1, 1, 1, 1], "mode": "reflect"}),
        (spec("f32", [1, 1, 2, 3, 4]), "pad", {"pad": [1, 1, 1, 1, 1, 1], "mode": "circular"}),
        (spec("f32", [2, 3]), "pad", {"pad": [0, 0], "mode": "reflect"}),
    ]
    for x, op, args in hand:
        case = {"x": x, "op": op, "args": args}
        if op == "repeat_interleave" and isinstance(args["repeats"], dict) and args["repeats"]["dtype"] == "bool":
            args["repeats"]["values"] = [bool(v) for v in args["repeats"]["values"]]
        record(cases, case)

    # clamp with tensor bounds: operands given by value.
    nan, inf = float("nan"), float("inf")
    clamp_cases = []
    vals_f = [-2.0, 0.0, -0.0, 1.0, 5.0, nan, inf, -inf, 0.5, 3.0]
    for i in range(160):
        dts = [rng.choice(["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"]) for _ in range(3)]
        shapes = []
        for _ in range(3):
            nd = rng.choice([0, 1, 1, 2])
            shapes.append([rng.choice([1, 3]) for _ in range(nd)] if nd else [])
        ops = []
        for dt, sh in zip(dts, shapes):
            n = 1
            for s in sh:
                n *= s
            if dt == "bool":
                v = [rng.choice([0, 1]) for _ in range(n)]
            elif dt in ("i32", "i64"):
                v = [rng.randint(-3, 6) for _ in range(n)]
            elif dt == "u8":
                v = [rng.randint(0, 6) for _ in range(n)]
            else:
                v = [rng.choice(vals_f) for _ in range(n)]
            ops.append({"dtype": dt, "shape": sh, "values": v})
        which = rng.choice(["both", "min", "max"])
        inplace = rng.random() < 0.25
        clamp_cases.append({"x": ops[0], "min": ops[1] if which != "max" else None,
                            "max": ops[2] if which != "min" else None, "inplace": inplace})
    clamp_cases.append({"x": {"dtype": "f32", "shape": [2], "values": [1.0, 2.0]}, "min": None, "max": None, "inplace": False})
    out = []
    for c in clamp_cases:
        def mk(o):
            if o is None:
                return None
            vals = o["values"]
            if o["dtype"] == "bool":
                vals = [bool(v) for v in vals]
            return torch.tensor(vals, dtype=DT[o["dtype"]]).reshape(o["shape"])
        x, lo, hi = mk(c["x"]), mk(c["min"]), mk(c["max"])
        try:
            r = x.clamp_(lo, hi) if c["inplace"] else torch.clamp(x, lo, hi)
            c["ok"] = result(r)
            c["ok"]["dtype"] = str(r.dtype).replace("torch.", "")
        except Exception as e:
            c["err"] = classify(str(e))
        for k in ("x", "min", "max"):
            if c[k] is not None:
                c[k]["values"] = [enc(v) for v in c[k]["values"]]
        out.append(c)

    for c in cases:
        if "ok" in c and "values" in c["ok"]:
            c["ok"]["values"] = [enc(v) for v in c["ok"]["values"]]
        if c["op"] == "pad" and c["args"]["mode"] == "constant":
            c["args"]["value"] = enc(c["args"]["value"])
    write_fixture(sys.argv[1], json.dumps({"cases": cases, "clamp": out}, separators=(",", ":")))
    print(len(cases), "cases,", len(out), "clamp cases;",
          sum("err" in c for c in cases), "errors")


if __name__ == "__main__":
    main()
