"""Vector norms of general orders from PyTorch's CPU kernel, for
crates/strata-tensor/tests/suite/pytorch_order_s52.rs (session 52).

    OMP_NUM_THREADS=1 python benches/anchors/gen_norm_order_s52.py N OUT.json.gz

Each case: a random float tensor of `shape` (f32, f64, f16 or bf16), viewed
through `perm` (a permutation: strided inputs) and reduced with
torch.linalg.vector_norm(x, p, dims, keepdim). Values travel as the u64 bits
of their f64 value (exact for every dtype, and for inf)."""
import json
import struct
import sys

import torch
from fixture_io import write_fixture

torch.set_num_threads(1)
DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}
PS = [0.5, 1.5, 3.0, -2.0, -0.5, 2.5, 4.0, -1.0, 0.3, 7.0, -3.0, 1.0 / 3.0, 0.1, 1.25]


def bits(t):
    return [struct.unpack("<Q", struct.pack("<d", v))[0] for v in t.double().flatten().tolist()]



def main():
    n, path = int(sys.argv[1]), sys.argv[2]
    # Optional: a comma-separated list of orders to draw from instead, a
    # seed, and "big" for reductions of up to ~20,000 elements per output.
    ps = [float(v) for v in sys.argv[3].split(",")] if len(sys.argv) > 3 and sys.argv[3] else PS
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 52
    big = len(sys.argv) > 5 and sys.argv[5] == "big"
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        r = lambda k: int(torch.randint(0, k, (1,), generator=g))
        dt = ["f32", "f64", "f16", "bf16"][r(4)]
        nd = 1 + r(4)
        shape = [1 + r((30 if big else 9) if nd > 1 else (20000 if big else 300)) for _ in range(nd)]
        if r(8) == 0:
            shape[r(nd)] = 1
        perm = torch.randperm(nd, generator=g).tolist() if r(2) else list(range(nd))
        x = (torch.randn(shape, generator=g, dtype=torch.float64) * (1 + 4 * r(3))).to(DT[dt])
        if r(6) == 0:
            # Zeros, infinities and NaNs among the values.
            flat = x.view(-1)
            for _ in range(1 + r(3)):
                flat[r(flat.numel())] = [0.0, -0.0, float("inf"), float("-inf"), float("nan")][r(5)]
        v = x.permute(perm)
        # Further views: a stepped slice, a broadcast (stride-0) dim.
        views = []
        big_dims = [k for k in range(v.dim()) if v.shape[k] >= 2]
        if big_dims and r(4) == 0:
            k = big_dims[r(len(big_dims))]
            start, step = r(2), 2 + r(2)
            v = v[(slice(None),) * k + (slice(start, None, step),)]
            views.append(["slice", k, start, step])
        if r(4) == 0:
            k, size = r(v.dim() + 1), 2 + r(3)
            v = v.unsqueeze(k)
            target = list(v.shape)
            target[k] = size
            v = v.expand(target)
            views.append(["expand", k, size])
        nd = v.dim()
        if r(3) == 0:
            dims = None
        else:
            k = 1 + r(nd)
            dims = sorted(torch.randperm(nd, generator=g)[:k].tolist())
            if r(2):
                dims = [d - nd if r(2) else d for d in dims]
        keep = bool(r(2))
        p = ps[r(len(ps))]
        out = torch.linalg.vector_norm(v, p, dims, keep)
        cases.append({"dtype": dt, "shape": shape, "perm": perm, "dims": dims, "keepdim": keep,
                      "views": views, "p": p if abs(p) != float("inf") else str(p), "x": bits(x), "out_shape": list(out.shape), "out": bits(out)})
    write_fixture(path, json.dumps({"torch": torch.__version__, "cases": cases}))


if __name__ == "__main__":
    main()
