"""Random hostile calls of torch.linalg.vector_norm, for
crates/strata-tensor/tests/suite/hostile_sweep_s53.rs's
`vector_norm_random_calls_match_pytorch` (session 53).

    OMP_NUM_THREADS=1 python benches/anchors/gen_vector_norm_hostile_s53.py N SEED OUT.json

Each case: a tensor (f32, f64, f16, bf16, i64 or bool; 0-d, empty or small,
values with zeros, infinities and NaNs) given as `shape` and the u64 bits of
its f64 values, an order `p` (finite, 0, +-0.5, NaN, +-inf, as a number or
the strings "nan", "inf", "-inf"), `dims` (null, empty, or a list that may
repeat a dim or leave the range) and `keepdim`. PyTorch's answer: `error`
(the exception's class name) or `out_shape` and `out` (bits)."""
import json
import math
import struct
import sys

import torch

torch.set_num_threads(1)
DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
      "i64": torch.int64, "bool": torch.bool}


def bits(v):
    return struct.unpack("<Q", struct.pack("<d", v))[0]


def enc(p):
    return p if math.isfinite(p) else str(p)


def main():
    n, seed, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    g = torch.Generator().manual_seed(seed)
    r = lambda k: int(torch.randint(0, k, (1,), generator=g))
    cases = []
    for _ in range(n):
        dt = ["f32", "f64", "f16", "bf16", "f32", "f64", "i64", "bool"][r(8)]
        nd = r(4)
        shape = [[0, 1, 2, 3, 5][r(5)] for _ in range(nd)]
        numel = 1
        for s in shape:
            numel *= s
        pool = [0.0, -0.0, 1.5, -2.0, 3.0, float("inf"), float("-inf"), float("nan"), 1e-30, 7.0]
        vals = [pool[r(len(pool))] if r(3) == 0 else float(r(9) - 4) for _ in range(numel)]
        x = torch.tensor(vals, dtype=torch.float64).reshape(shape).to(DT[dt])
        p = [2.0, 1.0, 0.0, -0.0, 0.5, -0.5, 3.0, -1.0, float("inf"), float("-inf"), float("nan"), 2.5][r(12)]
        kind = r(4)
        if kind == 0:
            dims = None
        elif kind == 1:
            dims = []
        else:
            dims = [r(2 * max(nd, 1) + 3) - max(nd, 1) - 1 for _ in range(1 + r(3))]
        keep = bool(r(2))
        case = {"dtype": dt, "shape": shape, "x": [bits(v) for v in x.double().flatten().tolist()],
                "p": enc(p), "dims": dims, "keepdim": keep}
        try:
            out = torch.linalg.vector_norm(x, p, dims, keep)
            case.update(out_shape=list(out.shape), out=[bits(v) for v in out.double().flatten().tolist()])
        except Exception as e:  # noqa: BLE001
            case.update(error=type(e).__name__, message=str(e).splitlines()[0][:200])
        cases.append(case)
    json.dump({"torch": torch.__version__, "cases": cases}, open(path, "w"))


if __name__ == "__main__":
    main()
