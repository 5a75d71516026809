#!/usr/bin/env python3
"""PyTorch's signs of the exact zeros that `addmm` (beta = alpha = 1)
returns, replayed by crates/strata-tensor/tests/suite/hostile_sweep_s38.rs
(the JSON fixture crates/strata-tensor/tests/data/addmm_zero_signs_s38.json.gz).

Every case is `torch.addmm(bias, mat1, mat2)` on the CPU (one thread) whose
result is all zeros: mat2 is zeros, mat1 is +1 (each product +0.0), -1
(each product -0.0) or alternating +1/-1 along k (products of both signs),
the bias is +0.0 or -0.0, shaped [n], [m, n], [m, 1] or [] (broadcast), for
f16 and bf16 with inner sizes k = 0, 1, 2, 3, 17, f32 and f64 with k = 0, 1
(see below), result shapes from 1 x 1 to 30 x 30, each matrix row-major
or column-major (`x.t().contiguous().t()`; its strides are recorded, as
PyTorch picks its kernel by them). Recorded per
case: the sign bits of the result's elements in row-major order, a string
of 0 (+0.0) and 1 (-0.0), or one character when all elements agree.

Usage:
    /tmp/tv/bin/python benches/anchors/gen_addmm_zero_signs_s38.py \
        --out crates/strata-tensor/tests/data/addmm_zero_signs_s38.json.gz
"""

import argparse
import json
import math

import torch
from fixture_io import write_fixture

DT = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
      "bf16": torch.bfloat16}



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cases = []
    for dt in DT:
        # f32 and f64 go to MKL's sgemm/dgemm, whose sign of a zero sum of
        # k >= 2 products depends on its kernel (the shape, the layouts,
        # even the tile of the result: a 30 x 30 f64 product of k = 3 has
        # +0.0 and -0.0 in a pattern of 6-column tiles), so only k = 1.
        for k in ([0, 1] if dt in ("f32", "f64") else [0, 1, 2, 3, 17]):
            for m, n in [(1, 1), (1, 4), (4, 1), (2, 2), (3, 5), (30, 30)]:
                for prod in ["pos", "neg", "mixed"]:
                    if prod == "mixed" and k == 1:
                        continue
                    for bias_neg in [True, False]:
                        for bias_shape in ["n", "mn", "m1", "scalar"]:
                            for mat1_t, mat2_t in [(False, False), (False, True),
                                                   (True, False), (True, True)]:
                                if prod == "pos":
                                    row = [1.0] * k
                                elif prod == "neg":
                                    row = [-1.0] * k
                                else:
                                    row = [1.0 if i % 2 == 0 else -1.0 for i in range(k)]
                                a = torch.tensor([row] * m, dtype=DT[dt])
                                if mat1_t:
                                    a = a.t().contiguous().t()
                                b = torch.zeros((k, n), dtype=DT[dt])
                                if mat2_t:
                                    b = b.t().contiguous().t()
                                shape = {"n": [n], "mn": [m, n], "m1": [m, 1],
                                         "scalar": []}[bias_shape]
                                bias = torch.full(shape, -0.0 if bias_neg else 0.0,
                                                  dtype=DT[dt])
                                r = torch.addmm(bias, a, b)
                                assert r.shape == (m, n)
                                signs = "".join("1" if math.copysign(1.0, v) < 0 else "0"
                                                for v in r.reshape(-1).tolist())
                                if len(set(signs)) == 1:
                                    signs = signs[0]
                                assert all(v == 0 for v in r.reshape(-1).tolist())
                                case = {
                                    "dtype": dt, "m": m, "k": k, "n": n,
                                    "prod": prod, "bias_neg": bias_neg,
                                    "bias_shape": shape,
                                    "mat1_strides": list(a.stride()),
                                    "mat2_strides": list(b.stride()),
                                    "signs": signs,
                                }
                                # Layouts that coincide (a row or column
                                # of one) are recorded once.
                                if case not in cases:
                                    cases.append(case)
    write_fixture(args.out, json.dumps({"torch": torch.__version__, "cases": cases}) + "\n")
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main()
