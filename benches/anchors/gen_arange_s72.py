#!/usr/bin/env python3
"""Session 72: `arange(start, end, step, dtype)` over a grid of hostile
arguments, as conformance programs (FORMAT.md; group `fuzz_ops`, split
`fuzz`). PyTorch 2.15's arange checks the step (finite, nonzero), the bounds
(finite, their order against the step's sign, compared as f64) and the length
(f64 for every dtype but int64), converts start and step to the dtype's
accumulate type, and refuses bool; each rule has edges where integers above
2^53 round, where f16/bf16 overflow, and where a float argument meets an
integer dtype. A fuzzed `hostile_shapes` program found one such edge
(`fuzz_ops.s7164_hostile_shapes_0061`); this file walks them systematically.

The arguments: integers near 0, 2^31, 2^53, 2^62 and 2^63, floats (halves,
tiny, huge, f16's and f32's largest, infinities, NaN) as start and end;
steps of both signs from 1 to 2^63 - 1, fractional, tiny, huge, zero, NaN
and infinite; every dtype strata has, and none. Half the programs take an
end a few steps from the start (plus or minus one), where the length is
small and rounding decides it. Random draws (seeded, so the file is
reproducible) are kept where PyTorch's result has at most MAX_RESULT
elements (its length is taken on the meta device first) or PyTorch raises;
the error class is "dtype" for bool, else "value". Left out: lengths PyTorch
accepts but cannot store or allocate, int64 lengths PyTorch computes in
arithmetic that wraps, and lengths on which PyTorch dies (`dies`).

Usage (PyTorch on the CPU, one thread):
    OMP_NUM_THREADS=1 python3 benches/anchors/gen_arange_s72.py \\
        [--count 6000] [--seed 72] [--out conformance/arange_s72.json]
"""

import argparse
import json
import math
import platform
import random

import torch

torch.set_num_threads(1)

MAX_RESULT = 4096
DTYPES = {None: None, "i64": torch.int64, "i32": torch.int32, "u8": torch.uint8,
          "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
          "f64": torch.float64, "bool": torch.bool}
NAME = {v: k for k, v in DTYPES.items() if v is not None}
# A length PyTorch accepts but cannot store or allocate: strata fails there
# too, with its own error of another class (storage overflow, out of memory).
OUT_OF_MEMORY = ["Storage size calculation overflowed", "can't allocate memory"]

INTS = [0, 1, -1, 3, 7, -5, 255, 256, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), 2 ** 53, 2 ** 53 + 1,
        2 ** 53 + 2, -(2 ** 53) - 2, 2 ** 62, 2 ** 62 + 2, 2 ** 62 + 4096, -(2 ** 62),
        2 ** 63 - 1, 2 ** 63 - 2, -(2 ** 63), -(2 ** 63) + 1]
FLOATS = [0.5, -0.5, 2.5, -3.75, 1e-50, -1e-50, 1e300, -1e300, 65504.0, 65520.0, -65520.0,
          3.4028234663852886e38, 3.5e38, 1e39, -1e39, 9007199254740992.0, 4.611686018427388e18,
          9.223372036854776e18, math.inf, -math.inf, math.nan]
STEPS_INT = [1, -1, 2, -3, 7, 2 ** 31, 2 ** 53, 2 ** 61, -(2 ** 61), 2 ** 62, 2 ** 63 - 1,
             -(2 ** 63), 0]
STEPS_FLOAT = [0.5, -0.25, 0.1, 1e-300, 1e-5, 1e38, 1e39, -1e39, 2.0 ** 61, math.inf, -math.inf,
               math.nan, 0.0, -0.0]


def scalar(v):
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": v}
    if math.isnan(v):
        return {"float": "nan"}
    if math.isinf(v):
        return {"float": "inf" if v > 0 else "-inf"}
    return {"float": v}


def value(x, dt):
    if dt.is_floating_point:
        f = float(x)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    return int(x)


def dies(s, e, st):
    """PyTorch 2.15 dies of SIGFPE where the f64 length rounds to 2^63: it
    passes the size check (which compares it with INT64_MAX as an f64, also
    2^63) and overflows when converted (`arange(2**63 - 1, -1, -1,
    dtype=torch.uint8)`); strata refuses it as an invalid size. Such
    arguments are left out (also with int64's wrapped difference)."""
    try:
        d = abs((float(e) - float(s)) / float(st))
    except (ZeroDivisionError, OverflowError):
        return False
    if isinstance(s, int) and isinstance(e, int) and isinstance(st, int) and st:
        w = (e - s + 2 ** 63) % 2 ** 64 - 2 ** 63
        d = max(d, abs(w / st))
    return not math.isnan(d) and 2.0 ** 62 <= d < math.inf


def wraps(s, e, st, dn):
    """PyTorch sizes an int64 arange of integers as `(end - start + step -
    sign(step)) / step` in int64 arithmetic that wraps (`arange(-2**63, 7,
    2**62)` is empty); strata counts exactly (conformance/README.md, "Known
    differences: PyTorch's int64 size arithmetic that wraps"). Such
    arguments are left out."""
    ints = all(isinstance(v, int) for v in (s, e, st))
    if not ints or dn not in (None, "i64") or st == 0:
        return False
    d = e - s
    d2 = d + st - (1 if st > 0 else -1)
    return not (-(2 ** 63) <= d < 2 ** 63 and -(2 ** 63) <= d2 < 2 ** 63)


def case(k, s, e, st, dn):
    """One program, or None where PyTorch's result is too large."""
    dt = DTYPES[dn]
    kw = {} if dt is None else {"dtype": dt}
    args = [scalar(s), scalar(e), scalar(st)] + ([] if dn is None else [dn])
    step = {"op": "arange", "args": args}
    base = {"id": "fuzz_ops.s72_arange_%04d" % k,
            "doc": "arange(%r, %r, %r%s)" % (s, e, st, "" if dn is None else ", " + dn),
            "inputs": [], "steps": [step], "expect": {}}
    if dies(s, e, st):
        return None
    try:
        n = torch.arange(s, e, st, device="meta", **kw).numel()
    except (RuntimeError, ValueError, OverflowError, TypeError):
        n = 0
    if n > MAX_RESULT:
        return None
    if wraps(s, e, st, dn):
        return None
    try:
        r = torch.arange(s, e, st, **kw)
    except (RuntimeError, ValueError, OverflowError, TypeError) as err:
        msg = str(err).split("\n")[0]
        if any(m in msg for m in OUT_OF_MEMORY):
            return None
        step["error"] = "dtype" if "not implemented for 'Bool'" in msg else "value"
        step["torch_message"] = msg
        return {**base, "tags": ["error"], "ops": ["arange"], "dtypes": []}
    if r.numel() > MAX_RESULT:
        return None
    step["out"] = "r1"
    base["expect"]["r1"] = {"shape": list(r.shape), "dtype": NAME[r.dtype],
                            "data": [value(x, r.dtype) for x in r.tolist()],
                            "strides": list(r.stride()), "offset": 0, "contiguous": True,
                            "storage": "r1", "layout": "checked"}
    return {**base, "tags": ["empty"] if r.numel() == 0 else [], "ops": ["arange"],
            "dtypes": [NAME[r.dtype]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=72)
    ap.add_argument("--out", default="/tmp/arange_s72.json")
    a = ap.parse_args()
    r = random.Random(a.seed)
    bounds = INTS + FLOATS
    cases, skipped = [], 0
    while len(cases) < a.count:
        s, e, st, dn = (r.choice(bounds), r.choice(bounds), r.choice(STEPS_INT + STEPS_FLOAT),
                        r.choice(list(DTYPES)))
        if r.random() < 0.5:
            # An end a few steps from the start (plus or minus one now and
            # then), where the length is small and the rounding decides it.
            try:
                e = s + r.randrange(0, 6) * st + r.choice([0, 0, 1, -1])
            except (OverflowError, ValueError):
                pass
            if isinstance(e, int) and not -(2 ** 63) <= e < 2 ** 63:
                continue
            if isinstance(e, float) and math.isnan(e) and not math.isnan(s):
                continue
        c = case(len(cases), s, e, st, dn)
        if c is None:
            skipped += 1
        else:
            cases.append(c)
    out = {"format": "strata-conformance", "format_version": 1,
           "torch_version": torch.__version__, "python_version": platform.python_version(),
           "oracle": "PyTorch on the CPU, one thread",
           "generator": "benches/anchors/gen_arange_s72.py --count %d --seed %d" % (a.count, a.seed),
           "group": "fuzz_ops", "split": "fuzz", "count": len(cases), "cases": cases}
    with open(a.out, "w") as f:
        json.dump(out, f)
    errors = sum(1 for c in cases if "error" in c["steps"][0])
    print("%d programs (%d errors), %d draws left out (see the docstring) -> %s"
          % (len(cases), errors, skipped, a.out))


if __name__ == "__main__":
    main()
