#!/usr/bin/env python3
"""PyTorch 2.15's CPU exact F.gelu of f16 and bf16 tensors (one thread,
AVX2) on layouts that send elements to its scalar loop, for
crates/strata-tensor/tests/suite/gelu_half_s54d.rs, written to
crates/strata-tensor/tests/data/gelu_half_s54d.json.gz.

GeluKernelImpl runs through cpu_kernel_vec: its vectorised loop
(Vectorized<float>::erf) takes whole chunks of 32 elements (two 16-lane
vectors) of each inner row of TensorIterator, its scalar functor
(float(x) * 0.5f * (1 + std::erf(float(x) * M_SQRT1_2))) the rest, and
every element when the input is not contiguous along the inner dim.

"cases": inputs as bit patterns of a base storage ("base", 4 hex digits
each) viewed with "size", "stride", "offset"; "out" the result's bit
patterns in row-major order, "strides" its strides. Values are drawn from
those where PyTorch's two loops differ ("hard") and a fixed pseudo-random
set. "all": for each dtype, every bit pattern (0..65535) as one contiguous
tensor and as one stepped view (x[::2] of a doubled storage: every element
the scalar loop's), each result's FNV-1a 64 hash over its bit patterns
(little-endian u16, every NaN as 0x7e00 f16 / 0x7fc0 bf16), and the
patterns where the two results differ with both values.

Usage:
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_gelu_half_s54d.py \\
        crates/strata-tensor/tests/data/gelu_half_s54d.json.gz
"""
import json
import sys

import torch
import torch.nn.functional as F

from fixture_io import write_fixture
from half_patterns import DT, bits, every_pattern, hexs


def main():
    torch.set_num_threads(1)
    out = {"torch": torch.__version__, "cases": [], "all": {}}
    for dt in ("f16", "bf16"):
        out["all"][dt], differ = every_pattern(dt, F.gelu)
        # Base values: the hard patterns interleaved with pseudo-random ones.
        g = torch.Generator().manual_seed(54 if dt == "f16" else 55)
        rnd = (torch.randn(4096, generator=g) * 3).to(DT[dt])
        hard = torch.tensor(differ, dtype=torch.int32).to(torch.int16).view(DT[dt])
        n = 4096
        base = rnd.clone()
        idx = torch.randperm(n, generator=g)[: n // 2]
        base[idx] = hard[torch.arange(n // 2) % hard.numel()]

        def add(name, size, stride, offset=0):
            x = base.as_strided(size, stride, offset)
            y = F.gelu(x)
            vec = F.gelu(torch.cat([x.reshape(-1), torch.zeros(32, dtype=x.dtype)]))[: x.numel()]
            extent = offset + 1 + sum((a - 1) * b for a, b in zip(size, stride)) if x.numel() else offset
            out["cases"].append({
                "name": f"{dt} {name}", "dtype": dt, "base": hexs(bits(base[:extent])),
                "size": list(size), "stride": list(stride), "offset": offset,
                "out": hexs(bits(y)), "strides": list(y.stride()),
                "vec_differs": bits(vec) != bits(y),
            })

        for L in (0, 1, 2, 31, 32, 33, 63, 64, 65, 95, 1000):
            add(f"len {L}", (L,), (1,))
        add("0-d", (), ())
        add("offset 7 len 65", (65,), (1,), 7)
        for r, c_ in [(3, 31), (3, 32), (2, 33), (4, 65), (33, 3), (5, 1), (1, 33), (31, 31)]:
            add(f"{r}x{c_}", (r, c_), (c_, 1))
            add(f"{r}x{c_} transposed", (c_, r), (1, c_))
        # Rows cut out of a wider matrix: inner rows of 31, 33, 32 not coalesced.
        for w, c_, o in [(40, 31, 0), (40, 33, 1), (40, 32, 3), (64, 63, 0), (34, 33, 1)]:
            add(f"4x{c_} of width {w} at {o}", (4, c_), (w, 1), o)
            add(f"4x{c_} of width {w} at {o} transposed", (c_, 4), (1, w), o)
        add("stepped 1-D", (65,), (2,))
        add("stepped columns", (3, 40), (80, 2))
        add("stepped rows", (3, 33), (66, 1))
        add("3-D permuted", (5, 33, 2), (1, 10, 5))
        add("3-D mixed", (2, 33, 3), (200, 3, 1), 1)
        add("expanded", (65,), (0,), 5)
        add("expanded rows", (3, 40), (0, 1))
        add("expanded columns", (40, 3), (1, 0))
        add("size-1 odd strides", (1, 33, 1), (7, 1, 5))
    write_fixture(sys.argv[1], json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
