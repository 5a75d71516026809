//! Disagreements with PyTorch 2.15 that the random programs of
//! `benches/anchors/fuzz_conformance_ops.py` (conformance/fuzz_ops.json)
//! found, one test each, with the answers worked out by hand (and checked
//! against PyTorch on the CPU).

use strata_tensor::{DType, Device, Reduction, Result, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

#[test]
fn gather_and_scatter_add_take_int32_indices() -> Result<()> {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], CPU)?;
    let i32_idx = Tensor::from_slice(&[2i32, 0, 1, 1], &[2, 2], CPU)?;
    let i64_idx = i32_idx.to_dtype(DType::I64)?;
    assert_eq!(f64s(&x.gather(1, &i32_idx)?), vec![3.0, 1.0, 5.0, 5.0]);
    assert_eq!(f64s(&x.gather(1, &i32_idx)?), f64s(&x.gather(1, &i64_idx)?));
    let src = Tensor::from_slice(&[10.0f32, 20.0, 30.0, 40.0], &[2, 2], CPU)?;
    // Row 0 adds 10 at col 2 and 20 at col 0; row 1 adds 30 + 40 at col 1.
    assert_eq!(
        f64s(&x.scatter_add(1, &i32_idx, &src)?),
        vec![21.0, 2.0, 13.0, 4.0, 75.0, 6.0]
    );
    let y = x.deep_clone()?;
    y.scatter_add_(1, &i32_idx, &src)?;
    assert_eq!(f64s(&y), vec![21.0, 2.0, 13.0, 4.0, 75.0, 6.0]);
    // Other index dtypes are still rejected.
    let f = Tensor::from_slice(&[0.0f32, 1.0], &[1, 2], CPU)?;
    assert!(matches!(x.gather(1, &f), Err(TensorError::DType { .. })));
    Ok(())
}

#[test]
fn scatter_add_of_half_types_rounds_once_per_element() -> Result<()> {
    for dt in [DType::F16, DType::BF16] {
        // 2048 (f16) / 256 (bf16) + 1 + 1: one add at a time would round
        // each +1 away (the spacing there is 2); PyTorch gives +2.
        let base = if dt == DType::F16 { 2048.0 } else { 256.0 };
        let x = Tensor::from_slice(&[base, 0.0], &[2], CPU)?.to_dtype(dt)?;
        let idx = Tensor::from_slice(&[0i64, 0], &[2], CPU)?;
        let src = Tensor::from_slice(&[1.0f64, 1.0], &[2], CPU)?.to_dtype(dt)?;
        assert_eq!(f64s(&x.scatter_add(0, &idx, &src)?), vec![base + 2.0, 0.0]);
    }
    Ok(())
}

#[test]
fn var_and_std_of_nothing_are_nan_and_of_huge_values_finite() -> Result<()> {
    let e = Tensor::zeros(&[3, 0], DType::F32, CPU)?;
    for c in [-1.0, -0.5, 0.0, 1.0] {
        let v = f64s(&e.var(Some(&[1]), c, false)?);
        assert!(v.len() == 3 && v.iter().all(|x| x.is_nan()), "{c}: {v:?}");
    }
    // [1e30, -1e30, 2]: mean 2/3, the squared deviations sum to 2e60
    // (beyond f32), var 1e60 (inf in f32), std 1e30 (finite).
    for dt in [DType::F32, DType::BF16] {
        let x = Tensor::from_slice(&[1e30f64, -1e30, 2.0], &[3], CPU)?.to_dtype(dt)?;
        let want = f64s(&x)[0];
        let s = f64s(&x.std(None, 1.0, false)?)[0];
        assert!((s - want).abs() <= want * 1e-2, "{dt}: std {s}");
        assert_eq!(f64s(&x.var(None, 1.0, false)?)[0], f64::INFINITY);
    }
    Ok(())
}

#[test]
fn logsumexp_with_no_dims_of_empty_and_0d_inputs() -> Result<()> {
    let e = Tensor::zeros(&[2, 0], DType::I64, CPU)?;
    let r = e.logsumexp(&[], false)?;
    assert_eq!(r.shape(), &[] as &[usize]);
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(f64s(&r), vec![f64::NEG_INFINITY]);
    let s = Tensor::from_slice(&[1.5f64], &[], CPU)?;
    assert_eq!(f64s(&s.logsumexp(&[], false)?), vec![1.5]);
    // A non-empty tensor still fails, as in PyTorch.
    let a = Tensor::ones(&[2, 3], DType::F32, CPU)?;
    assert!(matches!(
        a.logsumexp(&[], false),
        Err(TensorError::Broadcast { .. })
    ));
    Ok(())
}

#[test]
fn mse_loss_promotes_after_broadcasting() -> Result<()> {
    // An integer operand beside a float one is fine.
    let x = Tensor::from_slice(&[1.5f32, 2.0, 0.0], &[3], CPU)?;
    let t = Tensor::from_slice(&[1i64, 5, 3], &[3], CPU)?;
    // (0.25 + 9 + 9) / 3
    let m = f64s(&x.mse_loss(&t, Reduction::Mean, None)?)[0];
    assert!((m - 18.25 / 3.0).abs() < 1e-6);
    let ti = t.to_dtype(DType::I32)?;
    assert!(matches!(
        ti.mse_loss(&ti, Reduction::Mean, None),
        Err(TensorError::DType { .. })
    ));
    // f16 [3] against a bf16 0-d target: both dimensioned after the
    // broadcast, so f16 with bf16 gives f32.
    let h = Tensor::from_slice(&[1.0f64, 2.0, 3.0], &[3], CPU)?.to_dtype(DType::F16)?;
    let b = Tensor::from_slice(&[0.5f64], &[], CPU)?.to_dtype(DType::BF16)?;
    assert_eq!(h.mse_loss(&b, Reduction::Sum, None)?.dtype(), DType::F32);
    // A weighted mean divides by the weight's own sum, not by the sum of
    // the weight broadcast to the target's larger shape:
    // input [1, 2], target [[0, 0], [1, 1]], weight [1, 3]:
    // Σ w·d² = (1·1 + 3·4) + (1·0 + 3·1) = 16, Σ w = 4.
    let i = Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU)?;
    let tg = Tensor::from_slice(&[0.0f32, 0.0, 1.0, 1.0], &[2, 2], CPU)?;
    let w = Tensor::from_slice(&[1.0f32, 3.0], &[2], CPU)?;
    assert_eq!(
        f64s(&i.mse_loss(&tg, Reduction::Mean, Some(&w))?),
        vec![4.0]
    );
    Ok(())
}

#[test]
fn layer_norm_parameters_share_one_dtype() -> Result<()> {
    let x = Tensor::ones(&[2, 3], DType::F16, CPU)?;
    let w16 = Tensor::ones(&[3], DType::F16, CPU)?;
    let b32 = Tensor::zeros(&[3], DType::F32, CPU)?;
    let w32 = Tensor::ones(&[3], DType::F32, CPU)?;
    let b16 = Tensor::zeros(&[3], DType::F16, CPU)?;
    for (w, b) in [(&w16, &b32), (&w32, &b16)] {
        assert!(matches!(
            x.layer_norm(&[3], Some(w), Some(b), 1e-5),
            Err(TensorError::DType { .. })
        ));
    }
    assert_eq!(
        x.layer_norm(&[3], Some(&w32), Some(&b32), 1e-5)?.dtype(),
        DType::F16
    );
    assert!(x.layer_norm(&[3], Some(&w16), Some(&b16), 1e-5).is_ok());
    Ok(())
}

#[test]
fn argument_checks_in_pytorchs_order_and_empty_edge_cases() -> Result<()> {
    // chunk checks the rank before the count.
    let s = Tensor::from_slice(&[1.0f32], &[], CPU)?;
    assert!(matches!(s.chunk(-1, 0), Err(TensorError::Shape { .. })));
    // cat of nothing but empty 1-D tensors ignores the dim.
    let e = Tensor::zeros(&[0], DType::I32, CPU)?;
    for d in [-2, 0, 5] {
        assert_eq!(Tensor::cat(&[&e], d)?.shape(), &[0]);
    }
    // In-place ops on an empty expanded tensor write nothing and succeed.
    let z = Tensor::zeros(&[0, 1], DType::F32, CPU)?.expand(&[0, 3])?;
    z.erf_()?;
    z.pow_(2.0)?;
    Ok(())
}

#[test]
fn cross_entropy_of_rows_of_huge_logits_does_not_cancel() -> Result<()> {
    use strata_tensor::CrossEntropyArgs;
    // Row [-1e30, -1e30]: both classes have probability 1/2, so the loss
    // is log 2, though logsumexp = -1e30 + log 2 rounds to -1e30.
    let x = Tensor::from_slice(&[-1e30f32, -1e30], &[1, 2], CPU)?;
    let t = Tensor::from_slice(&[1i64], &[1], CPU)?;
    for smoothing in [0.0, 0.25] {
        let args = CrossEntropyArgs {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Sum,
            label_smoothing: smoothing,
        };
        let l = f64s(&x.cross_entropy(&t, args)?)[0];
        assert!((l - 2f64.ln()).abs() < 1e-6, "{smoothing}: {l}");
        // The same with probability targets.
        let p = Tensor::from_slice(&[0.0f32, 1.0], &[1, 2], CPU)?;
        let l = f64s(&x.cross_entropy(&p, args)?)[0];
        assert!((l - 2f64.ln()).abs() < 1e-6, "{smoothing}: {l}");
    }
    Ok(())
}

#[test]
fn bool_tensor_to_a_bool_scalar_power() -> Result<()> {
    let b = Tensor::from_slice(&[true, false], &[2], CPU)?;
    assert_eq!(b.pow(true)?.to_vec::<bool>()?, vec![true, false]);
    assert_eq!(b.pow(false)?.to_vec::<bool>()?, vec![true, true]);
    let c = b.deep_clone()?;
    c.pow_(false)?;
    assert_eq!(c.to_vec::<bool>()?, vec![true, true]);
    // A bool tensor exponent is still rejected, and so is a bool base.
    assert!(matches!(b.pow(&b), Err(TensorError::DType { .. })));
    assert!(matches!(
        Tensor::scalar_pow(true, &b),
        Err(TensorError::DType { .. })
    ));
    // An int scalar promotes to i64.
    assert_eq!(b.pow(2)?.to_vec::<i64>()?, vec![1, 0]);
    Ok(())
}

#[test]
fn smoothed_cross_entropy_reduces_both_parts_before_mixing() -> Result<()> {
    use strata_tensor::CrossEntropyArgs;
    // The only target that is not ignored has weight -0.0, so Σ w = -0.0:
    // L = 0/0 = NaN, while S/0 is infinite; (1 - ε)·L + (ε/C)·S is NaN.
    let x = Tensor::from_slice(&[3.625f64, -1.375, 0.5, 0.875], &[2, 2], CPU)?;
    let t = Tensor::from_slice(&[1i64, 0], &[2], CPU)?;
    let w = Tensor::from_slice(&[-0.0f64, 0.375], &[2], CPU)?;
    let args = CrossEntropyArgs {
        weight: Some(&w),
        ignore_index: 1,
        reduction: Reduction::Mean,
        label_smoothing: 0.5,
    };
    assert!(f64s(&x.cross_entropy(&t, args)?)[0].is_nan());
    Ok(())
}

#[test]
fn integer_pow_to_a_negative_scalar_is_a_value_error_before_overlap() -> Result<()> {
    let x = Tensor::from_slice(&[6i64, -1, 2], &[3], CPU)?.expand(&[2, 3])?;
    assert!(matches!(x.pow_(-1), Err(TensorError::Value { .. })));
    assert!(matches!(x.pow_(2), Err(TensorError::Overlap { .. })));
    Ok(())
}

/// PyTorch 2.15 on the CPU: `matmul` sends operands it does not fold into one
/// matrix product through `bmm`, which checks the dtypes only when it has
/// something to compute. An empty product (no output element, or an empty
/// inner size) of mixed dtypes is then an empty or all-zero tensor of the
/// second operand's dtype; a folded one (`mm`, `mv`) is still a dtype error
/// (fuzz_core seeds 72 and 114).
#[test]
fn empty_batched_products_of_mixed_dtypes_take_the_second_dtype() -> Result<()> {
    let z = |shape: &[usize], d: DType| Tensor::zeros(shape, d, CPU).unwrap();
    // (a shape, b shape, result shape, or None for a dtype error)
    type Case<'a> = (&'a [usize], &'a [usize], Option<&'a [usize]>);
    let cases: &[Case] = &[
        (&[2, 0, 3], &[2, 3, 4], Some(&[2, 0, 4])),
        (&[4, 1, 0, 3], &[1, 3, 2], Some(&[4, 1, 0, 2])),
        (&[0, 3], &[2, 3, 4], Some(&[2, 0, 4])),
        (&[2, 3, 0], &[2, 0, 4], Some(&[2, 3, 4])),
        (&[2, 1, 3], &[3, 2, 3, 0], Some(&[3, 2, 1, 0])),
        (&[3, 4], &[2, 4, 0], Some(&[2, 3, 0])),
        // Folded: mm or mv, which check the dtypes.
        (&[0, 2, 3], &[3, 4], None),
        (&[2, 3, 0], &[0, 4], None),
        (&[2, 0, 3], &[3], None),
        (&[3], &[2, 0, 3, 4], None),
        (&[4], &[2, 4, 0], None),
        (&[2, 3, 4], &[4, 0], None),
    ];
    for &(sa, sb, want) in cases {
        for (da, db) in [
            (DType::F32, DType::F16),
            (DType::I32, DType::I64),
            (DType::Bool, DType::F32),
        ] {
            let r = z(sa, da).matmul(&z(sb, db));
            match want {
                Some(shape) => {
                    let r = r.unwrap_or_else(|e| panic!("{sa:?} @ {sb:?} ({da}, {db}): {e}"));
                    assert_eq!((r.shape(), r.dtype()), (shape, db), "{sa:?} @ {sb:?}");
                    assert!(f64s(&r).iter().all(|&v| v == 0.0));
                }
                None => assert!(
                    matches!(r, Err(TensorError::DType { .. })),
                    "{sa:?} @ {sb:?} ({da}, {db}): {r:?}"
                ),
            }
        }
    }
    // A batch that is not contiguous is not folded: bmm, so no error.
    let a = z(&[3, 2, 4], DType::F32).permute(&[1, 0, 2])?;
    let r = a.matmul(&z(&[4, 0], DType::F16))?;
    assert_eq!((r.shape(), r.dtype()), (&[2, 3, 0][..], DType::F16));
    // bmm itself, and a product with something to compute still checks.
    let r = z(&[2, 3, 0], DType::F32).bmm(&z(&[2, 0, 4], DType::I64))?;
    assert_eq!((r.shape(), r.dtype()), (&[2, 3, 4][..], DType::I64));
    let bools = z(&[2, 3, 0], DType::Bool).bmm(&z(&[2, 0, 4], DType::Bool))?;
    assert_eq!(bools.dtype(), DType::Bool);
    assert!(z(&[2, 3, 4], DType::F32)
        .matmul(&z(&[2, 4, 5], DType::F16))
        .is_err());
    assert!(z(&[2, 3, 4], DType::Bool)
        .bmm(&z(&[2, 4, 5], DType::Bool))
        .is_err());
    Ok(())
}

/// PyTorch 2.15: `clamp` with both bounds given and one of them NaN fills
/// the result with NaN without converting the other bound, which may then
/// lie outside the dtype (fuzz_core seed 112).
#[test]
fn clamp_with_a_nan_bound_fills_nan_before_checking_the_other() -> Result<()> {
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3], CPU)?.to_dtype(DType::F16)?;
    let r = x.clamp(Some(f64::NAN), Some(i64::MIN))?;
    assert!(f64s(&r).iter().all(|v| v.is_nan()));
    assert_eq!(r.dtype(), DType::F16);
    x.clamp_(Some(1e10), Some(f64::NAN))?;
    assert!(f64s(&x).iter().all(|v| v.is_nan()));
    // An integer tensor gives f32 NaNs out of place; in place it cannot hold them.
    let i = Tensor::from_slice(&[1i32, 2], &[2], CPU)?;
    let r = i.clamp(Some(f64::NAN), Some(0i64))?;
    assert_eq!(r.dtype(), DType::F32);
    assert!(f64s(&r).iter().all(|v| v.is_nan()));
    assert!(i.clamp_(Some(f64::NAN), Some(0i64)).is_err());
    // Without a NaN the out-of-range bound is still an error.
    assert!(x.clamp(Some(0.0), Some(i64::MIN)).is_err());
    Ok(())
}

#[test]
fn an_expanded_operand_of_another_dtype_is_not_a_scalar() -> Result<()> {
    use strata_tensor::RoundingMode;
    // PyTorch on the CPU converts an operand of another dtype into a new
    // tensor of its own shape first, so an expanded u8 or i64 operand of an
    // f16/bf16 computation is no longer one stored element, and the kernel
    // for two half tensors runs (every step rounded to the dtype), not the
    // one for a scalar (f32 throughout). Figures from PyTorch 2.15.
    let a = Tensor::from_slice(&[65504.0f32, 1.0], &[2], CPU)?.to_dtype(DType::F16)?;
    let d = Tensor::from_slice(&[11u8], &[1], CPU)?;
    // 65504 - 10 rounds back to 65504 in f16, and 65504 / 11 to 5956.
    let expanded = d.expand(&[2])?;
    assert_eq!(
        f64s(&a.div_mode(&expanded, RoundingMode::Floor)?),
        vec![5956.0, 0.0]
    );
    assert_eq!(
        f64s(&a.div_mode(&expanded, RoundingMode::Trunc)?),
        vec![5956.0, 0.0]
    );
    // A single element stays a scalar: floor(65504 / 11) = 5954 in f32,
    // then 5952 (round half to even) in f16.
    assert_eq!(
        f64s(&a.div_mode(&d, RoundingMode::Floor)?),
        vec![5952.0, 0.0]
    );
    // An expanded f16 divisor needs no conversion: still a scalar.
    let h = d.to_dtype(DType::F16)?.expand(&[2])?;
    assert_eq!(
        f64s(&a.div_mode(&h, RoundingMode::Floor)?),
        vec![5952.0, 0.0]
    );
    // Multiplication and true division by an expanded i64 2049 use the
    // value rounded to f16 (2048); a single element uses 2049.
    let x = Tensor::from_slice(&[1.0f32, 3.0, 0.5], &[3], CPU)?.to_dtype(DType::F16)?;
    let c = Tensor::from_slice(&[2049i64], &[1], CPU)?;
    assert_eq!(
        f64s(&x.mul(&c.expand(&[3])?)?),
        vec![2048.0, 6144.0, 1024.0]
    );
    assert_eq!(f64s(&x.mul(&c)?), vec![2048.0, 6148.0, 1024.0]);
    assert_eq!(
        f64s(&x.div(&c.expand(&[3])?)?),
        vec![0.00048828125, 0.00146484375, 0.000244140625]
    );
    assert_eq!(
        f64s(&x.div(&c)?),
        vec![
            0.00048804283142089844,
            0.0014638900756835938,
            0.00024402141571044922
        ]
    );
    Ok(())
}

#[test]
fn nll_loss_adds_the_rows_in_pytorchs_cpu_order() -> Result<()> {
    // PyTorch's CPU nll_loss sums the rows in an 8-level cascade of 16-row
    // steps in which row 0 reaches the top level alone and is added last.
    // Where losses cancel the order shows; the figures are PyTorch 2.15's
    // (and follow by hand: (1e30 - 1e30) + 0.875 against (-1e30 + 0.875) +
    // 1e30).
    let lp = Tensor::full(&[3, 3], -1.0, DType::F32, CPU)?;
    let w = Tensor::from_slice(&[1e30f32, 0.875, -1e30], &[3], CPU)?;
    let loss = |t: &[i64], r: Reduction| -> Result<f64> {
        let t = Tensor::from_slice(t, &[3], CPU)?;
        Ok(f64s(&lp.nll_loss(&t, Some(&w), -100, r)?)[0])
    };
    assert_eq!(loss(&[1, 0, 2], Reduction::Sum)?, 0.875);
    assert_eq!(loss(&[1, 0, 2], Reduction::Mean)?, 1.0);
    assert_eq!(loss(&[0, 2, 1], Reduction::Sum)?, 0.0);
    assert!(loss(&[0, 2, 1], Reduction::Mean)?.is_nan());
    // 20 rows: row 0 (3) on top; rows 1-16 (±1e30 alternating, then 0.5)
    // moved up a level after row 16; rows 17-19 (2e30, -2e30, 0.25) last in
    // the first level: (0.25 + 1e30) + 3 = 1e30, and the weights alike.
    let c = 20;
    let lp = Tensor::full(&[c, c], -1.0, DType::F32, CPU)?;
    let mut wv = vec![3.0f32];
    wv.extend((1..16).map(|i| if i % 2 == 1 { 1e30f32 } else { -1e30 }));
    wv.extend([0.5, 2e30, -2e30, 0.25]);
    let w = Tensor::from_vec(wv, &[c], CPU)?;
    let t = Tensor::arange(0, c as i64, 1, Some(DType::I64), CPU)?;
    let sum = f64s(&lp.nll_loss(&t, Some(&w), -100, Reduction::Sum)?)[0];
    assert_eq!(sum, 1e30f32 as f64);
    let mean = f64s(&lp.nll_loss(&t, Some(&w), -100, Reduction::Mean)?)[0];
    assert_eq!(mean, 1.0);
    // An ignored row is skipped, not added as 0 (its step does not move the
    // levels): targets [ignored, 1, 0, 2] sum as rows 1-3 with row 1 first.
    let lp = Tensor::full(&[4, 3], -1.0, DType::F32, CPU)?;
    let w = Tensor::from_slice(&[1e30f32, 0.875, -1e30], &[3], CPU)?;
    let t = Tensor::from_slice(&[-100i64, 1, 0, 2], &[4], CPU)?;
    // Rows 1-3 all in the first level: (0.875 + 1e30) - 1e30 = 0.
    assert_eq!(
        f64s(&lp.nll_loss(&t, Some(&w), -100, Reduction::Sum)?)[0],
        0.0
    );
    Ok(())
}

#[test]
fn var_of_a_constant_is_zero_however_its_mean_rounds() -> Result<()> {
    // fuzz_ops.s495_var_0179: ten copies of -1e200 (an expanded 0-d
    // tensor) summed in order give -9.999999999999998e200, a mean one ulp
    // off -1e200 whose deviations (~1e184) square to +inf; PyTorch 2.15
    // gives 0 (its mean is exact), and so does the refined mean.
    let x = Tensor::scalar(-1e200f64, DType::F64, CPU)?.expand(&[2, 5])?;
    assert_eq!(f64s(&x.std(Some(&[1, -2]), 1.0, false)?), vec![0.0]);
    assert_eq!(f64s(&x.std(Some(&[1]), 0.0, false)?), vec![0.0, 0.0]);
    assert_eq!(f64s(&x.contiguous()?.var(None, 1.0, false)?), vec![0.0]);
    // Deviations that really are huge still square to +inf, and inf or NaN
    // inputs give NaN (PyTorch's answers).
    let wide = Tensor::from_slice(&[-1e200f64, 1e200], &[2], CPU)?;
    assert_eq!(f64s(&wide.var(None, 1.0, false)?), vec![f64::INFINITY]);
    for bad in [f64::INFINITY, f64::NAN] {
        let t = Tensor::from_slice(&[1.0f64, bad], &[2], CPU)?;
        assert!(f64s(&t.var(None, 1.0, false)?)[0].is_nan(), "{bad}");
    }
    // A whole f32 tensor's mean is taken in f32, as PyTorch's CPU kernel
    // does: 21 copies of 3.3e37 sum past f32's range, and the variance is
    // +inf there (PyTorch 2.15), while row by row it is 0.
    let big = Tensor::scalar(3.3e37f32, DType::F32, CPU)?.expand(&[7, 3])?;
    assert_eq!(
        f64s(&big.var(Some(&[0, 1]), 1.0, false)?),
        vec![f64::INFINITY]
    );
    assert_eq!(f64s(&big.var(Some(&[1]), 1.0, false)?), vec![0.0; 7]);
    Ok(())
}

#[test]
fn strided_runs_are_summed_in_pytorchs_cpu_order() -> Result<()> {
    // fuzz_ops.s287_mse_loss_0167: eight copies of f32 1e30 (1.0000000150474662e30, an
    // expanded [1] tensor) sum to 8.00000012037973e30 in PyTorch 2.15 (four
    // interleaved partial sums: 2x each, then added), not to the
    // 7.99999951591682e30 of adding them one after the other (which the
    // contiguous copy gives, in PyTorch too).
    let x = Tensor::from_slice(&[1e30f32], &[1], CPU)?.expand(&[4, 2])?;
    assert_eq!(f64s(&x.sum(None, false)?), vec![8.00000012037973e30]);
    assert_eq!(
        f64s(&x.contiguous()?.sum(None, false)?),
        vec![7.99999951591682e30]
    );
    // Ten copies of -1e200: -9.999999999999999e200 (in order: ...998e200).
    let y = Tensor::scalar(-1e200f64, DType::F64, CPU)?.expand(&[2, 5])?;
    assert_eq!(f64s(&y.sum(None, false)?), vec![-9.999999999999999e200]);
    // Every other element of 140: 1e30 at 0 and -1e30 at 65 of the 70 fall in
    // different partial sums, so the 68 ones of the other partial sums
    // survive in part: 34 (PyTorch), where adding in order gives 4.
    let mut v = vec![-7.5f64; 140];
    for (i, e) in v.iter_mut().step_by(2).enumerate() {
        *e = match i {
            0 => 1e30,
            65 => -1e30,
            _ => 1.0,
        };
    }
    let z = Tensor::from_slice(&v, &[140], CPU)?.slice(0, Some(0), None, 2)?;
    assert_eq!(f64s(&z.sum(None, false)?), vec![34.0]);
    assert_eq!(f64s(&z.mean(None, false)?), vec![34.0 / 70.0]);
    // A bf16 run's mean widens it to f32 first, which PyTorch copies
    // contiguously: the contiguous f32 order (0.75), not the strided one
    // (0.5); its sum stays in the strided order (20).
    let mut w = vec![1.0f64; 80];
    w[0] = 1e30;
    w[18] = -1e30;
    let b = Tensor::from_slice(&w, &[80], CPU)?
        .to_dtype(DType::BF16)?
        .slice(0, Some(0), None, 2)?;
    assert_eq!(f64s(&b.sum(None, false)?), vec![20.0]);
    assert_eq!(f64s(&b.mean(None, false)?), vec![0.75]);
    Ok(())
}

#[test]
fn contiguous_runs_are_summed_in_pytorchs_cpu_order() -> Result<()> {
    // PyTorch 2.15's CPU figures for ones with 1e30 and -1e30 in them: the
    // order of the additions decides which ones survive. Adding in order
    // gives 4, 1, 8 and 6 here.
    let run = |n: usize, big: &[(usize, f64)], dt: DType| -> Result<Tensor> {
        let mut v = vec![1.0f64; n];
        for &(i, x) in big {
            v[i] = x;
        }
        Tensor::from_slice(&v, &[n], CPU)?.to_dtype(dt)
    };
    // f64: vectors of 4 lanes, each lane a cascade over the vectors.
    let x = run(70, &[(0, 1e30), (65, -1e30)], DType::F64)?;
    assert_eq!(f64s(&x.sum(None, false)?), vec![34.0]);
    // f32: vectors of 8 lanes; shorter than a vector, four partial sums.
    let x = run(40, &[(0, 1e30), (9, -1e30)], DType::F32)?;
    assert_eq!(f64s(&x.sum(None, false)?), vec![30.0]);
    let x = run(6, &[(0, 1e30), (4, -1e30)], DType::F32)?;
    assert_eq!(f64s(&x.sum(None, false)?), vec![4.0]);
    // bf16 sums in f32 (16 to a vector); its mean is the sum of the values
    // widened to f32, in f32's order, divided.
    let x = run(11, &[(0, 1e30), (9, -1e30)], DType::BF16)?;
    assert_eq!(f64s(&x.sum(None, false)?), vec![7.0]);
    assert_eq!(f64s(&x.mean(None, false)?), vec![0.63671875]);
    let x = run(40, &[(0, 1e30), (9, -1e30)], DType::BF16)?;
    assert_eq!(f64s(&x.sum(None, false)?), vec![24.0]);
    assert_eq!(f64s(&x.mean(None, false)?), vec![0.75]);
    Ok(())
}
