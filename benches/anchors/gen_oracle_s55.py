#!/usr/bin/env python3
"""PyTorch 2.15's CPU answers (one thread, AVX2) for the disagreements the
session-55 conformance sweep found, for
crates/strata-tensor/tests/suite/oracle_s55.rs, written to
crates/strata-tensor/tests/data/oracle_s55.json.gz.

"rsqrt": f16/bf16 torch.rsqrt and Tensor.rsqrt_ by layout. rsqrt_kernel
runs through cpu_kernel_vec: its vectorised loop (Vectorized<Half/BFloat16>
::rsqrt, 1 / sqrt(x) in f32, rounded once) takes whole chunks of 32
elements of each inner row of TensorIterator, its scalar functor
(static_cast<scalar_t>(1) / std::sqrt(x), the square root rounded to the
dtype first) the rest, and every element of a row the input is not
contiguous along (fuzz_ops s3303_unary_0574: bf16 rsqrt(0.0009994) is 31.75,
not 31.625). Each case: the input as bit patterns of a base storage
("base", 4 hex digits each) viewed with "size", "stride", "offset"; "out"
the result's bit patterns in row-major order, "strides" its strides;
"inplace" the input's bit patterns after x.rsqrt_() on a copy of the base.
"inplace_order": see inplace_order_cases.

"rsqrt_all": for each dtype, every bit pattern as one contiguous tensor and
as one stepped view (x[::2] of a doubled storage: every element the scalar
functor's), each result's FNV-1a 64 hash over its bit patterns
(little-endian u16, every NaN as 0x7e00 f16 / 0x7fc0 bf16), and the
patterns where the two results differ with both values.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_oracle_s55.py \\
        crates/strata-tensor/tests/data/oracle_s55.json.gz
"""
import json
import sys

import torch

from fixture_io import write_fixture
from half_patterns import DT, bits, every_pattern, hexs


def rsqrt_cases(out):
    out["rsqrt"] = []
    out["rsqrt_all"] = {}
    for dt in ("f16", "bf16"):
        out["rsqrt_all"][dt], differ = every_pattern(dt, torch.rsqrt)
        # Base values: the patterns where the two loops differ interleaved
        # with positive pseudo-random ones (and a few specials).
        g = torch.Generator().manual_seed(3303 if dt == "f16" else 3304)
        n = 4096
        base = (torch.rand(n, generator=g) * 8).to(DT[dt])
        hard = torch.tensor(differ, dtype=torch.int32).to(torch.int16).view(DT[dt])
        idx = torch.randperm(n, generator=g)[: n // 2]
        base[idx] = hard[torch.randperm(hard.numel(), generator=g)[: n // 2] % hard.numel()]
        base[:6] = torch.tensor([0.0, -0.0, float("inf"), float("nan"), -1.0, 1e-7]).to(DT[dt])

        def add(name, size, stride, offset=0):
            x = base.as_strided(size, stride, offset)
            y = torch.rsqrt(x)
            b2 = base.clone()
            x2 = b2.as_strided(size, stride, offset)
            inplace = None
            if all(st != 0 or sz <= 1 for st, sz in zip(stride, size)):
                x2.rsqrt_()
                inplace = hexs(bits(x2))
            extent = offset + 1 + sum((a - 1) * b for a, b in zip(size, stride)) if x.numel() else offset
            out["rsqrt"].append({
                "name": f"{dt} {name}", "dtype": dt, "base": hexs(bits(base[:extent])),
                "size": list(size), "stride": list(stride), "offset": offset,
                "out": hexs(bits(y)), "strides": list(y.stride()), "inplace": inplace,
            })

        for L in (0, 1, 2, 31, 32, 33, 63, 64, 65, 95, 1000):
            add(f"len {L}", (L,), (1,))
        add("0-d", (), ())
        add("offset 7 len 65", (65,), (1,), 7)
        for r, c_ in [(3, 31), (3, 32), (2, 33), (4, 65), (33, 3), (5, 1), (1, 33), (31, 31)]:
            add(f"{r}x{c_}", (r, c_), (c_, 1))
            add(f"{r}x{c_} transposed", (c_, r), (1, c_))
        for w, c_, o in [(40, 31, 0), (40, 33, 1), (64, 63, 0), (34, 33, 1)]:
            add(f"4x{c_} of width {w} at {o}", (4, c_), (w, 1), o)
            add(f"4x{c_} of width {w} at {o} transposed", (c_, 4), (1, w), o)
        add("stepped 1-D", (65,), (2,))
        add("stepped rows", (3, 33), (66, 1))
        add("3-D permuted", (5, 33, 2), (1, 10, 5))
        add("3x3x3 transposed (s3303_unary_0574)", (3, 3, 3), (9, 1, 3))
        add("expanded", (65,), (0,), 5)
        add("expanded rows", (3, 40), (0, 1))


def error_class(msg):
    """PyTorch's message -> FORMAT.md section 6 class (only those met here)."""
    if "more than one element of the written-to tensor" in msg:
        return "overlap"
    if ("not implemented for" in msg or "not supported" in msg
            or "can't be cast to the desired output type" in msg):
        return "dtype"
    return "?" + msg


def inplace_order_cases(out):
    """In-place unary ops that PyTorch rejects for a dtype, on an expanded
    tensor (every element one memory location) and on a plain one: which
    error comes first. neg_ and relu_ check the dtype on entry; abs_ of
    bool and silu_ of integers only in the kernel, after TensorIterator's
    overlap check (fuzz_ops s3310o_half_layout_0131: strata reported the
    dtype for abs_ of an expanded bool tensor)."""
    import torch.nn.functional as F
    ops = {"abs_": lambda x: x.abs_(), "neg_": lambda x: x.neg_(),
           "relu_": lambda x: x.relu_(), "silu_": lambda x: F.silu(x, inplace=True),
           "sign_": lambda x: x.sign_(), "sqrt_": lambda x: x.sqrt_(),
           "exp_": lambda x: x.exp_(), "sigmoid_": lambda x: x.sigmoid_()}
    out["inplace_order"] = []
    for name, f in ops.items():
        for dt in ("bool", "i32", "f32"):
            for expanded in (True, False):
                v = {"bool": True, "i32": 2, "f32": 2.0}[dt]
                x = torch.tensor([v], dtype={"bool": torch.bool, "i32": torch.int32,
                                             "f32": torch.float32}[dt])
                x = x.expand(3) if expanded else x.repeat(3)
                try:
                    f(x)
                    res = "ok"
                except RuntimeError as e:
                    res = error_class(str(e).split("\n")[0])
                out["inplace_order"].append({"op": name, "dtype": dt, "expanded": expanded,
                                             "result": res})


def main():
    torch.set_num_threads(1)
    out = {"torch": torch.__version__}
    rsqrt_cases(out)
    inplace_order_cases(out)
    write_fixture(sys.argv[1], json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
