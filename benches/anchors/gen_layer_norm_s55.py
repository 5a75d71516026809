#!/usr/bin/env python3
"""PyTorch's CPU layer_norm forward, bit for bit, for
crates/strata-tensor/tests/suite/layer_norm_s55.rs (session 55; the fixture
crates/strata-tensor/tests/data/layer_norm_s55.json.gz).

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_layer_norm_s55.py \\
        --out crates/strata-tensor/tests/data/layer_norm_s55.json.gz

PyTorch 2.15's CPU kernel (AVX2 build: `torch.backends.cpu.get_cpu_capability()`
is recorded in the fixture) computes each row's mean and variance with a
cascaded Welford over vector lanes (`RowwiseMoments`), then
`rstd = 1 / sqrt(var + eps)` and the output with fused multiply-adds; the
order of those steps decides the last bits, which strata reproduces.

Cases: f32, f64, f16 and bf16 inputs of shape [rows, N] for row lengths N
around the lane, vector and chunk sizes (1, 2, 3, 7, 8, 15, 16, 17, 31, 32,
33, 64, 100, 129, 257, 768, 1000, 1024, 4097), each with
every weight/bias combination (none, weight, bias, both; f16/bf16 inputs
take f32 parameters in some cases, their own dtype in others), eps 1e-5,
1e-12, 0.1 or 0, and rows drawn as N(0, 1), 1000 + N(0, 1), N(0, 1) * 1e-6,
uniform [0, 100), and a "special" kind: rows holding an inf, a NaN, a -inf,
a constant row and a row of -0.0 (N >= 768: at N = 1000 only).

Each case: the input, weight and bias as bit patterns in their own dtype
(hex, 16/8/4 digits for f64/f32/f16-bf16 values, concatenated), PyTorch's
output `y` (input dtype) and the per-row `mean` and `rstd` of
`torch.native_layer_norm` in the computation type (f64 for f64, f32
otherwise: for f16/bf16 taken from a run with f32 parameters, whose
statistics are the same and kept in f32). To keep the fixture small, the
one-row cases of N >= 768 carry no `x` and `y`: `gen` gives the splitmix64
seed and kind the test regenerates `x` from (checked against `x_fnv`, the
FNV-1a hash of PyTorch's input as hex), and the seeds of the weight and
bias, whose fields hold the hashes of their hex; PyTorch's output is `y_fnv`,
the hash of its hex, with its first 64 values as `y_head`.
"""

import argparse
import json
import random
import struct

import torch
from fixture_io import write_fixture

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}
SMALL = [1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 129, 257]
LARGE = [768, 1000, 1024, 4097]
EPS = [1e-5, 1e-12, 0.1, 0.0]
KINDS = ["normal", "offset", "tiny", "uniform", "special"]


def hexs(t):
    """`t`'s elements as the hex bit patterns of its own dtype."""
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.float64:
        return "".join(f"{v & M64:016x}" for v in t.view(torch.int64).tolist())
    if t.dtype == torch.float32:
        return "".join(f"{v & 0xFFFFFFFF:08x}" for v in t.view(torch.int32).tolist())
    return "".join(f"{v & 0xFFFF:04x}" for v in t.view(torch.int16).tolist())


M64 = (1 << 64) - 1
# Long rows' inputs: a + b * u per element, u uniform in [0, 1) from
# splitmix64, in f64 (exact IEEE steps the test repeats), then rounded to
# f32 and from there to the case's dtype (f64 keeps the f64 value).
SPANS = {"normal": (-1.7, 3.4), "offset": (998.3, 3.4), "uniform": (0.0, 100.0),
         "tiny": (-1.7e-6, 3.4e-6), "weight": (-3.0, 6.0)}


def splitmix_rows(seed, kind, rows, n, dt):
    a, b = SPANS[kind]
    state, vals = seed, []
    for _ in range(rows * n):
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        vals.append(a + b * ((z >> 11) * 2.0 ** -53))
    x = torch.tensor(vals, dtype=torch.float64).reshape(rows, n)
    return x if dt == torch.float64 else x.to(torch.float32).to(dt)


def fnv(text):
    """FNV-1a (64-bit) of an ASCII string."""
    h = 0xCBF29CE484222325
    for c in text.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    return f"{h:016x}"


def rows_of(kind, rows, n, dt, g, r):
    if kind == "normal":
        x = torch.randn(rows, n, generator=g, dtype=torch.float64)
    elif kind == "offset":
        x = 1000 + torch.randn(rows, n, generator=g, dtype=torch.float64)
    elif kind == "tiny":
        x = torch.randn(rows, n, generator=g, dtype=torch.float64) * 1e-6
    elif kind == "uniform":
        x = torch.rand(rows, n, generator=g, dtype=torch.float64) * 100
    else:
        x = torch.randn(rows, n, generator=g, dtype=torch.float64) * 5 - 3
        x[0, r.randrange(n)] = float("inf")
        x[1, r.randrange(n)] = float("nan")
        x[2, r.randrange(n)] = float("-inf")
        x[3, :] = 2.5
        x[4, :] = -0.0
    return x.to(dt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=55)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(a.seed)
    r = random.Random(a.seed)
    cases = []
    for dname, dt in DT.items():
        half = dt in (torch.float16, torch.bfloat16)
        for n in SMALL + LARGE:
            big = n in LARGE
            # Every weight/bias combination over each length; every kind
            # for the short rows, four one-row cases for the long ones (the
            # special rows at N = 1000 only, to keep the fixture small).
            if big:
                kinds = ["offset", "normal", "uniform", "tiny"] + (["special"] if n == 1000 else [])
                combos = [0, 1, 2, 3, 3][:len(kinds)]
            else:
                kinds = KINDS + ["offset"]
                combos = [0, 1, 2, 3, 0, 3]
            for i, wb in enumerate(combos):
                kind = kinds[i] if big else kinds[(i + n) % len(kinds)]
                rows = 5 if kind == "special" else 1 if big else 2
                eps = EPS[(i + len(cases)) % len(EPS)]
                gen = None
                pdt = torch.float32 if half and r.random() < 0.5 else dt
                if big and kind != "special":
                    gen = {"seed": r.getrandbits(64), "kind": kind,
                           "weight_seed": r.getrandbits(64), "bias_seed": r.getrandbits(64)}
                    x = splitmix_rows(gen["seed"], kind, rows, n, dt)
                    w = splitmix_rows(gen["weight_seed"], "weight", 1, n, pdt)[0] if wb & 1 else None
                    b = splitmix_rows(gen["bias_seed"], "normal", 1, n, pdt)[0] if wb & 2 else None
                else:
                    x = rows_of(kind, rows, n, dt, g, r)
                    w = (torch.randn(n, generator=g, dtype=torch.float64) * 2).to(pdt) if wb & 1 else None
                    b = torch.randn(n, generator=g, dtype=torch.float64).to(pdt) if wb & 2 else None
                y = torch.nn.functional.layer_norm(x, [n], w, b, eps)
                sdt = torch.float32 if half else dt
                _, mean, rstd = torch.native_layer_norm(
                    x, [n], torch.ones(n, dtype=sdt), torch.zeros(n, dtype=sdt), eps)
                assert mean.dtype == sdt and rstd.dtype == sdt
                case = {
                    "name": f"{dname} N={n} {kind} w={wb & 1} b={wb >> 1} eps={eps}",
                    "dtype": dname, "shape": [rows, n], "eps": eps,
                    "param_dtype": str(pdt).replace("torch.", ""),
                    "weight": None if w is None else hexs(w) if gen is None else fnv(hexs(w)),
                    "bias": None if b is None else hexs(b) if gen is None else fnv(hexs(b)),
                    "mean": hexs(mean), "rstd": hexs(rstd),
                }
                if gen is None:
                    case.update({"x": hexs(x), "y": hexs(y)})
                else:
                    yh = hexs(y)
                    case.update({"gen": gen, "x_fnv": fnv(hexs(x)), "y_fnv": fnv(yh),
                                 "y_head": yh[:64 * len(hexs(y[0, :1]))]})
                cases.append(case)
    write_fixture(a.out, json.dumps({
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "seed": a.seed, "cases": cases}, separators=(",", ":")) + "\n")
    print(len(cases), "cases")


if __name__ == "__main__":
    main()
