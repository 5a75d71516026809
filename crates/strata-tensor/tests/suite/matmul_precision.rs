//! Matrix products in f16, bf16 and f32 against an f64 reference computed
//! here from the operands' own values: each result must be the exact sum
//! rounded once to the dtype (PyTorch's f32 accumulation), up to the
//! accumulation error of f32. Covers `gemm`'s own f16 kernel (`3 <= k <= 512`,
//! `m, n >= 2`), the tiled f32 path (bf16, long k, matrix-vector), transposed
//! operands, stride-0 (broadcast) batches, batch dims that cannot be one
//! stride, the folded `[..., m, k] @ [k, n]` case, and the precision setting.

use proptest::prelude::*;
use strata_tensor::{
    float32_matmul_precision, set_float32_matmul_precision, DType, Device, Precision, Result,
    Tensor, TensorError,
};

const CPU: Device = Device::Cpu;

/// Random values of `dtype` (normal, scaled by 4).
fn data(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    Tensor::randn(shape, DType::F64, seed, CPU)?
        .mul(4.0)?
        .to_dtype(dtype)
}

/// The elements of `t` (any layout) as f64, row-major.
fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// `torch.matmul(a, b)` in f64 for operands of at least 2 dims with
/// broadcast batch dims: the exact sums and the sums of |products|.
fn reference(a: &Tensor, b: &Tensor) -> (Vec<usize>, Vec<f64>, Vec<f64>) {
    let (na, nb) = (a.ndim(), b.ndim());
    let (m, k, n) = (a.shape()[na - 2], a.shape()[na - 1], b.shape()[nb - 1]);
    let batch =
        strata_tensor::shape::broadcast_shapes("ref", &a.shape()[..na - 2], &b.shape()[..nb - 2])
            .unwrap();
    let bsz: usize = batch.iter().product();
    let expand = |t: &Tensor, r: usize, c: usize| {
        let mut s: Vec<i64> = batch.iter().map(|&x| x as i64).collect();
        s.extend([r as i64, c as i64]);
        values(&t.expand(&s).unwrap().contiguous().unwrap())
    };
    let (av, bv) = (expand(a, m, k), expand(b, k, n));
    let mut sum = vec![0.0; bsz * m * n];
    let mut abs = vec![0.0; bsz * m * n];
    for q in 0..bsz {
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut t) = (0.0, 0.0);
                for p in 0..k {
                    let x = av[q * m * k + i * k + p] * bv[q * k * n + p * n + j];
                    s += x;
                    t += x.abs();
                }
                sum[q * m * n + i * n + j] = s;
                abs[q * m * n + i * n + j] = t;
            }
        }
    }
    let mut shape = batch;
    shape.extend([m, n]);
    (shape, sum, abs)
}

/// Relative size of one unit in the last place of `dtype`.
fn ulp(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        DType::F32 => 2f64.powi(-23),
        _ => 2f64.powi(-52),
    }
}

/// Checks `a.matmul(b)` against the f64 reference: within one ulp of the
/// dtype (a single rounding) plus f32's accumulation error over k terms.
fn check(what: &str, a: &Tensor, b: &Tensor) {
    let r = a.matmul(b).unwrap();
    assert_eq!(r.dtype(), a.dtype(), "{what}: dtype");
    let (shape, sum, abs) = reference(a, b);
    assert_eq!(r.shape(), &shape[..], "{what}: shape");
    let k = a.shape()[a.ndim() - 1] as f64;
    let got = values(&r);
    for (i, ((g, s), t)) in got.iter().zip(&sum).zip(&abs).enumerate() {
        let tol = ulp(a.dtype()) * s.abs() + 2.0 * k * 2f64.powi(-24) * t + 1e-300;
        assert!(
            (g - s).abs() <= tol,
            "{what}: element {i}: got {g}, exact {s} (tolerance {tol})"
        );
    }
}

/// `[r, c]` of `dtype`, either contiguous or the transpose of a `[c, r]`.
fn mat(r: usize, c: usize, transposed: bool, dtype: DType, seed: u64) -> Tensor {
    if transposed {
        data(&[c, r], dtype, seed).unwrap().t().unwrap()
    } else {
        data(&[r, c], dtype, seed).unwrap()
    }
}

#[test]
fn half_products_round_once() {
    for dtype in [DType::F16, DType::BF16, DType::F32] {
        // gemm's f16 kernel, the tiled path (long k, k <= 2, vectors), several tiles.
        for (m, k, n) in [
            (7, 40, 9),
            (33, 300, 65),
            (5, 700, 6),
            (3, 1100, 2),
            (1, 64, 17),
            (17, 64, 1),
            (9, 2, 8),
            (4, 1, 3),
            (130, 520, 260),
        ] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = mat(m, k, ta, dtype, 1 + m as u64);
                let b = mat(k, n, tb, dtype, 2 + n as u64);
                check(&format!("{dtype} {m}x{k}x{n} ta={ta} tb={tb}"), &a, &b);
            }
        }
    }
}

#[test]
fn vectors_and_empty_dims() {
    for dtype in [DType::F16, DType::BF16] {
        let a = data(&[600], dtype, 3).unwrap();
        let b = data(&[600], dtype, 4).unwrap();
        let r = a.matmul(&b).unwrap();
        assert_eq!(r.shape(), &[] as &[usize]);
        let (_, s, t) = reference(&a.unsqueeze(0).unwrap(), &b.unsqueeze(1).unwrap());
        let g = values(&r)[0];
        assert!(
            (g - s[0]).abs() <= ulp(dtype) * s[0].abs() + 1e-4 * t[0],
            "{dtype} dot"
        );
        // k == 0: zeros of shape [m, n].
        let z = data(&[3, 0], dtype, 5)
            .unwrap()
            .matmul(&data(&[0, 4], dtype, 6).unwrap())
            .unwrap();
        assert_eq!(z.shape(), &[3, 4]);
        assert!(values(&z).iter().all(|&v| v == 0.0));
        // m == 0.
        let e = data(&[0, 5], dtype, 7)
            .unwrap()
            .matmul(&data(&[5, 4], dtype, 8).unwrap())
            .unwrap();
        assert_eq!(e.shape(), &[0, 4]);
    }
}

#[test]
fn broadcast_batches_and_folding() {
    for dtype in [DType::F16, DType::BF16, DType::F32] {
        // [m, k] @ [B, k, n]: a broadcast with batch stride 0.
        check(
            &format!("{dtype} 2d@3d"),
            &mat(5, 30, false, dtype, 10),
            &data(&[4, 30, 6], dtype, 11).unwrap(),
        );
        // [B, m, k] @ [k, n]: folded into one [B*m, k] product.
        check(
            &format!("{dtype} 3d@2d fold"),
            &data(&[3, 4, 20], dtype, 12).unwrap(),
            &mat(20, 7, true, dtype, 13),
        );
        // Per-matrix transposed batch (cannot fold): [B, m, k] as [B, k, m].mT.
        let at = data(&[3, 20, 4], dtype, 14)
            .unwrap()
            .transpose(1, 2)
            .unwrap();
        check(
            &format!("{dtype} 3d(T)@2d"),
            &at,
            &mat(20, 7, false, dtype, 15),
        );
        // Batch dims [2, 1] against [1, 3]: no single batch stride (a copy).
        check(
            &format!("{dtype} [2,1] x [1,3] batches"),
            &data(&[2, 1, 4, 9], dtype, 16).unwrap(),
            &data(&[1, 3, 9, 5], dtype, 17).unwrap(),
        );
        // An expanded operand whose batch has stride 0 on every dim.
        let b = data(&[9, 5], dtype, 18)
            .unwrap()
            .expand(&[2, 3, 9, 5])
            .unwrap();
        check(
            &format!("{dtype} expanded batch"),
            &data(&[2, 3, 4, 9], dtype, 19).unwrap(),
            &b,
        );
        // bmm with permuted operands.
        let a = data(&[4, 3, 6], dtype, 20)
            .unwrap()
            .permute(&[1, 0, 2])
            .unwrap();
        let b = data(&[3, 5, 6], dtype, 21)
            .unwrap()
            .transpose(1, 2)
            .unwrap();
        let r = a.bmm(&b).unwrap();
        let (shape, s, t) = reference(&a, &b);
        assert_eq!(r.shape(), &shape[..]);
        for ((g, s), t) in values(&r).iter().zip(&s).zip(&t) {
            assert!(
                (g - s).abs() <= ulp(dtype) * s.abs() + 1e-5 * t,
                "{dtype} bmm"
            );
        }
    }
}

#[test]
fn matmul_errors_are_typed() {
    let a = data(&[2, 3], DType::F16, 1).unwrap();
    let b = data(&[3, 2], DType::BF16, 2).unwrap();
    assert!(matches!(a.matmul(&b), Err(TensorError::DType { .. })));
    let c = data(&[4, 2], DType::F16, 3).unwrap();
    assert!(matches!(a.matmul(&c), Err(TensorError::Shape { .. })));
    let d = data(&[2, 2, 3], DType::F16, 4).unwrap();
    let e = data(&[5, 3, 2], DType::F16, 5).unwrap();
    assert!(matches!(d.matmul(&e), Err(TensorError::Broadcast { .. })));
    assert!(matches!(d.bmm(&e), Err(TensorError::Shape { .. })));
    assert!(matches!(a.mm(&d), Err(TensorError::Shape { .. })));
}

#[test]
fn precision_setting_round_trips_and_parses() {
    let before = float32_matmul_precision();
    for (s, p) in [
        ("highest", Precision::Highest),
        ("high", Precision::High),
        ("medium", Precision::Medium),
    ] {
        let parsed: Precision = s.parse().unwrap();
        assert_eq!(parsed, p);
        assert_eq!(p.to_string(), s);
    }
    assert!(matches!(
        "fast".parse::<Precision>(),
        Err(TensorError::Value { .. })
    ));
    // The CPU's f32 products stay exact whatever the setting.
    set_float32_matmul_precision(Precision::High);
    assert_eq!(float32_matmul_precision(), Precision::High);
    check(
        "f32 with High on the CPU",
        &mat(9, 33, false, DType::F32, 40),
        &mat(33, 8, true, DType::F32, 41),
    );
    set_float32_matmul_precision(before);
    assert_eq!(float32_matmul_precision(), before);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random shapes, layouts, broadcast batches and half dtypes: the result is
    /// the exact product rounded once (within f32's accumulation error).
    #[test]
    fn matmul_matches_f64_reference(
        m in 1usize..40, k in 0usize..600, n in 1usize..40,
        batch_a in prop::sample::select(vec![vec![], vec![1], vec![3], vec![2, 1], vec![2, 3]]),
        batch_b in prop::sample::select(vec![vec![], vec![1], vec![3], vec![1, 3], vec![2, 3]]),
        ta in any::<bool>(), tb in any::<bool>(),
        dt in prop::sample::select(vec![DType::F16, DType::BF16, DType::F32]),
        seed in 0u64..1000,
    ) {
        // Batches that do not broadcast are errors, checked elsewhere.
        prop_assume!(strata_tensor::shape::broadcast_shapes("t", &batch_a, &batch_b).is_ok());
        let make = |batch: &[usize], r: usize, c: usize, t: bool, s: u64| -> Tensor {
            let mut shape = batch.to_vec();
            if t { shape.extend([c, r]); } else { shape.extend([r, c]); }
            let x = data(&shape, dt, s).unwrap();
            if t { x.transpose(-1, -2).unwrap() } else { x }
        };
        let a = make(&batch_a, m, k, ta, seed);
        let b = make(&batch_b, k, n, tb, seed + 7);
        check(&format!("{dt} {batch_a:?}x{m}x{k} @ {batch_b:?}x{k}x{n} ta={ta} tb={tb}"), &a, &b);
    }
}

/// `c.addmm(a, b)` against the f64 reference `c + a @ b`: one rounding of
/// the exact sum (plus f32's accumulation error over k terms), for every
/// broadcastable `c` (a bias row, a column, a scalar, a full matrix) and
/// transposed operands.
#[test]
fn addmm_adds_before_the_single_rounding() {
    for dtype in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        for (m, k, n) in [
            (7, 40, 9),
            (33, 300, 65),
            (1, 5, 1),
            (4, 1, 3),
            (130, 520, 260),
        ] {
            for (ci, c_shape) in [vec![n], vec![m, 1], vec![], vec![m, n], vec![1, n]]
                .into_iter()
                .enumerate()
            {
                let a = mat(m, k, ci % 2 == 1, dtype, 30 + m as u64);
                let b = mat(k, n, ci % 3 == 2, dtype, 31 + n as u64);
                let c = data(&c_shape, dtype, 32 + ci as u64).unwrap();
                let r = c.addmm(&a, &b).unwrap();
                let what = format!("{dtype} {m}x{k}x{n} c {c_shape:?}");
                assert_eq!(r.shape(), &[m, n], "{what}");
                assert_eq!(r.dtype(), dtype, "{what}");
                let (_, sum, abs) = reference(&a, &b);
                let cv = values(
                    &c.expand(&[m as i64, n as i64])
                        .unwrap()
                        .contiguous()
                        .unwrap(),
                );
                for (i, g) in values(&r).iter().enumerate() {
                    let s = sum[i] + cv[i];
                    let tol = ulp(dtype) * s.abs()
                        + 2.0 * k as f64 * 2f64.powi(-24) * (abs[i] + cv[i].abs())
                        + 1e-300;
                    assert!(
                        (g - s).abs() <= tol,
                        "{what}: element {i}: got {g}, exact {s}"
                    );
                }
            }
        }
    }
}

/// In bf16 a bias far below the product's last place still counts: the
/// product `1 + 2^-8` lies half-way between two bf16 values, and adding
/// `2^-9` before rounding gives `1 + 2^-7` (PyTorch's `addmm`), where
/// rounding the product first (to `1`, ties to even) and then adding gives
/// `1` again: the bias is lost.
#[test]
fn addmm_keeps_a_small_bias_that_mm_then_add_loses() {
    for dtype in [DType::BF16, DType::F16] {
        let (tiny, half_ulp) = if dtype == DType::BF16 {
            (2f64.powi(-9), 2f64.powi(-8))
        } else {
            (2f64.powi(-12), 2f64.powi(-11))
        };
        let a = Tensor::from_slice(&[1.0, half_ulp], &[1, 2], CPU)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let b = Tensor::ones(&[2, 1], dtype, CPU).unwrap();
        let bias = Tensor::full(&[1], tiny, dtype, CPU).unwrap();
        let fused = values(&bias.addmm(&a, &b).unwrap())[0];
        let split = values(&a.mm(&b).unwrap().add(&bias).unwrap())[0];
        assert_eq!(fused, 1.0 + 2.0 * half_ulp, "{dtype}: one rounding");
        assert_eq!(
            split, 1.0,
            "{dtype}: the bias is lost when the product is rounded first"
        );
    }
}

#[test]
fn addmm_integers_wrap_and_bad_operands_are_typed_errors() {
    let a = Tensor::from_slice(&[100i64, 2, 3, 4], &[2, 2], CPU).unwrap();
    let c = Tensor::from_slice(&[i64::MAX, 1], &[2], CPU).unwrap();
    let r = c.addmm(&a, &a).unwrap().to_vec::<i64>().unwrap();
    // [[100*100 + 2*3, 100*2 + 2*4], [3*100 + 4*3, 3*2 + 4*4]] + [MAX, 1], wrapping.
    assert_eq!(
        r,
        vec![
            i64::MAX.wrapping_add(10006),
            209,
            i64::MAX.wrapping_add(312),
            23
        ]
    );
    let f = Tensor::ones(&[2, 3], DType::F32, CPU).unwrap();
    let g = Tensor::ones(&[3, 4], DType::F32, CPU).unwrap();
    let bad_bias = Tensor::ones(&[3], DType::F32, CPU).unwrap();
    assert!(matches!(
        bad_bias.addmm(&f, &g),
        Err(TensorError::Shape { .. })
    ));
    let wide_bias = Tensor::ones(&[2, 2, 4], DType::F32, CPU).unwrap();
    assert!(matches!(
        wide_bias.addmm(&f, &g),
        Err(TensorError::Shape { .. })
    ));
    let bias64 = Tensor::ones(&[4], DType::F64, CPU).unwrap();
    assert!(matches!(
        bias64.addmm(&f, &g),
        Err(TensorError::DType { .. })
    ));
    let bias = Tensor::ones(&[4], DType::F32, CPU).unwrap();
    assert!(matches!(bias.addmm(&f, &f), Err(TensorError::Shape { .. })));
    assert!(matches!(
        bias.addmm(&f.unsqueeze(0).unwrap(), &g),
        Err(TensorError::Shape { .. })
    ));
    let bools = Tensor::ones(&[2, 2], DType::Bool, CPU).unwrap();
    assert!(bools.addmm(&bools, &bools).is_err());
}
