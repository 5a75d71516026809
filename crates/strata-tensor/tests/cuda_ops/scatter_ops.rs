//! Session 60's scans, any/all, nonzero and index/scatter family on the GPU
//! against the CPU (the CPU matches PyTorch 2.15 bit for bit, see
//! `tests/suite/scatter_ops.rs`): random shapes, layouts and dtypes, rows
//! past a warp and a block (100k elements), 70k rows, index tensors past
//! one grid. Float sums and products of duplicates are compared with a
//! tolerance (atomics add in another order; f32 scans multiply in f32 on
//! the GPU, in f64 on the CPU); everything else exactly.

use super::*;
use strata_tensor::ScatterReduce;

/// `t` (a CPU tensor) and its GPU copy.
fn pair(t: Tensor, dev: Device) -> Result<(Tensor, Tensor)> {
    let g = t.to(dev)?;
    Ok((t, g))
}

/// Values of `dtype` near 1 in magnitude (products of many stay finite),
/// with zeros and negatives; integers in [-2, 2].
fn near_one(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    let u = Tensor::rand(shape, DType::F64, seed, Device::Cpu)?;
    if dtype.is_float() {
        // In [0.9, 1.1), a tenth of them negated, a few exact zeros.
        let v = u.mul(0.2)?.add(0.9)?;
        let neg = Tensor::rand(shape, DType::F64, seed + 1, Device::Cpu)?.lt(0.1)?;
        let zero = Tensor::rand(shape, DType::F64, seed + 2, Device::Cpu)?.lt(0.02)?;
        v.masked_fill(&neg, -1.0)?
            .mul(&v)?
            .masked_fill(&zero, 0.0)?
            .to_dtype(dtype)
    } else {
        u.mul(5.0)?
            .sub(2.5)?
            .to_dtype(DType::F64)?
            .to_dtype(DType::I64)?
            .to_dtype(dtype)
    }
}

/// A random permutation of 0..n (i64) along the last dim of `shape`.
fn perm_index(shape: &[usize], n: usize, seed: u64) -> Result<Tensor> {
    // argsort-free: rank of random keys by a cumulative count would need a
    // sort; a shuffled arange per line from a seeded xorshift instead.
    let lines: usize = shape[..shape.len() - 1].iter().product();
    let k = *shape.last().unwrap();
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(lines * k);
    for _ in 0..lines {
        let mut p: Vec<i64> = (0..n as i64).collect();
        for i in (1..p.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            p.swap(i, j);
        }
        out.extend_from_slice(&p[..k]);
    }
    Tensor::from_slice(&out, shape, Device::Cpu)
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn scans_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x5ca7);
    // (outer, n, inner): rows past a warp and a block, 70k rows, columns.
    let shapes: [[usize; 3]; 9] = [
        [1, 1, 1],
        [3, 31, 1],
        [5, 33, 1],
        [2, 1000, 1],
        [1, 100_000, 1],
        [70_000, 3, 1],
        [4, 17, 5],
        [2, 300, 129],
        [70_000, 2, 2],
    ];
    for (round, s) in shapes.iter().enumerate() {
        for dtype in DTYPES {
            let seed = round as u64 * 31 + rng.below(1000);
            let x = near_one(s, dtype, seed)?;
            let (x, gx) = pair(x, dev)?;
            let what = format!("{s:?} {dtype:?}");
            if dtype != DType::Bool {
                check_same(
                    &format!("cumprod {what}"),
                    &x.cumprod(1, None)?,
                    &gx.cumprod(1, None)?,
                    true,
                );
            }
            for max in [true, false] {
                let (v, i) = if max { x.cummax(1)? } else { x.cummin(1)? };
                let (gv, gi) = if max { gx.cummax(1)? } else { gx.cummin(1)? };
                assert_same(&format!("cummax/min values {what}"), &v, &gv);
                assert_same(&format!("cummax/min indices {what}"), &i, &gi);
            }
            if dtype.is_float() {
                let y = data(s, dtype, seed)?;
                let (y, gy) = pair(y, dev)?;
                check_same(
                    &format!("logcumsumexp {what}"),
                    &y.logcumsumexp(1)?,
                    &gy.logcumsumexp(1)?,
                    true,
                );
            }
        }
    }
    // Ties and NaN in one long row: the same index choice on both devices.
    let mut v = vec![1.0f32; 5000];
    v[7] = 3.0;
    v[100] = 3.0;
    v[2000] = f32::NAN;
    v[4000] = f32::NAN;
    let (x, gx) = pair(Tensor::from_slice(&v, &[5000], Device::Cpu)?, dev)?;
    assert_same("cummax ties", &x.cummax(0)?.1, &gx.cummax(0)?.1);
    assert_same("cummin ties", &x.cummin(0)?.1, &gx.cummin(0)?.1);
    // Transposed and expanded inputs.
    for kind in 0..6 {
        let (x, base) = view(40, 70, kind, DType::F32, kind)?;
        let gx = twin(&x, &base, dev)?;
        assert_same("cummax view", &x.cummax(0)?.0, &gx.cummax(0)?.0);
        check_same(
            "logcumsumexp view",
            &x.logcumsumexp(1)?,
            &gx.logcumsumexp(1)?,
            true,
        );
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn any_all_nonzero_match_cpu() -> Result<()> {
    let dev = gpu();
    for (k, shape) in [
        vec![],
        vec![0],
        vec![7],
        vec![70_000, 3],
        vec![3, 100_000],
        vec![5, 6, 7],
    ]
    .into_iter()
    .enumerate()
    {
        for dtype in DTYPES {
            let x = data(&shape, dtype, k as u64 + 9)?;
            // Mostly zeros: data() has some; thin them further.
            let keep = Tensor::rand(&shape, DType::F64, k as u64, Device::Cpu)?.lt(0.3)?;
            let zero = Tensor::zeros(&[], dtype, Device::Cpu)?;
            let x = Tensor::where_cond(&keep, &x, &zero)?;
            let (x, gx) = pair(x, dev)?;
            let what = format!("{shape:?} {dtype:?}");
            assert_same(&format!("any {what}"), &x.any()?, &gx.any()?);
            assert_same(&format!("all {what}"), &x.all()?, &gx.all()?);
            assert_same(
                &format!("count {what}"),
                &x.count_nonzero(None)?,
                &gx.count_nonzero(None)?,
            );
            assert_same(
                &format!("nonzero {what}"),
                &x.nonzero()?.contiguous()?,
                &gx.nonzero()?.contiguous()?,
            );
            if !shape.is_empty() {
                assert_same(
                    &format!("any_dim {what}"),
                    &x.any_dim(-1, true)?,
                    &gx.any_dim(-1, true)?,
                );
                assert_same(
                    &format!("all_dim {what}"),
                    &x.all_dim(0, false)?,
                    &gx.all_dim(0, false)?,
                );
            }
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn index_and_scatter_ops_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x5ca8);
    for round in 0..40u64 {
        let dtype = DTYPES[(round % 8) as usize];
        let (r, c) = (1 + rng.below(60) as usize, 1 + rng.below(60) as usize);
        let kind = rng.below(4); // writable layouts: no broadcast views
        let (x, base) = view(r, c, kind, dtype, round)?;
        let gx = twin(&x, &base, dev)?;
        let exact = !dtype.is_float();
        // index_add with duplicates along either dim, int64 and int32.
        let k = 1 + rng.below(80) as usize;
        let idx = rand_index(&[k], c, round + 1)?;
        let idx = if round % 2 == 0 {
            idx
        } else {
            idx.to_dtype(DType::I32)?
        };
        let src = data(&[r, k], dtype, round + 2)?;
        let alpha = if dtype == DType::Bool {
            Scalar::Bool(true)
        } else {
            Scalar::Int(2)
        };
        let (c_sum, g_sum) = (
            x.index_add(1, &idx, &src, alpha)?,
            gx.index_add(1, &idx.to(dev)?, &src.to(dev)?, alpha)?,
        );
        if exact {
            assert_same("index_add", &c_sum, &g_sum);
        } else {
            // Up to k duplicates add into one element: the CPU rounds each
            // addition to the dtype (f16/bf16 as PyTorch's CPU), the GPU's
            // atomics add in another order (f16/bf16 in f32, rounded once).
            let scale = x.abs()?.to_dtype(DType::F64)?.index_add(
                1,
                &idx,
                &src.abs()?.to_dtype(DType::F64)?,
                Scalar::Int(2),
            )?;
            assert_rounded_sum("index_add", &c_sum, &g_sum, &scale, k + 1, dtype);
        }
        // index_copy / index_fill without duplicates.
        let n = 1 + rng.below(r as u64) as usize;
        let uidx = perm_index(&[n], r, round + 3)?;
        let usrc = data(&[n, c], dtype, round + 4)?;
        assert_same(
            "index_copy",
            &x.index_copy(0, &uidx, &usrc)?,
            &gx.index_copy(0, &uidx.to(dev)?, &usrc.to(dev)?)?,
        );
        let v = if dtype == DType::Bool {
            Scalar::Bool(true)
        } else {
            Scalar::Int(3)
        };
        let fi = rand_index(&[k], r, round + 14)?;
        assert_same(
            "index_fill",
            &x.index_fill(0, &fi, v)?,
            &gx.index_fill(0, &fi.to(dev)?, v)?,
        );
        // scatter (unique per row), scatter_value, scatter_reduce.
        let kk = 1 + rng.below(c as u64) as usize;
        let si = perm_index(&[r, kk], c, round + 5)?;
        let ss = data(&[r, kk], dtype, round + 6)?;
        let (gsi, gss) = (si.to(dev)?, ss.to(dev)?);
        assert_same(
            "scatter",
            &x.scatter(1, &si, &ss)?,
            &gx.scatter(1, &gsi, &gss)?,
        );
        assert_same(
            "scatter_value",
            &x.scatter_value(1, &si, v)?,
            &gx.scatter_value(1, &gsi, v)?,
        );
        let di = rand_index(&[r, 3 * c], c, round + 7)?;
        let ds = near_one(&[r, 3 * c], dtype, round + 8)?;
        let (gdi, gds) = (di.to(dev)?, ds.to(dev)?);
        // The most values any element combines: its own and its duplicates.
        let counts = Tensor::zeros(&[r, c], DType::F64, Device::Cpu)?.scatter_reduce(
            1,
            &di,
            &Tensor::ones(&[r, 3 * c], DType::F64, Device::Cpu)?,
            ScatterReduce::Sum,
            true,
        )?;
        let terms = 1 + counts.to_vec::<f64>()?.into_iter().fold(0.0, f64::max) as usize;
        for red in [
            ScatterReduce::Sum,
            ScatterReduce::Prod,
            ScatterReduce::Mean,
            ScatterReduce::Amax,
            ScatterReduce::Amin,
        ] {
            if dtype == DType::Bool && red == ScatterReduce::Mean {
                continue;
            }
            for inc in [true, false] {
                let what = format!("scatter_reduce {red:?} {inc} {dtype:?}");
                let (cpu, gpu) = (
                    x.scatter_reduce(1, &di, &ds, red, inc)?,
                    gx.scatter_reduce(1, &gdi, &gds, red, inc)?,
                );
                if exact || matches!(red, ScatterReduce::Amax | ScatterReduce::Amin) {
                    check_same(&what, &cpu, &gpu, false);
                } else {
                    // Up to `terms` values meet in one element: the CPU
                    // rounds each step to the dtype (f16/bf16 as PyTorch's
                    // CPU), the GPU's atomics combine them in another
                    // order. Each rounding moves the result by at most the
                    // unit roundoff times the same reduction of the
                    // magnitudes (in f64), the scale.
                    let scale = x.abs()?.to_dtype(DType::F64)?.scatter_reduce(
                        1,
                        &di,
                        &ds.abs()?.to_dtype(DType::F64)?,
                        red,
                        inc,
                    )?;
                    assert_rounded_sum(&what, &cpu, &gpu, &scale, terms, dtype);
                }
            }
        }
        // index_put: accumulate with duplicates, assignment without.
        let pi = rand_index(&[k], r, round + 9)?;
        let pj = rand_index(&[k], c, round + 10)?.to_dtype(DType::I32)?;
        let pv = data(&[k], dtype, round + 11)?;
        let (gpi, gpj, gpv) = (pi.to(dev)?, pj.to(dev)?, pv.to(dev)?);
        let (cpu, gpu) = (
            x.index_put(&[Some(&pi), Some(&pj)], &pv, true)?,
            gx.index_put(&[Some(&gpi), Some(&gpj)], &gpv, true)?,
        );
        if exact {
            assert_same("index_put accumulate", &cpu, &gpu);
        } else {
            // Duplicate positions accumulate: rounded per step on the CPU,
            // in another order on the GPU (as scatter_reduce above).
            let abs = |t: &Tensor| t.abs()?.to_dtype(DType::F64);
            let scale = abs(&x)?.index_put(&[Some(&pi), Some(&pj)], &abs(&pv)?, true)?;
            let hits = Tensor::zeros(&[r, c], DType::F64, Device::Cpu)?.index_put(
                &[Some(&pi), Some(&pj)],
                &Tensor::ones(&[k], DType::F64, Device::Cpu)?,
                true,
            )?;
            let terms = 1 + hits.to_vec::<f64>()?.into_iter().fold(0.0, f64::max) as usize;
            assert_rounded_sum("index_put accumulate", &cpu, &gpu, &scale, terms, dtype);
        }
        let ui = perm_index(&[n], r, round + 12)?;
        let uv = data(&[n, c], dtype, round + 13)?;
        assert_same(
            "index_put",
            &x.index_put(&[Some(&ui)], &uv, false)?,
            &gx.index_put(&[Some(&ui.to(dev)?)], &uv.to(dev)?, false)?,
        );
        assert_same(
            "index_tensors",
            &x.index_tensors(&[None, Some(&pj)])?,
            &gx.index_tensors(&[None, Some(&gpj)])?,
        );
    }
    Ok(())
}

/// index_put with accumulate of more index positions than the tensor has
/// elements, in the dtypes the GPU accumulates wide (f16/bf16 in f32,
/// bool/u8 in i32): every duplicate lands, nothing past the tensor is
/// touched (a view's neighbours keep their values).
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn index_put_accumulates_more_positions_than_elements() -> Result<()> {
    let dev = gpu();
    for dtype in [DType::F16, DType::BF16, DType::U8, DType::Bool, DType::F32] {
        let base = Tensor::zeros(&[4, 3], dtype, Device::Cpu)?;
        // The middle two rows, transposed: 6 elements inside 12.
        let x = base.narrow(0, 1, 2)?.t()?;
        let gbase = base.to(dev)?;
        let gx = gbase.narrow(0, 1, 2)?.t()?;
        let rows: Vec<i64> = (0..40).map(|i| [2, 0, 2, 2][i % 4]).collect();
        let cols: Vec<i64> = (0..40).map(|i| [1, 1, 0, 1][i % 4]).collect();
        let (ri, ci) = (
            Tensor::from_slice(&rows, &[40], Device::Cpu)?,
            Tensor::from_slice(&cols, &[40], Device::Cpu)?,
        );
        let v = Tensor::ones(&[40], dtype, Device::Cpu)?;
        x.index_put_(&[Some(&ri), Some(&ci)], &v, true)?;
        gx.index_put_(&[Some(&ri.to(dev)?), Some(&ci.to(dev)?)], &v.to(dev)?, true)?;
        assert_same(&format!("{dtype:?} view"), &x, &gx);
        assert_same(&format!("{dtype:?} base"), &base, &gbase);
        if dtype != DType::Bool {
            // 20 of the 40 ones land on (2, 1): exact in every dtype here.
            let got = x.to_dtype(DType::F64)?.to_vec::<f64>()?[2 * 2 + 1];
            assert_eq!(got, 20.0, "{dtype:?}");
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn large_scatters_match_cpu() -> Result<()> {
    let dev = gpu();
    // More index positions than one grid of the kernels covers per pass
    // (grid-stride loops), and 70k rows.
    let x = Tensor::zeros(&[70_000, 4], DType::F32, Device::Cpu)?;
    let idx = rand_index(&[300_000], 70_000, 1)?;
    let src = near_one(&[300_000, 4], DType::F32, 2)?;
    let (gx, gidx, gsrc) = (x.to(dev)?, idx.to(dev)?, src.to(dev)?);
    assert_sum(
        "index_add large",
        &x.index_add(0, &idx, &src, 1)?,
        &gx.index_add(0, &gidx, &gsrc, 1)?,
    );
    let ri = rand_index(&[70_000, 64], 4, 3)?;
    let rs = near_one(&[70_000, 64], DType::F32, 4)?;
    for red in [ScatterReduce::Amax, ScatterReduce::Amin] {
        assert_same(
            "scatter_reduce large",
            &x.scatter_reduce(1, &ri, &rs, red, false)?,
            &gx.scatter_reduce(1, &ri.to(dev)?, &rs.to(dev)?, red, false)?,
        );
    }
    let big = Tensor::zeros(&[100_000], DType::I64, Device::Cpu)?;
    let bi = perm_index(&[100_000], 100_000, 5)?;
    let bs = Tensor::arange(0i64, 100_000, 1, None, Device::Cpu)?;
    assert_same(
        "scatter large",
        &big.scatter(0, &bi, &bs)?,
        &big.to(dev)?.scatter(0, &bi.to(dev)?, &bs.to(dev)?)?,
    );
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn bad_indices_are_typed_errors_on_the_gpu() -> Result<()> {
    let dev = gpu();
    let x = Tensor::zeros(&[3, 4], DType::F32, dev)?;
    let before = x.to(Device::Cpu)?;
    let bad = Tensor::from_slice(&[0i64, 4], &[2], dev)?;
    let src = Tensor::ones(&[3, 2], DType::F32, dev)?;
    assert!(matches!(
        x.index_add_(1, &bad, &src, 1),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.index_copy_(1, &bad, &src),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.index_fill_(1, &bad, 1.0),
        Err(TensorError::Index { .. })
    ));
    let b2 = Tensor::from_slice(&[0i64, 4, 1, 1, 1, 1], &[3, 2], dev)?;
    assert!(matches!(
        x.scatter_(1, &b2, &src),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.scatter_reduce_(1, &b2, &src, ScatterReduce::Sum, true),
        Err(TensorError::Index { .. })
    ));
    let neg = Tensor::from_slice(&[-4i64], &[1], dev)?;
    let v = Tensor::ones(&[1, 4], DType::F32, dev)?;
    assert!(matches!(
        x.index_put_(&[Some(&neg)], &v, false),
        Err(TensorError::Index { .. })
    ));
    assert!(x.to(Device::Cpu)?.equal(&before)?);
    Ok(())
}
