#!/usr/bin/env python3
"""PyTorch's layout (strides) and values of a leaf's `.grad` after backward,
for crates/strata-autograd/tests/suite/grad_layout_s54b.rs (session 54b; the
fixture crates/strata-autograd/tests/data/grad_layout_s54b.json).

    OMP_NUM_THREADS=1 /tmp/tv/bin/python benches/anchors/gen_grad_layout_s54b.py \\
        --out crates/strata-autograd/tests/data/grad_layout_s54b.json

PyTorch's AccumulateGrad follows the "gradient layout contract"
(torch/csrc/autograd/utils/grad_layout_contract.h): a first `.grad` of a
non-overlapping and dense leaf gets the leaf's strides (on every dim of size
other than 1), that of any other leaf (overlapping, or with gaps) is
row-major; a later gradient is added in place, keeping the strides `.grad`
has (also one assigned by `p.grad = g`).

Each case: a leaf `as_strided(size, stride, offset)` of a contiguous base of
`base_len` elements (values `base`, exact multiples of 1/4) in `dtype`, then
`steps` run in order:
  {"backward": prog}        the forward `prog` on the leaf and `.backward()`
  {"set_grad": {...}}       p.grad = as_strided(size, stride, 0) of a fresh
                            tensor of the values `base`
  {"zero_grad": true}       p.grad.zero_() (zero_grad(set_to_none=False))
and after each backward PyTorch's `.grad`: `strides` and `values` (row-major
logical order), or `error: true` where backward raised (`.grad` then as
before: `strides`/`values` recorded too).

The forward programs (W, W2: fixed row-major tensors of the leaf's shape, M
a row-major (n, 2) matrix for a 2-D leaf of n columns):
  sum      p.sum()
  wsum     (p * W).sum()
  sqwsum   (p * p * W).sum()
  twice    (p * W).sum() + (p * W2).sum()   (two edges into the leaf)
  hook     (p * W).sum() with a tensor hook g -> g * 2 on the leaf
  mm       (p @ M * Wm).sum()                (Wm: row-major weights)
  tsum     (p.t() * W.t()).sum()             (2-D: a transposed gradient)

`ddp`: the same under DistributedDataParallel (see `ddp_case`).
"""

import argparse
import json

import torch

DT = {"f32": torch.float32, "f64": torch.float64}


def quarters(n, start=1):
    return [((start + 3 * i) % 17 - 8) / 4 for i in range(n)]


def weights(shape, dt, k):
    n = 1
    for s in shape:
        n *= s
    return torch.tensor(quarters(n, k), dtype=dt).reshape(shape)


def forward(prog, p):
    dt = p.dtype
    shape = tuple(p.shape)
    w = weights(shape, dt, 2)
    if prog == "sum":
        return p.sum()
    if prog == "wsum":
        return (p * w).sum()
    if prog == "sqwsum":
        return (p * p * w).sum()
    if prog == "twice":
        return (p * w).sum() + (p * weights(shape, dt, 5)).sum()
    if prog == "hook":
        p.register_hook(lambda g: g * 2)
        return (p * w).sum()
    if prog == "mm":
        m = weights((shape[1], 2), dt, 3)
        return (p @ m * weights((shape[0], 2), dt, 7)).sum()
    if prog == "tsum":
        return (p.t() * w.t()).sum()
    raise ValueError(prog)


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def run(case):
    dt = DT[case["dtype"]]
    base = torch.tensor(case["base"], dtype=dt)
    p = base.as_strided(case["size"], case["stride"], case["offset"]).detach()
    p.requires_grad_(True)
    results = []
    for step in case["steps"]:
        if "set_grad" in step:
            g = step["set_grad"]
            t = torch.tensor(g["base"], dtype=dt).as_strided(g["size"], g["stride"], 0)
            p.grad = t
        elif "zero_grad" in step:
            p.grad.zero_()
        else:
            out = {}
            try:
                forward(step["backward"], p).backward()
            except RuntimeError:
                out["error"] = True
            out["strides"] = list(p.grad.stride())
            out["values"] = flat(p.grad)
            results.append(out)
    return results


def case(name, size, stride, offset=0, steps=("wsum",), dtype="f32", base_len=None):
    if base_len is None:
        base_len = offset + 1 + sum((s - 1) * st for s, st in zip(size, stride))
    steps = [s if isinstance(s, dict) else {"backward": s} for s in steps]
    c = {
        "name": name,
        "dtype": dtype,
        "base": quarters(base_len),
        "size": list(size),
        "stride": list(stride),
        "offset": offset,
        "steps": steps,
    }
    c["expected"] = run(c)
    return c


def cases():
    out = []
    progs2 = ["sum", "wsum", "sqwsum", "twice", "hook", "mm", "tsum"]
    # Non-overlapping and dense, not row-major: the leaf's strides.
    for prog in progs2:
        out.append(case(f"transposed_{prog}", [4, 3], [1, 4], steps=[prog]))
        out.append(case(f"transposed_f64_{prog}", [3, 4], [1, 3], steps=[prog], dtype="f64"))
    for prog in ["sum", "wsum", "hook", "twice"]:
        out.append(case(f"permuted3_{prog}", [4, 2, 3], [1, 12, 4], steps=[prog]))
        out.append(case(f"permuted3b_{prog}", [2, 4, 3], [3, 6, 1], steps=[prog]))
    # Dims of size 1 (their strides are free in a dense layout).
    for prog in ["sum", "wsum"]:
        out.append(case(f"size1_mid_{prog}", [4, 1, 3], [1, 12, 4], steps=[prog]))
        out.append(case(f"size1_col_{prog}", [3, 1], [1, 1], steps=[prog]))
        out.append(case(f"size1_row_{prog}", [1, 4], [1, 1], steps=[prog]))
        out.append(case(f"size1_t_{prog}", [3, 1, 2], [1, 3, 3], steps=[prog]))
    # Row-major leaves with an offset: row-major.
    out.append(case("offset_rowmajor_wsum", [2, 3], [3, 1], offset=3))
    out.append(case("offset_transposed_wsum", [3, 2], [1, 3], offset=2))
    # Overlapping (expanded) leaves: row-major.
    for prog in ["sum", "wsum", "mm", "tsum"]:
        out.append(case(f"expanded_{prog}", [3, 4], [1, 0], steps=[prog]))
        out.append(case(f"expanded_row_{prog}", [3, 4], [0, 1], steps=[prog]))
    out.append(case("expanded3_wsum", [2, 3, 2], [0, 1, 0]))
    # Gaps (strided slices): row-major.
    for prog in ["sum", "wsum", "hook"]:
        out.append(case(f"gaps_cols_{prog}", [3, 2], [4, 2], steps=[prog]))
        out.append(case(f"gaps_transposed_{prog}", [2, 3], [2, 4], steps=[prog]))
        out.append(case(f"gaps_1d_{prog}", [3], [2], steps=[prog]))
    # A second backward adds in place: the strides stay.
    out.append(case("transposed_two_passes", [4, 3], [1, 4], steps=["wsum", "sqwsum"]))
    out.append(case("expanded_twice", [3, 4], [1, 0], steps=["wsum", "tsum"]))
    out.append(case("transposed_zero_grad", [4, 3], [1, 4], steps=["wsum", {"zero_grad": True}, "tsum"]))
    # An assigned `.grad` keeps its strides through accumulation.
    tg = {"size": [3, 4], "stride": [1, 3], "base": quarters(12, 4)}
    cg = {"size": [4, 3], "stride": [3, 1], "base": quarters(12, 6)}
    out.append(case("rowmajor_assigned_transposed", [3, 4], [4, 1], steps=[{"set_grad": tg}, "wsum"]))
    out.append(case("transposed_assigned_rowmajor", [4, 3], [1, 4], steps=[{"set_grad": cg}, "wsum", "tsum"]))
    out.append(case("expanded_assigned_transposed", [3, 4], [1, 0], steps=[{"set_grad": tg}, "sum"]))
    # An assigned overlapping `.grad`: the in-place add fails, `.grad` stays.
    og = {"size": [3, 4], "stride": [1, 0], "base": [0.5, -1.0, 2.0]}
    out.append(case("rowmajor_assigned_expanded", [3, 4], [4, 1], steps=[{"set_grad": og}, "wsum"]))
    return out


DDP_PARAMS = [
    # (size, stride, weight of its sum in the loss)
    ([4, 3], [1, 4], 1.0),  # transposed: a strided bucket view
    ([2], [1], 2.0),  # row-major
    ([3, 2], [4, 2], 3.0),  # gaps: a row-major view
    ([3, 4], [1, 0], -0.5),  # expanded: a row-major view
    ([1, 4], [1, 1], 0.25),  # a dim of size 1: the parameter's strides
    ([2, 1, 3], [1, 2, 2], 1.5),  # permuted with a dim of size 1
]


def ddp_case():
    """The `.grad` layouts under DistributedDataParallel (one gloo rank,
    gradient_as_bucket_view=True, no initial broadcast: an expanded
    parameter cannot receive one) after one backward of
    sum_i w_i * (p_i * W_i).sum(). PyTorch's Reducer lays each bucket view
    out like the parameter where it is non-overlapping and dense, else
    row-major."""
    import os
    import tempfile

    import torch.distributed as dist

    fd, path = tempfile.mkstemp()
    os.close(fd)
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=0, world_size=1)
    try:
        class Loss(torch.nn.Module):
            def forward(self):
                return sum(
                    w * (p * weights(tuple(p.shape), p.dtype, 2)).sum()
                    for p, (_, _, w) in zip(self.parameters(), DDP_PARAMS)
                )

        m = Loss()
        ps = []
        for i, (size, stride, _) in enumerate(DDP_PARAMS):
            base_len = 1 + sum((n - 1) * st for n, st in zip(size, stride))
            t = torch.tensor(quarters(base_len, i), dtype=torch.float32)
            p = torch.nn.Parameter(t.as_strided(size, stride, 0))
            m.register_parameter(f"p{i}", p)
            ps.append(p)
        ddp = torch.nn.parallel.DistributedDataParallel(m, gradient_as_bucket_view=True, init_sync=False)
        ddp().backward()
        # Every .grad is a view of one bucket.
        storages = {p.grad.untyped_storage().data_ptr() for p in ps}
        assert len(storages) == 1, storages
        return {
            "params": [
                {"size": s, "stride": st, "weight": w, "base": quarters(1 + sum((n - 1) * x for n, x in zip(s, st)), i)}
                for i, (s, st, w) in enumerate(DDP_PARAMS)
            ],
            "expected": [{"strides": list(p.grad.stride()), "values": flat(p.grad)} for p in ps],
        }
    finally:
        dist.destroy_process_group()
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.manual_seed(0)
    data = {"torch": torch.__version__, "cases": cases(), "ddp": ddp_case()}
    with open(a.out, "w") as f:
        json.dump(data, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
