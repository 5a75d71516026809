//! The ops of issue 12 on the CPU against simple f64 reference computations,
//! on shapes large enough for the parallel paths (above 64 Ki elements), on
//! every dim, and on non-contiguous inputs; plus the creation ops' invariants.

use proptest::prelude::*;
use strata_tensor::{DType, Device, GeluApprox, Result, Tensor};

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, seed, Device::Cpu).unwrap()
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The reference of an op along `dim`: `f` maps each line (in order) to its outputs.
fn along(x: &[f64], shape: &[usize], dim: usize, f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let st = strides(shape);
    let n = shape[dim];
    let mut out = vec![0.0; x.len()];
    for start in 0..x.len() {
        if !(start / st[dim]).is_multiple_of(n) {
            continue;
        }
        let line: Vec<f64> = (0..n).map(|k| x[start + k * st[dim]]).collect();
        for (k, v) in f(&line).into_iter().enumerate() {
            out[start + k * st[dim]] = v;
        }
    }
    out
}

fn softmax_ref(l: &[f64]) -> Vec<f64> {
    let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = l.iter().map(|v| (v - m).exp()).sum();
    l.iter().map(|v| (v - m).exp() / s).collect()
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn softmax_log_softmax_cumsum_on_large_inputs_every_dim() -> Result<()> {
    for shape in [
        vec![300usize, 400],
        vec![7, 129, 90],
        vec![70_000],
        vec![3, 70_000],
    ] {
        let x = randn(&shape, 17).mul(3.0)?;
        let xv = x.to_vec::<f64>()?;
        for dim in 0..shape.len() {
            let what = format!("{shape:?} dim {dim}");
            let sm = softmax_ref;
            close(
                &x.softmax(dim as i64, None)?.to_vec::<f64>()?,
                &along(&xv, &shape, dim, sm),
                1e-12,
                &what,
            );
            let lsm = |l: &[f64]| softmax_ref(l).into_iter().map(f64::ln).collect();
            close(
                &x.log_softmax(dim as i64, None)?.to_vec::<f64>()?,
                &along(&xv, &shape, dim, lsm),
                1e-9,
                &what,
            );
            let cs = |l: &[f64]| {
                let mut acc = 0.0;
                l.iter()
                    .map(|v| {
                        acc += v;
                        acc
                    })
                    .collect()
            };
            close(
                &x.cumsum(dim as i64, None)?.to_vec::<f64>()?,
                &along(&xv, &shape, dim, cs),
                1e-9,
                &what,
            );
            // f32 and bf16 inputs compute in f32 (bf16 rounds once at the end).
            let x32 = x.to_dtype(DType::F32)?;
            let r32 = along(
                &x32.to_vec::<f32>()?
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect::<Vec<_>>(),
                &shape,
                dim,
                sm,
            );
            close(
                &x32.softmax(dim as i64, None)?
                    .to_vec::<f32>()?
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect::<Vec<_>>(),
                &r32,
                1e-5,
                &what,
            );
        }
    }
    Ok(())
}

#[test]
fn softmax_of_non_contiguous_inputs_matches_the_contiguous_copy() -> Result<()> {
    let base = randn(&[40, 3, 50], 3);
    for v in [
        base.transpose(0, 2)?,
        base.slice(2, Some(1), None, 2)?,
        base.narrow(0, 5, 20)?,
    ] {
        for dim in 0..3 {
            let a = v.softmax(dim, None)?.to_vec::<f64>()?;
            let b = v.contiguous()?.softmax(dim, None)?.to_vec::<f64>()?;
            assert_eq!(a, b);
        }
    }
    Ok(())
}

#[test]
fn special_rows_follow_torch() -> Result<()> {
    let ninf = f32::NEG_INFINITY;
    let x = Tensor::from_slice(
        &[1.0f32, f32::INFINITY, f32::NAN, 0.0, ninf, ninf, ninf, 1.0],
        &[4, 2],
        Device::Cpu,
    )?;
    let s = x.softmax(1, None)?.to_vec::<f32>()?;
    assert!(s[..6].iter().all(|v| v.is_nan()), "{s:?}");
    assert_eq!(&s[6..], &[0.0, 1.0]);
    let l = x.log_softmax(1, None)?.to_vec::<f32>()?;
    assert_eq!(&l[6..], &[ninf, 0.0]);
    assert!(Tensor::from_slice(&[1i32, 2], &[2], Device::Cpu)?
        .softmax(0, None)
        .is_err());
    assert!(x.softmax(2, None).is_err());
    assert!(x.cumsum(0, Some(DType::Bool)).is_err());
    Ok(())
}

#[test]
fn creation_ops() -> Result<()> {
    let e = Tensor::eye(3, Some(5), DType::BF16, Device::Cpu)?;
    let v = e.to_vec::<half::bf16>()?;
    for r in 0..3 {
        for c in 0..5 {
            assert_eq!(v[r * 5 + c].to_f32(), if r == c { 1.0 } else { 0.0 });
        }
    }
    assert_eq!(
        Tensor::eye(0, None, DType::F32, Device::Cpu)?.shape(),
        &[0, 0]
    );
    let r = Tensor::randint(-2, 3, &[5000], None, 9, Device::Cpu)?;
    let v = r.to_vec::<i64>()?;
    for k in -2..3 {
        let c = v.iter().filter(|&&x| x == k).count();
        assert!(
            (800..1200).contains(&c),
            "value {k} drawn {c} times of 5000"
        );
    }
    assert!(Tensor::randint(0, 300, &[2], Some(DType::U8), 1, Device::Cpu).is_err());
    assert!(Tensor::randint(0, 5, &[2], Some(DType::Bool), 1, Device::Cpu).is_err());
    let x = Tensor::zeros(&[2, 3], DType::F16, Device::Cpu)?;
    assert!(x.full_like(70000.0, None).is_err());
    assert_eq!(
        x.full_like(2.5, None)?.to_vec::<half::f16>()?[0].to_f32(),
        2.5
    );
    let u = x.rand_like(None, 3)?;
    assert_eq!((u.dtype(), u.shape()), (DType::F16, &[2usize, 3][..]));
    assert_eq!(
        x.randn_like(Some(DType::F64), 3)?.to_vec::<f64>()?,
        Tensor::randn(&[2, 3], DType::F64, 3, Device::Cpu)?.to_vec::<f64>()?
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// softmax is invariant to adding a constant along its dim, sums to 1,
    /// and its log equals log_softmax.
    #[test]
    fn softmax_invariants(m in 1usize..6, n in 1usize..40, c in -50.0f64..50.0, seed in any::<u64>()) {
        let x = randn(&[m, n], seed).mul(5.0).unwrap();
        let a = x.softmax(1, None).unwrap();
        let b = x.add(c).unwrap().softmax(1, None).unwrap();
        close(&a.to_vec::<f64>().unwrap(), &b.to_vec::<f64>().unwrap(), 1e-12, "shift");
        let sums = a.sum(Some(&[1]), false).unwrap().to_vec::<f64>().unwrap();
        prop_assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-12));
        close(&a.log().unwrap().to_vec::<f64>().unwrap(), &x.log_softmax(1, None).unwrap().to_vec::<f64>().unwrap(), 1e-9, "log");
    }

    /// The element-wise math against f64 formulas (f32 inputs, f32 tolerance).
    #[test]
    fn unary_math_matches_formulas(n in 1usize..64, seed in any::<u64>()) {
        let x = randn(&[n], seed).mul(3.0).unwrap().to_dtype(DType::F32).unwrap();
        let xv: Vec<f64> = x.to_vec::<f32>().unwrap().iter().map(|&v| f64::from(v)).collect();
        let check = |t: Tensor, f: &dyn Fn(f64) -> f64, what: &str| {
            let got: Vec<f64> = t.to_vec::<f32>().unwrap().iter().map(|&v| f64::from(v)).collect();
            let want: Vec<f64> = xv.iter().map(|&v| f(v)).collect();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-6 + 2e-6 * w.abs() || (g.is_nan() && w.is_nan()), "{what}: {g} vs {w}");
            }
        };
        check(x.tanh().unwrap(), &f64::tanh, "tanh");
        check(x.sigmoid().unwrap(), &|v| 1.0 / (1.0 + (-v).exp()), "sigmoid");
        check(x.silu().unwrap(), &|v| v / (1.0 + (-v).exp()), "silu");
        check(x.sin().unwrap(), &f64::sin, "sin");
        check(x.expm1().unwrap(), &f64::exp_m1, "expm1");
        check(x.abs().unwrap().log1p().unwrap(), &|v| v.abs().ln_1p(), "log1p");
        check(x.abs().unwrap().sqrt().unwrap(), &|v| v.abs().sqrt(), "sqrt");
        check(x.gelu(GeluApprox::Tanh).unwrap(), &|v| 0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh()), "gelu tanh");
        check(x.pow(2).unwrap(), &|v| v * v, "pow 2");
        check(x.abs().unwrap().pow(1.5).unwrap(), &|v| v.abs().powf(1.5), "pow 1.5");
    }
}

/// The reference of a two-input op along `dim`: `f` maps each pair of lines to outputs.
fn along2(
    a: &[f64],
    b: &[f64],
    shape: &[usize],
    dim: usize,
    f: impl Fn(&[f64], &[f64]) -> Vec<f64>,
) -> Vec<f64> {
    let st = strides(shape);
    let n = shape[dim];
    let mut out = vec![0.0; a.len()];
    for start in 0..a.len() {
        if !(start / st[dim]).is_multiple_of(n) {
            continue;
        }
        let la: Vec<f64> = (0..n).map(|k| a[start + k * st[dim]]).collect();
        let lb: Vec<f64> = (0..n).map(|k| b[start + k * st[dim]]).collect();
        for (k, v) in f(&la, &lb).into_iter().enumerate() {
            out[start + k * st[dim]] = v;
        }
    }
    out
}

/// The fused softmax / log-softmax gradients against `y (g - sum(g y))` and
/// `g - exp(y) sum(g)` computed line by line in f64, on every dim of shapes
/// large enough for the parallel paths, in f64, f32 and bf16.
#[test]
fn softmax_backward_matches_the_formula_on_every_dim() -> Result<()> {
    for (shape, seed) in [
        (vec![3usize, 70, 400], 1u64),
        (vec![257, 300], 2),
        (vec![5], 3),
    ] {
        for dim in 0..shape.len() {
            let x = randn(&shape, seed + 10 * dim as u64);
            let g = randn(&shape, seed + 100 + dim as u64);
            for log in [false, true] {
                let y = if log {
                    x.log_softmax(dim as i64, None)?
                } else {
                    x.softmax(dim as i64, None)?
                };
                let (yv, gv) = (y.to_vec::<f64>()?, g.to_vec::<f64>()?);
                let want = along2(&gv, &yv, &shape, dim, |gl, yl| {
                    if log {
                        let s: f64 = gl.iter().sum();
                        gl.iter().zip(yl).map(|(g, y)| g - y.exp() * s).collect()
                    } else {
                        let s: f64 = gl.iter().zip(yl).map(|(g, y)| g * y).sum();
                        gl.iter().zip(yl).map(|(g, y)| y * (g - s)).collect()
                    }
                });
                for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 1e-5), (DType::BF16, 2e-2)] {
                    let (yd, gd) = (y.to_dtype(dtype)?, g.to_dtype(dtype)?);
                    let got = if log {
                        yd.log_softmax_backward(&gd, dim as i64)?
                    } else {
                        yd.softmax_backward(&gd, dim as i64)?
                    };
                    assert_eq!(got.dtype(), dtype);
                    // The reference of the rounded inputs, so only the op's own error counts.
                    let (yr, gr) = (
                        yd.to_dtype(DType::F64)?.to_vec::<f64>()?,
                        gd.to_dtype(DType::F64)?.to_vec::<f64>()?,
                    );
                    let want_r = if dtype == DType::F64 {
                        want.clone()
                    } else {
                        along2(&gr, &yr, &shape, dim, |gl, yl| {
                            if log {
                                let s: f64 = gl.iter().sum();
                                gl.iter().zip(yl).map(|(g, y)| g - y.exp() * s).collect()
                            } else {
                                let s: f64 = gl.iter().zip(yl).map(|(g, y)| g * y).sum();
                                gl.iter().zip(yl).map(|(g, y)| y * (g - s)).collect()
                            }
                        })
                    };
                    let what = format!("{shape:?} dim {dim} log {log} {dtype:?}");
                    close(
                        &got.to_dtype(DType::F64)?.to_vec::<f64>()?,
                        &want_r,
                        tol,
                        &what,
                    );
                }
            }
        }
    }
    // Typed errors: shapes that differ, an integer output, a dim out of range.
    let y = randn(&[2, 3], 9).softmax(1, None)?;
    assert!(y.softmax_backward(&randn(&[3, 2], 1), 1).is_err());
    assert!(Tensor::zeros(&[2], DType::I64, Device::Cpu)?
        .softmax_backward(&Tensor::zeros(&[2], DType::I64, Device::Cpu)?, 0)
        .is_err());
    assert!(y.softmax_backward(&randn(&[2, 3], 1), 2).is_err());
    Ok(())
}

/// `softmax_backward_inplace` leaves in the gradient exactly what
/// `softmax_backward` returns, on every dim of shapes that take the serial
/// and the parallel paths (rows and strided column sets), in f64, f32 and
/// bf16, and on a non-contiguous gradient (computed out of place and copied
/// back); its typed errors.
#[test]
fn softmax_backward_inplace_equals_the_out_of_place_gradient() -> Result<()> {
    for (shape, seed) in [
        (vec![3usize, 70, 400], 21u64),
        (vec![257, 300], 22),
        (vec![4, 6], 23),
    ] {
        for dim in 0..shape.len() {
            let y = randn(&shape, seed).softmax(dim as i64, None)?;
            let g = randn(&shape, seed + 50);
            for dtype in [DType::F64, DType::F32, DType::BF16] {
                let (yd, gd) = (y.to_dtype(dtype)?, g.to_dtype(dtype)?);
                let want = yd.softmax_backward(&gd, dim as i64)?;
                let v0 = gd.version();
                yd.softmax_backward_inplace(&gd, dim as i64)?;
                assert!(gd.version() > v0, "the gradient's version is bumped");
                let what = format!("{shape:?} dim {dim} {dtype:?}");
                assert_eq!(
                    gd.to_dtype(DType::F64)?.to_vec::<f64>()?,
                    want.to_dtype(DType::F64)?.to_vec::<f64>()?,
                    "{what}"
                );
            }
        }
    }
    // A transposed (non-contiguous) gradient.
    let y = randn(&[40, 30], 31).softmax(1, None)?;
    let g = randn(&[30, 40], 32).t()?;
    let want = y.softmax_backward(&g, 1)?;
    y.softmax_backward_inplace(&g, 1)?;
    assert_eq!(g.to_vec::<f64>()?, want.to_vec::<f64>()?);
    // Typed errors: another shape, another dtype, the output itself, a bad dim.
    let y = randn(&[2, 3], 9).softmax(1, None)?;
    assert!(y.softmax_backward_inplace(&randn(&[3, 2], 1), 1).is_err());
    assert!(y
        .softmax_backward_inplace(&randn(&[2, 3], 1).to_dtype(DType::F32)?, 1)
        .is_err());
    assert!(y.softmax_backward_inplace(&y, 1).is_err());
    assert!(y.softmax_backward_inplace(&randn(&[2, 3], 1), 2).is_err());
    Ok(())
}

/// `softmax(mask(x * scale))` along the last dim, computed directly in f64
/// (the mask: element `j` of row `i` of each `[l, s]` matrix where `j > i`).
fn scaled_softmax_reference(x: &[f64], shape: &[usize], scale: f64, causal: bool) -> Vec<f64> {
    let n = shape[shape.len() - 1];
    let l = if shape.len() >= 2 {
        shape[shape.len() - 2]
    } else {
        1
    };
    let mut out = vec![0.0; x.len()];
    for (r, (row, o)) in x.chunks(n).zip(out.chunks_mut(n)).enumerate() {
        let keep = if causal { (r % l + 1).min(n) } else { n };
        let m = row[..keep]
            .iter()
            .map(|v| v * scale)
            .fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row[..keep].iter().map(|v| (v * scale - m).exp()).sum();
        for j in 0..keep {
            o[j] = (row[j] * scale - m).exp() / sum;
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The fused scaled, causally masked softmax against the f64
    /// reference, in f64 and f32 (computed from the same values), on
    /// shapes up to the parallel path's size, contiguous or transposed.
    #[test]
    fn scaled_softmax_matches_the_reference(
        outer in 1usize..6, l in 1usize..40, s in 1usize..300,
        scale in -2.0f64..2.0, causal in any::<bool>(), transposed in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let shape = [outer, l, s];
        let x = if transposed {
            randn(&[outer, s, l], seed).transpose(1, 2).unwrap()
        } else {
            randn(&shape, seed)
        };
        let want = scaled_softmax_reference(
            &x.contiguous().unwrap().to_vec::<f64>().unwrap(), &shape, scale, causal);
        let got = x.scaled_softmax(scale, causal, None).unwrap().to_vec::<f64>().unwrap();
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() <= 1e-13, "f64 {g} vs {w}");
        }
        let x32 = x.to_dtype(DType::F32).unwrap();
        let want32 = scaled_softmax_reference(
            &x32.to_dtype(DType::F64).unwrap().contiguous().unwrap().to_vec::<f64>().unwrap(),
            &shape, scale, causal);
        let got32 = x32.scaled_softmax(scale, causal, Some(DType::F64)).unwrap();
        prop_assert_eq!(got32.dtype(), DType::F64);
        let got32 = x32.scaled_softmax(scale, causal, None).unwrap();
        prop_assert_eq!(got32.dtype(), DType::F32);
        for (g, w) in got32.to_vec::<f32>().unwrap().iter().zip(&want32) {
            prop_assert!((*g as f64 - w).abs() <= 1e-6, "f32 {g} vs {w}");
        }
    }
}

/// Masked outputs are exactly 0; the fused op equals the unfused
/// `mul`, `masked_fill`, `softmax` on a bf16 input up to the rounding of
/// the product; bad arguments are typed errors.
#[test]
fn scaled_softmax_masks_exactly_and_checks_its_arguments() -> Result<()> {
    let x = randn(&[2, 3, 5, 5], 7).mul(3.0)?;
    let p = x.scaled_softmax(0.5, true, None)?.to_vec::<f64>()?;
    for (r, row) in p.chunks(5).enumerate() {
        let i = r % 5;
        assert!(row[i + 1..].iter().all(|&v| v == 0.0), "row {r}: {row:?}");
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
    let xb = x.to_dtype(DType::BF16)?;
    let fused = xb.scaled_softmax(1.0, false, Some(DType::F32))?;
    let plain = xb.softmax(-1, Some(DType::F32))?;
    assert_eq!(
        fused.to_vec::<f32>()?,
        plain.to_vec::<f32>()?,
        "scale 1 is softmax"
    );
    assert!(randn(&[4], 1).scaled_softmax(1.0, true, None).is_err());
    assert!(randn(&[], 1).scaled_softmax(1.0, false, None).is_err());
    assert!(randn(&[2, 2], 1)
        .scaled_softmax(f64::INFINITY, false, None)
        .is_err());
    let i = Tensor::ones(&[2, 2], DType::I64, Device::Cpu)?;
    assert!(i.scaled_softmax(1.0, false, None).is_err());
    Ok(())
}
