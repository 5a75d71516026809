//! Session 52: PyTorch's order and arithmetic in two CPU ops.
//!
//! - `vector_norm` of a general order (not 0, 1, 2, ±inf): PyTorch's CPU
//!   kernel (`ReduceOpsKernel.cpp`'s `norm_kernel_cpu_impl` with
//!   `SharedReduceOps.h`'s `NormOps`, run by `cpu/Reduce.h`'s
//!   `binary_kernel_reduce`) adds `pow(|x|, p)` one element at a time in the
//!   accumulate type (f32 for f32/f16/bf16, f64 for f64; `p` rounded to it,
//!   `std::pow`), in its iterator's order of the reduced elements (memory
//!   order: smallest input stride fastest), then takes `pow(acc, 1/p)`.
//!   PyTorch 2.15's answers (one thread) are in
//!   `tests/data/norm_order_s52.json.gz`, written by
//!   `benches/anchors/gen_norm_order_s52.py` (`OMP_NUM_THREADS=1 python
//!   benches/anchors/gen_norm_order_s52.py 160 tests/data/norm_order_s52.json.gz`);
//!   `STRATA_NORM_ORDER_PROBE=FILE` checks another file of that format (the
//!   session checked 3,000 cases).
//! - `vector_norm` of order 2 (session 53): PyTorch's `NormTwoOps` (`acc +
//!   x * x` one element at a time, then `sqrt`) in the same order, except
//!   for f32, f64 and bf16 reduced over one contiguous innermost run
//!   (`is_reduce_lastdim`), which take its vectorised kernel (8, 4 or 16
//!   lanes on AVX2, joined left to right, then a scalar tail that GCC
//!   contracts into fused multiply-adds except for a first group of 4 in
//!   f32): see `backend/cpu/pnorm.rs`. PyTorch 2.15's answers are in
//!   `tests/data/norm_two_s53.json.gz` (`OMP_NUM_THREADS=1 python
//!   benches/anchors/gen_norm_two_s53.py 120 53
//!   tests/data/norm_two_s53.json.gz`); strata's earlier composition
//!   `(x * x).sum().sqrt()` differed from PyTorch in 81 of 600 such cases,
//!   the kernel in none of 3,640 (seeds 11-13 and 52, and 40 reductions of
//!   up to ~20,000 elements per output).
//! - `gelu`'s zero signs: PyTorch's own CPU kernel (`cpu/Gelu.h`,
//!   `x * 0.5 * (1 + erf(x / sqrt 2))`, vectorized and scalar) gives -0.0
//!   where `erf` rounds to -1 (x below about -5.54 in f32), in every float
//!   dtype, as strata does; +0.0 there comes only from oneDNN's
//!   `eltwise_gelu_erf`, which `gelu_out_cpu` (`Activation.cpp`) uses for
//!   contiguous f32 inputs of more than one element (its other values also
//!   differ from the native kernel's by an ulp here and there).

use std::sync::LazyLock;
use strata_tensor::{DType, Device, Tensor};

use super::pytorch_fixture::{dtype, gunzip, read_fixture_file};

static NORM_ORDER: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/norm_order_s52.json.gz")));
static NORM_TWO: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/norm_two_s53.json.gz")));

/// The bits of `v`, every NaN as one (PyTorch's and strata's NaN payloads
/// and signs may differ).
fn canonical(v: f64) -> u64 {
    if v.is_nan() {
        f64::NAN.to_bits()
    } else {
        v.to_bits()
    }
}

/// Runs every case of a file of `gen_norm_order_s52.py`'s format; the
/// number of cases whose bits differ, with the first few described.
fn check_norm_file(text: &str) -> (usize, usize, Vec<String>) {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let cases = v["cases"].as_array().unwrap();
    let mut bad = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let u = |k: &str| -> Vec<u64> {
            c[k].as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect()
        };
        let ints = |k: &str| -> Vec<i64> {
            c[k].as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect()
        };
        let shape: Vec<usize> = ints("shape").iter().map(|&n| n as usize).collect();
        let x: Vec<f64> = u("x").into_iter().map(f64::from_bits).collect();
        let t = Tensor::from_vec(x, &shape, Device::Cpu)
            .unwrap()
            .to_dtype(dtype(c["dtype"].as_str().unwrap()))
            .unwrap()
            .permute(&ints("perm"))
            .unwrap();
        let mut t = t;
        for v in c["views"].as_array().into_iter().flatten() {
            let v: Vec<&serde_json::Value> = v.as_array().unwrap().iter().collect();
            let n = |i: usize| v[i].as_i64().unwrap();
            t = match v[0].as_str().unwrap() {
                "slice" => t.slice(n(1), Some(n(2)), None, n(3)).unwrap(),
                "expand" => {
                    let u = t.unsqueeze(n(1)).unwrap();
                    let mut target = vec![-1i64; u.ndim()];
                    target[n(1) as usize] = n(2);
                    u.expand(&target).unwrap()
                }
                w => panic!("view {w}"),
            };
        }
        let dims = c["dims"].as_array().map(|_| ints("dims"));
        // An infinite order travels as the string "inf" or "-inf".
        let p = c["p"]
            .as_f64()
            .unwrap_or_else(|| c["p"].as_str().unwrap().parse().unwrap());
        let keep = c["keepdim"].as_bool().unwrap();
        let out = t.vector_norm(p, dims.as_deref(), keep).unwrap();
        let want_shape: Vec<usize> = ints("out_shape").iter().map(|&n| n as usize).collect();
        assert_eq!(out.shape(), &want_shape[..], "case {i}");
        assert_eq!(out.dtype(), t.dtype(), "case {i}");
        let got: Vec<u64> = out
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
            .into_iter()
            .map(canonical)
            .collect();
        let want: Vec<u64> = u("out")
            .into_iter()
            .map(|b| canonical(f64::from_bits(b)))
            .collect();
        if got != want {
            if bad.len() < 5 {
                bad.push(format!(
                    "case {i}: {} {:?} perm {:?} views {} dims {dims:?} p {p}: got {:?} want {:?}",
                    c["dtype"],
                    shape,
                    ints("perm"),
                    c["views"],
                    got.iter()
                        .map(|&b| f64::from_bits(b))
                        .take(4)
                        .collect::<Vec<_>>(),
                    want.iter()
                        .map(|&b| f64::from_bits(b))
                        .take(4)
                        .collect::<Vec<_>>()
                ));
            }
            bad.push(String::new());
        }
    }
    let n_bad = bad.iter().filter(|s| s.is_empty()).count();
    bad.retain(|s| !s.is_empty());
    (cases.len(), n_bad, bad)
}

#[test]
fn general_p_norms_match_pytorch_bit_for_bit() {
    let (n, bad, first) = check_norm_file(&NORM_ORDER);
    assert!(n >= 100);
    assert_eq!(bad, 0, "{bad} of {n} cases differ: {first:#?}");
    if let Ok(path) = std::env::var("STRATA_NORM_ORDER_PROBE") {
        let text = read_fixture_file(&path);
        let (n, bad, first) = check_norm_file(&text);
        assert_eq!(bad, 0, "{bad} of {n} cases of {path} differ: {first:#?}");
        eprintln!("{path}: {n} cases, all equal");
    }
}

#[test]
fn two_norms_match_pytorch_bit_for_bit() {
    let (n, bad, first) = check_norm_file(&NORM_TWO);
    assert!(n >= 100);
    assert_eq!(bad, 0, "{bad} of {n} cases differ: {first:#?}");
    // The fixture tells the kernels apart: the composition strata used
    // before, (x * x).sum().sqrt() (f16/bf16 widened to f32), misses some
    // of these cases by the last bits.
    let v: serde_json::Value = serde_json::from_str(&NORM_TWO).unwrap();
    let mut composed_differ = 0;
    for c in v["cases"].as_array().unwrap() {
        let ints = |k: &str| -> Vec<i64> {
            c[k].as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect()
        };
        if !c["views"].as_array().unwrap().is_empty() {
            continue;
        }
        let shape: Vec<usize> = ints("shape").iter().map(|&n| n as usize).collect();
        let x: Vec<f64> = c["x"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| f64::from_bits(b.as_u64().unwrap()))
            .collect();
        let dt = dtype(c["dtype"].as_str().unwrap());
        let t = Tensor::from_vec(x, &shape, Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
            .permute(&ints("perm"))
            .unwrap();
        let w = if matches!(dt, DType::F16 | DType::BF16) {
            t.to_dtype(DType::F32).unwrap()
        } else {
            t.clone()
        };
        let dims = c["dims"].as_array().map(|_| ints("dims"));
        let keep = c["keepdim"].as_bool().unwrap();
        if t.numel() < 2 {
            continue;
        }
        let composed = w
            .mul(&w)
            .unwrap()
            .sum(dims.as_deref(), keep)
            .unwrap()
            .sqrt()
            .unwrap()
            .to_dtype(dt)
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap();
        let want: Vec<u64> = c["out"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| canonical(f64::from_bits(b.as_u64().unwrap())))
            .collect();
        if composed.into_iter().map(canonical).collect::<Vec<_>>() != want {
            composed_differ += 1;
        }
    }
    assert!(composed_differ > 0, "no case tells the kernels apart");
}

/// `F.gelu` of large negative inputs through PyTorch 2.15's own CPU kernel
/// (`cpu/Gelu.h`): every float dtype gives -0.0 once `1 + erf(x / sqrt 2)`
/// (or `1 + tanh(..)`) rounds to 0, as strata does. Figures from
/// `F.gelu(t[::2], approximate=..)` of `t = [-30, .5, -10, .5, -8, .5, -6,
/// .5, -1000, .5]` (a strided view, so that f32's exact form also runs the
/// native kernel rather than oneDNN's, which gives +0.0 for a contiguous f32
/// input of more than one element).
#[test]
fn gelu_of_large_negative_inputs_is_negative_zero_as_pytorchs_kernel() {
    use strata_tensor::GeluApprox;
    let base = [
        -30.0f64, 0.5, -10.0, 0.5, -8.0, 0.5, -6.0, 0.5, -1000.0, 0.5,
    ];
    // PyTorch's f64 answers (bits of the nonzero ones within 1e-12 relative).
    let f64_none = [
        -0.0,
        -0.0,
        -4.884981308350689e-15,
        -5.919525869479969e-09,
        -0.0,
    ];
    let f64_tanh = [-0.0, -0.0, -0.0, -8.43964897967453e-11, -0.0];
    for dt in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let t = Tensor::from_vec(base.to_vec(), &[10], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        let strided = t.slice(0, None, None, 2).unwrap();
        for (approx, want64) in [(GeluApprox::None, f64_none), (GeluApprox::Tanh, f64_tanh)] {
            for x in [&strided, &strided.contiguous().unwrap()] {
                if dt == DType::F32 && approx == GeluApprox::None && x.is_contiguous() {
                    // PyTorch: oneDNN's +0.0 here; strata keeps its kernel's -0.0.
                    continue;
                }
                let y = x
                    .gelu(approx)
                    .unwrap()
                    .to_dtype(DType::F64)
                    .unwrap()
                    .to_vec::<f64>()
                    .unwrap();
                for (k, (&g, &w)) in y.iter().zip(want64.iter()).enumerate() {
                    assert!(g.is_sign_negative(), "{dt} {approx:?} element {k}: {g}");
                    if dt == DType::F64 {
                        assert!(
                            (g - w).abs() <= 1e-12 * w.abs(),
                            "{approx:?} element {k}: {g} want {w}"
                        );
                    } else {
                        // f32, f16, bf16: every one of these rounds to -0.0.
                        assert_eq!(g, 0.0, "{dt} {approx:?} element {k}: {g}");
                    }
                }
            }
        }
    }
}

/// `torch.linalg.vector_norm`'s edges (PyTorch 2.15): over zero elements 0
/// (`vector_norm(empty(0, 3), 0.5)` is `0.`, over dim 0 `[0., 0., 0.]`) and
/// an error for a negative order; over one element `|x|` whatever the order
/// (`vector_norm([[-2.]], 3., 1)` is `[2.]`, of the 0-d `-2.5` with 0.5,
/// `2.5`); integer inputs are refused.
#[test]
fn vector_norm_edges_match_pytorch() {
    let e = Tensor::zeros(&[0, 3], DType::F32, Device::Cpu).unwrap();
    let n = e.vector_norm(0.5, None, false).unwrap();
    assert_eq!(n.shape(), &[] as &[usize]);
    assert_eq!(n.item::<f32>().unwrap(), 0.0);
    let n = e.vector_norm(0.5, Some(&[0]), false).unwrap();
    assert_eq!(n.to_vec::<f32>().unwrap(), vec![0.0; 3]);
    assert!(e.vector_norm(-1.0, None, false).is_err());
    assert!(e.vector_norm(f64::INFINITY, None, false).is_err());
    let x = Tensor::from_slice(&[-2.0f32], &[1, 1], Device::Cpu).unwrap();
    let n = x.vector_norm(3.0, Some(&[1]), false).unwrap();
    assert_eq!(
        (n.shape(), n.to_vec::<f32>().unwrap()),
        (&[1usize][..], vec![2.0])
    );
    let s = Tensor::from_slice(&[-2.5f64], &[], Device::Cpu).unwrap();
    assert_eq!(
        s.vector_norm(0.5, None, false)
            .unwrap()
            .item::<f64>()
            .unwrap(),
        2.5
    );
    let i = Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap();
    assert!(i.vector_norm(3.0, None, false).is_err());
}
