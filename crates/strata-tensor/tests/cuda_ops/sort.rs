//! GPU tests of `sort`, `argsort`, `msort`, `topk`, `kthvalue`,
//! `median`/`nanmedian` (session 60): the CUDA results equal the CPU's
//! exactly (values bit for bit, indices too: both devices return a stable
//! sort's order and choice among ties), on random shapes, layouts and
//! dtypes with many ties, NaN, ±inf and signed zeros; rows past one chunk
//! (100k elements), more rows than a grid dimension holds (70k), GPT-style
//! logits (64 x 50257) and rows of several million elements.

use super::*;

/// Elements of `t` (on any device) as bit patterns: f64 bits for floats
/// (exact for every float dtype), i64 for the others.
fn bits(t: &Tensor) -> Vec<u64> {
    let c = t.to(Device::Cpu).unwrap();
    if c.dtype().is_float() {
        c.to_vec_as::<f64>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    } else {
        c.to_vec_as::<i64>()
            .unwrap()
            .iter()
            .map(|&v| v as u64)
            .collect()
    }
}

/// The GPU result equals the CPU's: shape, strides, dtype, every bit.
fn exact(what: &str, cpu: &Tensor, gpu: &Tensor) {
    assert_eq!(cpu.shape(), gpu.shape(), "{what}: shape");
    assert_eq!(cpu.dtype(), gpu.dtype(), "{what}: dtype");
    if cpu.numel() > 0 {
        assert_eq!(cpu.strides(), gpu.strides(), "{what}: strides");
    }
    let (a, b) = (bits(cpu), bits(gpu));
    if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
        panic!(
            "{what}: element {i} of {} differs: cpu {:#x} gpu {:#x}",
            a.len(),
            a[i],
            b[i]
        );
    }
}

fn pair(what: &str, cpu: (Tensor, Tensor), gpu: (Tensor, Tensor)) {
    exact(&format!("{what} values"), &cpu.0, &gpu.0);
    exact(&format!("{what} indices"), &cpu.1, &gpu.1);
}

/// Tie-heavy data of `dtype` (a few distinct values; for floats also NaN,
/// ±inf, -0.0 and 0.0 at random places) on the CPU.
fn ties(shape: &[usize], dtype: DType, rng: &mut Rng) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let spread = 1 + rng.below(40) as i64;
    let v: Vec<f64> = (0..n)
        .map(|_| {
            let r = rng.below(100);
            if dtype.is_float() && r < 12 {
                [
                    f64::NAN,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    -0.0,
                    0.0,
                    -f64::NAN,
                ][r as usize % 6]
            } else {
                (rng.below(2 * spread as u64 + 1) as i64 - spread) as f64 * 0.5
            }
        })
        .collect();
    let t = Tensor::from_slice(&v, shape, Device::Cpu)?;
    if dtype.is_float() {
        t.to_dtype(dtype)
    } else if dtype == DType::U8 {
        t.abs()?.mul(2.0)?.to_dtype(dtype)
    } else {
        t.mul(2.0)?.to_dtype(dtype)
    }
}

/// Every op of the family on `x` (CPU) and `g` (its GPU twin) along `dim`.
fn compare_all(what: &str, x: &Tensor, g: &Tensor, dim: i64, rng: &mut Rng) -> Result<()> {
    let w = |s: &str| format!("{what} {s} dim {dim}");
    for desc in [false, true] {
        pair(
            &w(&format!("sort desc={desc}")),
            x.sort(dim, desc, false)?,
            g.sort(dim, desc, false)?,
        );
    }
    exact(
        &w("argsort"),
        &x.argsort(dim, true, true)?,
        &g.argsort(dim, true, true)?,
    );
    if x.dtype() == DType::Bool {
        return Ok(());
    }
    let d = if x.ndim() == 0 {
        0
    } else {
        (dim.rem_euclid(x.ndim() as i64)) as usize
    };
    let n = if x.ndim() == 0 { 1 } else { x.shape()[d] };
    let ks = [0, 1, n / 2, n, rng.below(n as u64 + 1) as usize];
    for k in ks {
        let largest = rng.below(2) == 0;
        pair(
            &w(&format!("topk k={k} largest={largest}")),
            x.topk(k, dim, largest, true)?,
            g.topk(k, dim, largest, true)?,
        );
    }
    if n == 0 {
        return Ok(());
    }
    for k in [1, n, 1 + rng.below(n as u64) as usize] {
        let keep = rng.below(2) == 0;
        pair(
            &w(&format!("kthvalue k={k}")),
            x.kthvalue(k, dim, keep)?,
            g.kthvalue(k, dim, keep)?,
        );
    }
    pair(
        &w("median"),
        x.median_dim(dim, false)?,
        g.median_dim(dim, false)?,
    );
    pair(
        &w("nanmedian"),
        x.nanmedian_dim(dim, true)?,
        g.nanmedian_dim(dim, true)?,
    );
    exact(&w("median all"), &x.median()?, &g.median()?);
    exact(&w("nanmedian all"), &x.nanmedian()?, &g.nanmedian()?);
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn sort_family_matches_cpu_on_random_layouts() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x5042_7060);
    for case in 0..160u64 {
        let dtype = DTYPES[(case % 8) as usize];
        let r = 1 + rng.below(9) as usize;
        let c = 1 + rng.below(if case % 5 == 0 { 5000 } else { 70 }) as usize;
        let kind = rng.below(6);
        let (v, base) = view(r, c, kind, DType::F64, case)?;
        // Replace the base's values by tie-heavy ones of the dtype.
        let base = ties(base.shape(), dtype, &mut rng)?;
        let x = base.as_strided(
            &v.shape().iter().map(|&s| s as i64).collect::<Vec<_>>(),
            &v.strides().iter().map(|&s| s as i64).collect::<Vec<_>>(),
            Some(v.offset() as i64),
        )?;
        let g = twin(&x, &base, dev)?;
        for dim in [0i64, 1, -1] {
            compare_all(
                &format!("case {case} {dtype:?} [{r}, {c}] kind {kind}"),
                &x,
                &g,
                dim,
                &mut rng,
            )?;
        }
    }
    // 3-d, permuted, and the edge shapes.
    for (case, shape) in [[2usize, 3, 4], [5, 1, 7], [1, 1, 1], [3, 0, 2], [4, 2, 0]]
        .iter()
        .enumerate()
    {
        for dtype in DTYPES {
            // The same permuted view of the base on both devices.
            let base = ties(shape, dtype, &mut rng)?;
            let x = base.permute(&[2, 0, 1])?;
            let g = base.to(dev)?.permute(&[2, 0, 1])?;
            for dim in [0i64, 1, 2] {
                if x.shape()[dim as usize] == 0 || x.numel() == 0 {
                    pair(
                        "empty sort",
                        x.sort(dim, false, true)?,
                        g.sort(dim, false, true)?,
                    );
                    continue;
                }
                compare_all(&format!("3-d {case} {dtype:?}"), &x, &g, dim, &mut rng)?;
            }
        }
    }
    let s = Tensor::scalar(-0.0f32, DType::F32, Device::Cpu)?;
    compare_all("0-d", &s, &s.to(dev)?, 0, &mut rng)?;
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn long_rows_and_many_rows_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0xb16_5047);
    // Rows of 100k elements (49 chunks: 6 merge passes), every dtype.
    for dtype in DTYPES {
        let x = ties(&[3, 100_000], dtype, &mut rng)?;
        let g = x.to(dev)?;
        compare_all(&format!("100k rows {dtype:?}"), &x, &g, 1, &mut rng)?;
    }
    // 70k rows (more than a grid's y or z dimension), short and transposed.
    let x = ties(&[70_001, 37], DType::F32, &mut rng)?;
    let g = x.to(dev)?;
    compare_all("70k rows of 37", &x, &g, 1, &mut rng)?;
    // The same along dim 0: 37 rows of 70k elements, read through a copy.
    compare_all("37 columns of 70k", &x, &g, 0, &mut rng)?;
    let xt = x.t()?;
    let gt = g.t()?;
    pair(
        "transposed sort",
        xt.sort(1, true, false)?,
        gt.sort(1, true, false)?,
    );
    // Random distinct-ish floats: the chunk sort on keys of every bit.
    let x = Tensor::randn(&[7, 9000], DType::F64, 5, Device::Cpu)?;
    compare_all("randn f64", &x, &x.to(dev)?, -1, &mut rng)?;
    let x = Tensor::randn(&[7, 9000], DType::F32, 6, Device::Cpu)?.to_dtype(DType::BF16)?;
    compare_all("randn bf16", &x, &x.to(dev)?, -1, &mut rng)?;
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gpt_logits_topk_and_multi_million_rows_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x6e7_5047);
    // GPT-2's vocabulary, a batch of 64 rows.
    let x = Tensor::randn(&[64, 50257], DType::F32, 7, Device::Cpu)?;
    let g = x.to(dev)?;
    for k in [1usize, 2, 40, 50, 1000, 4000, 50257] {
        pair(
            &format!("logits topk {k}"),
            x.topk(k, -1, true, true)?,
            g.topk(k, -1, true, true)?,
        );
    }
    // Timing, for the record (not asserted): topk 50 of [64, 50257].
    g.topk(50, -1, true, true)?;
    cuda::synchronize(dev)?;
    let t0 = std::time::Instant::now();
    for _ in 0..20 {
        g.topk(50, -1, true, true)?;
    }
    cuda::synchronize(dev)?;
    eprintln!(
        "topk(50) of [64, 50257] f32 on {dev}: {:.3} ms each",
        t0.elapsed().as_secs_f64() * 1e3 / 20.0
    );
    let h = x.to_dtype(DType::F16)?;
    pair(
        "f16 logits topk 50",
        h.topk(50, -1, true, true)?,
        h.to(dev)?.topk(50, -1, true, true)?,
    );
    // Rows of several million elements.
    let x = ties(&[1, 5_000_000], DType::F32, &mut rng)?;
    let g = x.to(dev)?;
    pair(
        "5M sort",
        x.sort(1, false, false)?,
        g.sort(1, false, false)?,
    );
    pair(
        "5M sort desc",
        x.sort(1, true, true)?,
        g.sort(1, true, true)?,
    );
    pair(
        "5M topk 10",
        x.topk(10, 1, true, true)?,
        g.topk(10, 1, true, true)?,
    );
    pair(
        "5M topk 3000",
        x.topk(3000, 1, false, true)?,
        g.topk(3000, 1, false, true)?,
    );
    pair(
        "5M kthvalue",
        x.kthvalue(2_500_001, 1, false)?,
        g.kthvalue(2_500_001, 1, false)?,
    );
    pair(
        "5M median",
        x.median_dim(1, false)?,
        g.median_dim(1, false)?,
    );
    pair(
        "5M nanmedian",
        x.nanmedian_dim(1, false)?,
        g.nanmedian_dim(1, false)?,
    );
    exact("5M median all", &x.median()?, &g.median()?);
    let xi = Tensor::randn(&[2, 3_000_000], DType::F64, 8, Device::Cpu)?
        .mul(1e12)?
        .to_dtype(DType::I64)?;
    pair(
        "3M i64 sort",
        xi.sort(1, true, false)?,
        xi.to(dev)?.sort(1, true, false)?,
    );
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gpu_sort_errors_are_typed() -> Result<()> {
    let dev = gpu();
    let x = Tensor::zeros(&[2, 3], DType::F32, dev)?;
    assert!(matches!(
        x.topk(4, 1, true, true),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.kthvalue(0, 1, false),
        Err(TensorError::Index { .. })
    ));
    assert!(matches!(
        x.sort(2, false, false),
        Err(TensorError::Dim { .. })
    ));
    let e = Tensor::zeros(&[2, 0], DType::F32, dev)?;
    assert!(matches!(
        e.median_dim(1, false),
        Err(TensorError::Empty { .. })
    ));
    assert_eq!(e.sort(1, false, false)?.0.shape(), &[2, 0]);
    let b = Tensor::zeros(&[3], DType::Bool, dev)?;
    assert!(matches!(
        b.topk(1, 0, true, true),
        Err(TensorError::DType { .. })
    ));
    Ok(())
}
