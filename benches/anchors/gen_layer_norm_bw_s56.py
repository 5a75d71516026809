#!/usr/bin/env python3
"""PyTorch's CPU layer_norm backward, bit for bit, for
crates/strata-autograd/tests/suite/layer_norm_bw_s56.rs (session 56; the
fixture crates/strata-autograd/tests/data/layer_norm_bw_s56.json.gz).

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_layer_norm_bw_s56.py
    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_layer_norm_bw_s56.py --unit

(the second prints the constants of the unit test in
crates/strata-tensor/src/backend/cpu/layer_norm.rs, which checks the row
arithmetic on its own).

PyTorch 2.15's CPU kernel (`LayerNormBackwardKernelImplInternal`, AVX2
build: `torch.backends.cpu.get_cpu_capability()` is recorded) forms each
row's `ds = sum(dy * w * x)` and `db = sum(dy * w)` with vectorised
reductions, then `dx = rstd * dy * w + b * x + c`, and adds the rows one
after another into per-thread buffers of the input's dtype for the
weight's and bias's gradients. Those buffers make dw and db depend on the
thread count: the fixture is made with one thread (`torch.set_num_threads(1)`),
the order strata follows.

Cases: `F.layer_norm(x, [N], w, b, eps)` then `backward(dy)` with x, w and
b requiring grad, for f32, f64, f16 and bf16 inputs with parameters of
their own dtype, and f16/bf16 inputs with f32 parameters (PyTorch's
"mixed type"; its backward refuses a bias without a weight there, so those
are left out), every weight/bias combination, shapes [rows, N] with N
around the vector sizes (1 to 4097) and 1 to 64 rows, eps 1e-5 or 0.1.
x is drawn from splitmix64 (`a + b * u`, u uniform in [0, 1), in f64,
rounded to f32 and from there to the dtype; the test regenerates it and
checks it against `x_fnv`, the FNV-1a hash of PyTorch's input as hex),
as are dy, w and b. PyTorch's gradients are recorded as hex bit patterns of
their dtype (16/8/4 digits for f64/f32/f16-bf16), or for more than 256
elements as `{"fnv": hash of the hex, "head": hex of the first 64}`.
`special` cases carry their input as hex: rows with an inf, a NaN, a -inf,
a constant row (eps 0 there: rstd inf) and a row of -0.0, and an upstream
gradient holding an inf.
"""

import json
import os

import torch
import torch.nn.functional as F

from fixture_io import write_fixture

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "crates", "strata-autograd", "tests", "data",
                   "layer_norm_bw_s56.json.gz")
DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}
CONFIGS = [("f32", "f32"), ("f64", "f64"), ("f16", "f16"), ("bf16", "bf16"),
           ("f16", "f32"), ("bf16", "f32")]
SHAPES = [(1, 1), (2, 3), (1, 7), (3, 8), (2, 9), (4, 15), (3, 16), (5, 17), (2, 31),
          (3, 33), (64, 40), (2, 100), (17, 129), (3, 257), (1, 1000), (8, 1000), (2, 4097)]
M64 = (1 << 64) - 1
# a + b * u per element.
SPANS = {"normal": (-1.7, 3.4), "offset": (998.3, 3.4), "tiny": (-1.7e-6, 3.4e-6),
         "shifted": (2.0, 0.25), "grad": (-2.0, 4.0), "weight": (-3.0, 6.0)}
X_KINDS = ["normal", "offset", "tiny", "shifted"]
FULL = 256


def splitmix(seed, kind, count, dt):
    a, b = SPANS[kind]
    state, vals = seed, []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        vals.append(a + b * ((z >> 11) * 2.0 ** -53))
    t = torch.tensor(vals, dtype=torch.float64)
    return t if dt == torch.float64 else t.to(torch.float32).to(dt)


def hexs(t):
    """`t`'s elements as the hex bit patterns of its own dtype."""
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.float64:
        return "".join(f"{v & M64:016x}" for v in t.view(torch.int64).tolist())
    if t.dtype == torch.float32:
        return "".join(f"{v & 0xFFFFFFFF:08x}" for v in t.view(torch.int32).tolist())
    return "".join(f"{v & 0xFFFF:04x}" for v in t.view(torch.int16).tolist())


def fnv(text):
    """FNV-1a (64-bit) of an ASCII string."""
    h = 0xCBF29CE484222325
    for c in text.encode():
        h = ((h ^ c) * 0x100000001B3) & M64
    return f"{h:016x}"


def record(t):
    h = hexs(t)
    if t.numel() <= FULL:
        return h
    digits = len(h) // t.numel()
    return {"fnv": fnv(h), "head": h[:64 * digits]}


def run(x, w, b, dy, eps):
    x = x.clone().requires_grad_()
    w = None if w is None else w.clone().requires_grad_()
    b = None if b is None else b.clone().requires_grad_()
    F.layer_norm(x, [x.shape[-1]], w, b, eps).backward(dy)
    return x.grad, None if w is None else w.grad, None if b is None else b.grad


def main():
    torch.set_num_threads(1)
    cases = []
    seed = 0x5EED56
    for dname, pname in CONFIGS:
        dt, pdt = DT[dname], DT[pname]
        mixed = dname != pname
        for si, (rows, n) in enumerate(SHAPES):
            for wb in ([1, 3] if mixed else [0, 1, 2, 3]):
                hw, hb = wb & 1 == 1, wb & 2 == 2
                kind = X_KINDS[(si + wb) % len(X_KINDS)]
                eps = 0.1 if (si + wb) % 5 == 0 else 1e-5
                seeds = {k: (seed + 7919 * len(cases) + i) & M64
                         for i, k in enumerate(["x", "dy", "w", "b"])}
                x = splitmix(seeds["x"], kind, rows * n, dt).reshape(rows, n)
                dy = splitmix(seeds["dy"], "grad", rows * n, dt).reshape(rows, n)
                w = splitmix(seeds["w"], "weight", n, pdt) if hw else None
                b = splitmix(seeds["b"], "weight", n, pdt) if hb else None
                dx, dw, db = run(x, w, b, dy, eps)
                cases.append({"dtype": dname, "param": pname, "rows": rows, "n": n,
                              "weight": hw, "bias": hb, "eps": eps, "kind": kind,
                              "seeds": {k: str(v) for k, v in seeds.items()},
                              "x_fnv": fnv(hexs(x)), "dx": record(dx),
                              "dw": None if dw is None else record(dw),
                              "db": None if db is None else record(db)})
    specials = []
    for dname, pname in CONFIGS:
        dt, pdt = DT[dname], DT[pname]
        for n in (9, 37):
            g = torch.Generator().manual_seed(n)
            x = (torch.randn(6, n, generator=g, dtype=torch.float64) * 2 + 0.5)
            x[0, 3] = float("inf")
            x[1, 5] = float("nan")
            x[2, 0] = float("-inf")
            x[3, :] = 2.5
            x[4, :] = -0.0
            x = x.to(dt)
            dy = (torch.randn(6, n, generator=g, dtype=torch.float64)).to(dt)
            dy[5, 2] = float("inf")
            w = torch.randn(n, generator=g, dtype=torch.float64).to(pdt)
            b = torch.randn(n, generator=g, dtype=torch.float64).to(pdt)
            for hw in ([True] if dname != pname else [False, True]):
                ww = w if hw else None
                dx, dw, db = run(x, ww, b, dy, 0.0)
                specials.append({"dtype": dname, "param": pname, "rows": 6, "n": n,
                                 "weight": hw, "bias": True, "eps": 0.0,
                                 "x": hexs(x), "dy": hexs(dy), "w": hexs(ww) if hw else None,
                                 "b": hexs(b), "dx": hexs(dx),
                                 "dw": hexs(dw) if hw else None, "db": hexs(db)})
    doc = {"generator": "benches/anchors/gen_layer_norm_bw_s56.py", "torch": torch.__version__,
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": 1,
           "spans": SPANS, "cases": cases, "specials": specials}
    write_fixture(OUT, json.dumps(doc, separators=(",", ":")))
    print(f"{len(cases)} cases, {len(specials)} special -> {OUT}")



def unit_rows():
    """The rows of layer_norm.rs's unit test (strata-tensor): printed as the
    Rust constants pasted there. x, dy and w are exact multiples of 1/16 (so
    every dtype holds them); PyTorch's saved mean and rstd (of the input's
    dtype, or f32 for f32 parameters) and its dx, dw and db as bits."""
    torch.set_num_threads(1)
    out = []
    for name, dname, pname, n, hw in [("F32_W", "f32", "f32", 19, True), ("F32_5", "f32", "f32", 5, False),
                                      ("F64_W", "f64", "f64", 7, True), ("F16_W", "f16", "f16", 21, True),
                                      ("BF16_MIXED", "bf16", "f32", 13, True),
                                      ("BF16_40", "bf16", "bf16", 40, False)]:
        dt, pdt = DT[dname], DT[pname]
        rows = 3
        x = torch.tensor([[2.0 + ((j * 37 + 11 * r) % 61 - 30) / 16 for j in range(n)]
                          for r in range(rows)], dtype=torch.float64).to(dt)
        dy = torch.tensor([[((j * 23 + 5 * r + 5) % 41 - 20) / 16 for j in range(n)]
                           for r in range(rows)], dtype=torch.float64).to(dt)
        w = torch.tensor([((j * 13 + 3) % 29 - 14) / 8 for j in range(n)],
                         dtype=torch.float64).to(pdt) if hw else None
        b = torch.zeros(n, dtype=pdt)
        _, mean, rstd = torch.native_layer_norm(x, [n], w, b, 1e-5)
        dx, dw, db = torch.ops.aten.native_layer_norm_backward(
            dy, x, [n], mean, rstd, w, b, [True, hw, True])
        bits = lambda t: "0x" + ", 0x".join(hexs(t)[i:i + len(hexs(t)) // t.numel()]
                                            for i in range(0, len(hexs(t)), len(hexs(t)) // t.numel()))
        out.append(f"// {name}: {dname} x, {pname if hw else 'no'} weight, [{rows}, {n}]")
        for k, t in [("MEAN", mean), ("RSTD", rstd), ("DX", dx), ("DW", dw), ("DB", db)]:
            if t is not None:
                out.append(f"const {name}_{k}: [u{64 if t.dtype == torch.float64 else 32 if t.dtype == torch.float32 else 16}; {t.numel()}] = [{bits(t)}];")
    print("\n".join(out))


if __name__ == "__main__":
    import sys
    unit_rows() if "--unit" in sys.argv[1:] else main()
