//! GPU tests: every op on `cuda:0` against the CPU result, on random shapes,
//! strides (transposes, step slices, narrows, broadcasts) and dtypes; streams,
//! `record_stream`, events; host/device transfers (pinned, pageable, staged,
//! non-blocking) and typed errors.
//!
//! Every test that needs a GPU is `#[ignore]`d with the reason, so a machine
//! without one lists it as ignored; `cargo test -- --include-ignored` runs
//! them, and there a missing GPU fails them loudly (never a silent pass).
//! The `test_device!` macro runs a test body on the CPU (always) and on the
//! GPU (ignored by default).

use strata_tensor::{
    cuda, DType, Device, Layout, Result, RoundingMode, Scalar, Tensor, TensorError,
};

const GPU: Device = Device::Cuda(0);

/// The GPU; panics (failing the test) with the reason when there is none.
fn gpu() -> Device {
    assert!(
        strata_tensor::has_backend(GPU),
        "this test needs a CUDA GPU and none is usable: {}",
        cuda::unavailable_reason().unwrap_or_else(|| "no CUDA backend".into())
    );
    GPU
}

/// Runs `$body(device)` as one test per device: `$cpu` on the CPU and `$gpu`
/// on `cuda:0` (ignored unless `--include-ignored`).
macro_rules! test_device {
    ($body:ident, $cpu:ident, $gpu:ident) => {
        #[test]
        fn $cpu() -> Result<()> {
            $body(Device::Cpu)
        }
        #[test]
        #[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
        fn $gpu() -> Result<()> {
            $body(gpu())
        }
    };
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random values of `dtype` (integers in about [-20, 20], some zeros).
fn data(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
    let t = Tensor::randn(shape, DType::F64, seed, Device::Cpu)?.mul(8.0)?;
    t.to_dtype(dtype)
}

/// A view of shape `[r, c]` of a fresh base on `device`, of layout `kind`
/// (0 contiguous, 1 transposed, 2 step-2 slice, 3 narrowed, 4 broadcast row,
/// 5 broadcast column), built identically on the CPU.
fn view(r: usize, c: usize, kind: u64, dtype: DType, seed: u64) -> Result<(Tensor, Tensor)> {
    let base_shape: Vec<usize> = match kind {
        1 => vec![c, r],
        2 => vec![r, 2 * c],
        3 => vec![r + 1, c + 3],
        4 => vec![1, c],
        5 => vec![r, 1],
        _ => vec![r, c],
    };
    let base = data(&base_shape, dtype, seed)?;
    let shape = [r as i64, c as i64];
    let make = |b: &Tensor| -> Result<Tensor> {
        match kind {
            1 => b.t(),
            2 => b.slice(1, Some(1), None, 2),
            3 => b.narrow(0, 1, r as i64)?.narrow(1, 2, c as i64),
            4 | 5 => b.expand(&shape),
            _ => Ok(b.clone()),
        }
    };
    Ok((make(&base)?, base))
}

fn close(a: &Scalar, b: &Scalar, dtype: DType, loose: bool) -> bool {
    match (a, b) {
        (Scalar::Float(x), Scalar::Float(y)) => {
            if x.is_nan() || y.is_nan() {
                return x.is_nan() && y.is_nan();
            }
            if x == y {
                return true;
            }
            let tol = match (dtype, loose) {
                (DType::F16 | DType::BF16, _) => 1e-2,
                (DType::F32, false) => 1e-5,
                (DType::F32, true) => 2e-4,
                (_, false) => 1e-12,
                (_, true) => 1e-9,
            };
            (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs()))
        }
        _ => a == b,
    }
}

/// `gpu` (moved to the CPU) equals `cpu`: shape, dtype and values.
/// The same cross-entropy arguments for the CPU run and the GPU run, the
/// class weights (when `weighted`) on each side's device.
fn ce_args<'a>(
    w: &'a Tensor,
    gw: &'a Tensor,
    reduction: strata_tensor::Reduction,
    label_smoothing: f64,
    weighted: bool,
) -> (
    strata_tensor::CrossEntropyArgs<'a>,
    strata_tensor::CrossEntropyArgs<'a>,
) {
    let cpu = strata_tensor::CrossEntropyArgs {
        weight: weighted.then_some(w),
        reduction,
        label_smoothing,
        ..Default::default()
    };
    let gpu = strata_tensor::CrossEntropyArgs {
        weight: weighted.then_some(gw),
        ..cpu
    };
    (cpu, gpu)
}

fn assert_same(what: &str, cpu: &Tensor, gpu: &Tensor) {
    check_same(what, cpu, gpu, false)
}

/// As [`assert_same`], with the tolerance of sums taken in another order.
fn assert_sum(what: &str, cpu: &Tensor, gpu: &Tensor) {
    check_same(what, cpu, gpu, true)
}

/// As [`assert_sum`], with each element's tolerance scaled by `scale` (the
/// same reduction of the magnitudes) instead of by the result, and chosen
/// for sums taken in `precision` (the inputs' dtype where the two devices'
/// kernels accumulate in different types).
fn assert_sum_scaled(what: &str, cpu: &Tensor, gpu: &Tensor, scale: &Tensor, precision: DType) {
    assert_eq!(cpu.shape(), gpu.shape(), "{what}: shape");
    assert_eq!(cpu.dtype(), gpu.dtype(), "{what}: dtype");
    let g = gpu.to(Device::Cpu).expect("to cpu");
    let x = cpu.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let y = g.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let m = scale.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let tol = match precision {
        DType::F16 | DType::BF16 => 1e-2,
        DType::F32 => 2e-5,
        _ => 1e-12,
    };
    for (i, ((a, b), s)) in x.iter().zip(&y).zip(&m).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + s);
        assert!(
            ok,
            "{what}: element {i} differs: cpu {a} vs gpu {b} (magnitude sum {s})"
        );
    }
}

/// As [`assert_sum_scaled`] for sums over `terms` rows whose CPU kernel
/// (as PyTorch's CPU kernel) rounds each partial sum to `precision`, the
/// f16/bf16 input's dtype (the result may be f32: layer norm's parameter
/// gradients), while the GPU's (as PyTorch's CUDA kernel) sums in f32: each
/// of the `terms` roundings may move the sum by the dtype's unit roundoff
/// times the partial sum, so the tolerance is `terms` times twice that unit
/// times the magnitude sum (f32 and f64: [`assert_sum_scaled`]'s).
fn assert_rounded_sum(
    what: &str,
    cpu: &Tensor,
    gpu: &Tensor,
    scale: &Tensor,
    terms: usize,
    precision: DType,
) {
    let unit = match precision {
        DType::BF16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-10),
        _ => return assert_sum_scaled(what, cpu, gpu, scale, precision),
    };
    assert_eq!(cpu.shape(), gpu.shape(), "{what}: shape");
    assert_eq!(cpu.dtype(), gpu.dtype(), "{what}: dtype");
    let g = gpu.to(Device::Cpu).expect("to cpu");
    let x = cpu.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let y = g.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let m = scale.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let tol = terms.max(1) as f64 * unit;
    for (i, ((a, b), s)) in x.iter().zip(&y).zip(&m).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + s);
        assert!(
            ok,
            "{what}: element {i} differs: cpu {a} vs gpu {b} (magnitude sum {s}, {terms} terms)"
        );
    }
}

fn check_same(what: &str, cpu: &Tensor, gpu: &Tensor, loose: bool) {
    assert_eq!(cpu.shape(), gpu.shape(), "{what}: shape");
    assert_eq!(cpu.dtype(), gpu.dtype(), "{what}: dtype");
    let g = gpu.to(Device::Cpu).expect("to cpu");
    let (x, y) = (cpu.to_scalars().unwrap(), g.to_scalars().unwrap());
    for (i, (a, b)) in x.iter().zip(&y).enumerate() {
        assert!(
            close(a, b, cpu.dtype(), loose),
            "{what}: element {i} differs: cpu {a} vs gpu {b} ({:?})",
            cpu.dtype()
        );
    }
}

/// The GPU twin of a view: the base copied to the GPU, the same view taken.
fn twin(view: &Tensor, base: &Tensor, dev: Device) -> Result<Tensor> {
    let gbase = base.to(dev)?;
    gbase.as_strided(
        &view.shape().iter().map(|&s| s as i64).collect::<Vec<_>>(),
        &view.strides().iter().map(|&s| s as i64).collect::<Vec<_>>(),
        Some((view.offset() - base.offset()) as i64),
    )
}

const DTYPES: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::Bool,
];

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn binary_ops_match_cpu_on_random_layouts() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x5eed);
    for case in 0..120u64 {
        let dtype = DTYPES[rng.below(8) as usize];
        let (r, c) = (1 + rng.below(70) as usize, 1 + rng.below(300) as usize);
        let (ka, kb) = (rng.below(4), rng.below(6));
        let (a, abase) = view(r, c, ka, dtype, case * 2 + 1)?;
        let (b, bbase) = view(r, c, kb, dtype, case * 2 + 2)?;
        let (ga, gb) = (twin(&a, &abase, dev)?, twin(&b, &bbase, dev)?);
        let what = format!("case {case} {dtype} [{r},{c}] kinds {ka}/{kb}");
        assert_same(&format!("{what} a"), &a, &ga);
        type F2 = fn(&Tensor, &Tensor) -> Result<Tensor>;
        let ops: Vec<(&str, F2)> = vec![
            ("add", |x, y| x.add(y)),
            ("mul", |x, y| x.mul(y)),
            ("div", |x, y| x.div(y)),
            ("eq", |x, y| x.eq(y)),
            ("lt", |x, y| x.lt(y)),
            ("ge", |x, y| x.ge(y)),
        ];
        for (name, f) in &ops {
            match (f(&a, &b), f(&ga, &gb)) {
                (Ok(x), Ok(y)) => assert_same(&format!("{what} {name}"), &x, &y),
                (Err(_), Err(_)) => {}
                (x, y) => panic!("{what} {name}: cpu {:?} vs gpu {:?}", x.err(), y.err()),
            }
        }
        if dtype != DType::Bool {
            let x = a.sub(&b)?;
            let y = ga.sub(&gb)?;
            assert_same(&format!("{what} sub"), &x, &y);
            if dtype.is_float() {
                let x = a.div_mode(&b, RoundingMode::Floor)?;
                let y = ga.div_mode(&gb, RoundingMode::Floor)?;
                assert_same(&format!("{what} floor div"), &x, &y);
            }
        }
        // In place into a fresh contiguous or transposed output.
        if ka <= 1 {
            let (x, y) = (a.deep_clone()?, ga.deep_clone()?);
            let (x, y) = if ka == 1 {
                (x.t()?.contiguous()?.t()?, y.t()?.contiguous()?.t()?)
            } else {
                (x, y)
            };
            if dtype != DType::Bool {
                x.add_(&b)?;
                y.add_(&gb)?;
                assert_same(&format!("{what} add_"), &x, &y);
            }
            if dtype != DType::Bool {
                x.mul_(2)?;
                y.mul_(2)?;
                assert_same(&format!("{what} mul_ scalar"), &x, &y);
            }
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn unary_scalar_and_mixed_dtype_ops_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(77);
    for case in 0..60u64 {
        let dtype = DTYPES[rng.below(8) as usize];
        let (r, c) = (1 + rng.below(40) as usize, 1 + rng.below(200) as usize);
        let k = rng.below(4);
        let (a, base) = view(r, c, k, dtype, 100 + case)?;
        let ga = twin(&a, &base, dev)?;
        let what = format!("case {case} {dtype} [{r},{c}] kind {k}");
        type F = fn(&Tensor) -> Result<Tensor>;
        let ops: Vec<(&str, F)> = vec![
            ("neg", |x| x.neg()),
            ("relu", |x| x.relu()),
            ("exp", |x| x.exp()),
            ("log", |x| x.abs_log()),
            ("clamp", |x| {
                x.clamp(Some(Scalar::Int(-3)), Some(Scalar::Int(5)))
            }),
            ("add 2.5", |x| x.add(2.5)),
            ("mul 3", |x| x.mul(3)),
            ("div 2", |x| x.div(2)),
            ("gt 0", |x| x.gt(0)),
            ("sub 1", |x| x.sub(1)),
            ("to f32", |x| x.to_dtype(DType::F32)),
            ("to i32", |x| x.to_dtype(DType::I32)),
            ("to u8", |x| x.to_dtype(DType::U8)),
            ("to bool", |x| x.to_dtype(DType::Bool)),
            ("to f16", |x| x.to_dtype(DType::F16)),
            ("to bf16", |x| x.to_dtype(DType::BF16)),
            ("to i64", |x| x.to_dtype(DType::I64)),
            ("to f64", |x| x.to_dtype(DType::F64)),
            ("contiguous", |x| x.contiguous()),
            ("add i32 tensor", |x| x.add(&x.to_dtype(DType::I32)?)),
        ];
        for (name, f) in &ops {
            match (f(&a), f(&ga)) {
                (Ok(x), Ok(y)) => assert_same(&format!("{what} {name}"), &x, &y),
                (Err(_), Err(_)) => {}
                (x, y) => panic!("{what} {name}: cpu {:?} vs gpu {:?}", x.err(), y.err()),
            }
        }
    }
    Ok(())
}

/// `log` only where it is defined the same way on both (|x| + 1).
trait AbsLog {
    fn abs_log(&self) -> Result<Tensor>;
}
impl AbsLog for Tensor {
    fn abs_log(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            self.mul(self)?.add(1.0)?.log()
        } else {
            self.log()
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn fill_copy_where_addcmul_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(99);
    for case in 0..40u64 {
        let dtype = DTYPES[rng.below(8) as usize];
        let (r, c) = (1 + rng.below(50) as usize, 1 + rng.below(130) as usize);
        let what = format!("case {case} {dtype} [{r},{c}]");
        // fill_ / zero_ through a transposed view and an expanded one.
        let x = Tensor::zeros(&[c, r], dtype, Device::Cpu)?;
        let y = Tensor::zeros(&[c, r], dtype, dev)?;
        x.t()?.fill_(1)?;
        y.t()?.fill_(1)?;
        assert_same(&format!("{what} fill_"), &x, &y);
        x.narrow(0, 0, 1)?.zero_()?;
        y.narrow(0, 0, 1)?.zero_()?;
        assert_same(&format!("{what} zero_"), &x, &y);
        // copy_ across layouts and dtypes.
        let (src, sbase) = view(r, c, rng.below(6), DTYPES[rng.below(8) as usize], case)?;
        let gsrc = twin(&src, &sbase, dev)?;
        let (dst, dbase) = view(r, c, rng.below(4), dtype, case + 1000)?;
        let gdst = twin(&dst, &dbase, dev)?;
        dst.copy_(&src)?;
        gdst.copy_(&gsrc)?;
        assert_same(
            &format!("{what} copy_"),
            &dbase,
            &gdst_base(&gdst, &dbase, dev)?,
        );
        assert_same(&format!("{what} copy_ view"), &dst, &gdst);
        // where
        let (cnd, cbase) = view(r, c, rng.below(6), DType::Bool, case + 7)?;
        let gcnd = twin(&cnd, &cbase, dev)?;
        let (a, abase) = view(r, c, rng.below(6), dtype, case + 8)?;
        let ga = twin(&a, &abase, dev)?;
        let x = Tensor::where_cond(&cnd, &a, 3)?;
        let y = Tensor::where_cond(&gcnd, &ga, 3)?;
        assert_same(&format!("{what} where"), &x, &y);
        // addcmul_
        if dtype.is_float() {
            let (t1, b1) = view(r, c, rng.below(6), dtype, case + 9)?;
            let (t2, b2) = view(r, c, rng.below(6), dtype, case + 10)?;
            let (g1, g2) = (twin(&t1, &b1, dev)?, twin(&t2, &b2, dev)?);
            let x = data(&[r, c], dtype, case + 11)?;
            let y = x.to(dev)?;
            x.addcmul_(&t1, &t2, 0.5)?;
            y.addcmul_(&g1, &g2, 0.5)?;
            assert_same(&format!("{what} addcmul_"), &x, &y);
        }
    }
    Ok(())
}

/// The whole GPU base of a view (to compare writes through views).
fn gdst_base(gview: &Tensor, base: &Tensor, _dev: Device) -> Result<Tensor> {
    gview.as_strided(
        &base.shape().iter().map(|&s| s as i64).collect::<Vec<_>>(),
        &base.strides().iter().map(|&s| s as i64).collect::<Vec<_>>(),
        Some(base.offset() as i64),
    )
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn reductions_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(4242);
    for case in 0..40u64 {
        let dtype = DTYPES[rng.below(7) as usize];
        let shape = [
            1 + rng.below(9) as usize,
            1 + rng.below(30) as usize,
            1 + rng.below(600) as usize,
        ];
        let x = data(&shape, dtype, 500 + case)?;
        let x = if rng.below(2) == 1 {
            x.permute(&[2, 0, 1])?
        } else {
            x
        };
        let g = x.to(dev)?;
        let what = format!("case {case} {dtype} {:?}", x.shape());
        for dims in [
            None,
            Some(vec![0i64]),
            Some(vec![2]),
            Some(vec![0, 2]),
            Some(vec![1]),
        ] {
            let d = dims.as_deref();
            let w = format!("{what} dims {dims:?}");
            assert_sum(&format!("{w} sum"), &x.sum(d, false)?, &g.sum(d, false)?);
            if dtype.is_float() {
                assert_sum(&format!("{w} mean"), &x.mean(d, true)?, &g.mean(d, true)?);
            }
        }
        assert_same(&format!("{what} max"), &x.max()?, &g.max()?);
        assert_same(&format!("{what} min"), &x.min()?, &g.min()?);
        for dim in 0..3 {
            let (v, i) = x.max_dim(dim, false)?;
            let (gv, gi) = g.max_dim(dim, false)?;
            assert_same(&format!("{what} max_dim {dim}"), &v, &gv);
            assert_same(&format!("{what} argmax {dim}"), &i, &gi);
            let (v, i) = x.min_dim(dim, true)?;
            let (gv, gi) = g.min_dim(dim, true)?;
            assert_same(&format!("{what} min_dim {dim}"), &v, &gv);
            assert_same(&format!("{what} argmin {dim}"), &i, &gi);
        }
    }
    // NaN propagates with the first NaN's index.
    let x = Tensor::from_slice(&[1.0f32, f32::NAN, 5.0, f32::NAN], &[4], Device::Cpu)?;
    let (v, i) = x.to(dev)?.max_dim(0, false)?;
    assert!(v.item::<f32>()?.is_nan());
    assert_eq!(i.item::<i64>()?, 1);
    Ok(())
}

/// A random matrix-product case: a dtype cuBLAS or the integer kernel
/// multiplies, and `m x k x n` (k may be 0).
fn product_case(rng: &mut Rng) -> (DType, usize, usize, usize) {
    // The first six of DTYPES: the floats, i32 and i64.
    let dtype = DTYPES[rng.below(6) as usize];
    let (m, k, n) = (
        1 + rng.below(70) as usize,
        rng.below(90) as usize,
        1 + rng.below(70) as usize,
    );
    (dtype, m, k, n)
}

/// A matrix product on the CPU (`x`) and on the GPU (`y`) over depth `k`:
/// floats within a tolerance scaled by `sqrt(k)` (the two sum in different
/// orders; f16/bf16 by their precision), integers exactly.
fn assert_product_close(what: &str, x: &Tensor, y: &Tensor, k: usize) -> Result<()> {
    let dtype = x.dtype();
    if !dtype.is_float() {
        assert_same(what, x, y);
        return Ok(());
    }
    let xs = x.to_dtype(DType::F64)?.to_vec::<f64>()?;
    let ys = y.to(Device::Cpu)?.to_dtype(DType::F64)?.to_vec::<f64>()?;
    let tol = if matches!(dtype, DType::F16 | DType::BF16) {
        5e-2
    } else {
        1e-4
    };
    for (p, q) in xs.iter().zip(&ys) {
        assert!(
            (p - q).abs() <= tol * (1.0 + p.abs()) * (1.0 + k as f64).sqrt(),
            "{what}: {p} vs {q}"
        );
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn matmul_matches_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(31337);
    for case in 0..30u64 {
        let (dtype, m, k, n) = product_case(&mut rng);
        let a = data(&[m, k], dtype, 900 + case)?;
        let b = data(&[k, n], dtype, 1900 + case)?;
        let (a, b) = match rng.below(3) {
            0 => (a, b),
            1 => (a.t()?.contiguous()?.t()?, b),
            _ => (a, data(&[n, k], dtype, 2900 + case)?.t()?),
        };
        let (ga, gb) = (a.to(dev)?, b.to(dev)?);
        let (ga, gb) = if a.is_contiguous() {
            (ga, gb)
        } else {
            (ga.t()?.contiguous()?.t()?, gb)
        };
        let x = a.matmul(&b)?;
        let y = ga.matmul(&gb)?;
        let what = format!("case {case} {dtype} {m}x{k}x{n}");
        assert_product_close(&what, &x, &y, k)?;
    }
    let a = data(&[3, 17, 9], DType::F32, 1)?;
    let b = data(&[3, 9, 5], DType::F32, 2)?;
    let x = a.bmm(&b)?;
    let y = a.to(dev)?.bmm(&b.to(dev)?)?;
    let (xs, ys) = (x.to_vec::<f32>()?, y.to(Device::Cpu)?.to_vec::<f32>()?);
    assert!(xs
        .iter()
        .zip(&ys)
        .all(|(p, q)| (p - q).abs() <= 1e-4 * (1.0 + p.abs())));
    Ok(())
}

/// `addmm` on the GPU (cuBLAS with `beta = 1` for f32/f64, the f32 scratch
/// sum for f16/bf16, the integer kernel starting from the added value)
/// against the CPU, on random shapes, dtypes, operand layouts and added
/// shapes; and the small bf16/f16 bias that a rounded product would lose.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn addmm_matches_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(4242);
    for case in 0..30u64 {
        let (dtype, m, k, n) = product_case(&mut rng);
        let a = data(&[m, k], dtype, 700 + case)?;
        let b = if rng.below(2) == 0 {
            data(&[k, n], dtype, 1700 + case)?
        } else {
            data(&[n, k], dtype, 2700 + case)?.t()?
        };
        let c_shape = [vec![n], vec![m, 1], vec![], vec![m, n]][rng.below(4) as usize].clone();
        let c = data(&c_shape, dtype, 3700 + case)?;
        let x = c.addmm(&a, &b)?;
        let y = c.to(dev)?.addmm(&a.to(dev)?, &b.to(dev)?)?;
        let what = format!("case {case} {dtype} {m}x{k}x{n} c {c_shape:?}");
        assert_eq!(y.shape(), &[m, n], "{what}");
        assert_product_close(&what, &x, &y, k)?;
    }
    for (dtype, tiny, half_ulp) in [
        (DType::BF16, 2f64.powi(-9), 2f64.powi(-8)),
        (DType::F16, 2f64.powi(-12), 2f64.powi(-11)),
    ] {
        let a = Tensor::from_slice(&[1.0, half_ulp], &[1, 2], Device::Cpu)?
            .to_dtype(dtype)?
            .to(dev)?;
        let b = Tensor::ones(&[2, 1], dtype, dev)?;
        let bias = Tensor::full(&[1], tiny, dtype, dev)?;
        let fused = bias.addmm(&a, &b)?.to_dtype(DType::F64)?.to(Device::Cpu)?;
        assert_eq!(
            fused.to_vec::<f64>()?,
            vec![1.0 + 2.0 * half_ulp],
            "{dtype}"
        );
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn large_transposed_and_broadcast_ops() -> Result<()> {
    let dev = gpu();
    let n = 2048 + 17;
    let a = data(&[n, n], DType::F32, 5)?;
    let b = data(&[n, n], DType::F32, 6)?;
    let (ga, gb) = (a.to(dev)?, b.to(dev)?);
    assert_same("add transposed", &a.add(&b.t()?)?, &ga.add(&gb.t()?)?);
    assert_same(
        "contiguous of transposed",
        &a.t()?.contiguous()?,
        &ga.t()?.contiguous()?,
    );
    let row = data(&[1, n], DType::F32, 7)?;
    let col = data(&[n, 1], DType::F32, 8)?;
    assert_same("broadcast row", &a.add(&row)?, &ga.add(&row.to(dev)?)?);
    assert_same("broadcast col", &a.add(&col)?, &ga.add(&col.to(dev)?)?);
    let s = a.slice(1, None, None, 2)?;
    let gs = ga.slice(1, None, None, 2)?;
    s.add_(1.0)?;
    gs.add_(1.0)?;
    assert_same("step-2 slice add_", &a, &ga);
    // Large reductions (split over several blocks per output).
    // f32 sums of many terms of size ~8 in another order: absolute tolerance.
    let sum_close = |what: &str, x: &Tensor, y: &Tensor, terms: usize| -> Result<()> {
        let (xs, ys) = (x.to_vec::<f32>()?, y.to(Device::Cpu)?.to_vec::<f32>()?);
        let tol = 1e-5 * terms as f32 * 8.0;
        for (i, (p, q)) in xs.iter().zip(&ys).enumerate() {
            assert!(
                (p - q).abs() <= tol,
                "{what}: element {i}: cpu {p} vs gpu {q}"
            );
        }
        Ok(())
    };
    sum_close(
        "sum all",
        &a.sum(None, false)?,
        &ga.sum(None, false)?,
        n * n,
    )?;
    sum_close(
        "sum dim 0",
        &a.sum(Some(&[0]), false)?,
        &ga.sum(Some(&[0]), false)?,
        n,
    )?;
    sum_close(
        "sum dim 1",
        &a.sum(Some(&[1]), false)?,
        &ga.sum(Some(&[1]), false)?,
        n,
    )?;
    let (v, i) = a.max_dim(0, false)?;
    let (gv, gi) = ga.max_dim(0, false)?;
    assert_same("max_dim 0", &v, &gv);
    assert_same("argmax 0", &i, &gi);
    assert_same("min all", &a.min()?, &ga.min()?);
    // 4-D permutation (tiled with outer dims).
    let x = data(&[3, 40, 5, 70], DType::F16, 9)?;
    let gx = x.to(dev)?;
    assert_same(
        "permute contiguous",
        &x.permute(&[0, 3, 2, 1])?.contiguous()?,
        &gx.permute(&[0, 3, 2, 1])?.contiguous()?,
    );
    Ok(())
}

test_device!(basic_semantics, basic_semantics_cpu, basic_semantics_gpu);

/// The same program on any device.
fn basic_semantics(dev: Device) -> Result<()> {
    let a = Tensor::arange(0.0, 6.0, 1.0, None, dev)?.view(&[2, 3])?;
    a.t()?.add_(10.0)?;
    assert_eq!(a.to_vec::<f32>()?, vec![10.0, 11.0, 12.0, 13.0, 14.0, 15.0]);
    assert_eq!(a.sum(None, false)?.item::<f32>()?, 75.0);
    let i = Tensor::from_slice(&[7i64, -7], &[2], dev)?;
    assert_eq!(
        i.div_mode(2, RoundingMode::Floor)?.to_vec::<i64>()?,
        vec![3, -4]
    );
    assert_eq!(a.to_dtype(DType::I32)?.device(), dev);
    let e = Tensor::zeros(&[0, 3], DType::F32, dev)?;
    assert_eq!(e.add(1.0)?.numel(), 0);
    Ok(())
}

test_device!(
    cancelling_neighbours_sum_as_pytorch,
    cancelling_neighbours_sum_as_pytorch_cpu,
    cancelling_neighbours_sum_as_pytorch_gpu
);

/// A short sum whose neighbours cancel (1e30 next to -1e30) keeps the small
/// terms on every device and every reduction kernel (contiguous, strided,
/// a strided weight inside `mse_loss`); adding the far pairs first would lose
/// them. The figures are PyTorch 2.15's (fuzz_ops seed 2750 case 0045).
fn cancelling_neighbours_sum_as_pytorch(dev: Device) -> Result<()> {
    let big = 1.000_255_551_742_587_3e30;
    for dtype in [DType::BF16, DType::F32] {
        let w = Tensor::from_slice(&[-big, big, 0.75, 0.25], &[4], Device::Cpu)?
            .to_dtype(dtype)?
            .to(dev)?;
        assert_eq!(
            w.sum(None, false)?.item::<f64>()?,
            1.0,
            "{dtype} contiguous"
        );
        let spread = [
            -big, -7.5, -7.5, big, -7.5, -7.5, 0.75, -7.5, -7.5, 0.25, -7.5, -7.5,
        ];
        let ws = Tensor::from_slice(&spread, &[12], Device::Cpu)?
            .to_dtype(dtype)?
            .to(dev)?
            .slice(-1, Some(0), Some(13), 3)?;
        assert_eq!(ws.sum(None, false)?.item::<f64>()?, 1.0, "{dtype} strided");
        if dtype == DType::BF16 {
            let x = Tensor::from_slice(&[-0.75f64, 2.875, 1.375, 2.125], &[4], Device::Cpu)?
                .to_dtype(dtype)?
                .to(dev)?;
            let y = Tensor::from_slice(&[0.75f64, -1.5, 2.625, -1.375], &[4], Device::Cpu)?
                .to_dtype(dtype)?
                .to(dev)?;
            let loss = x.mse_loss(&y, strata_tensor::Reduction::Mean, Some(&ws))?;
            let want = 1.687_559_861_553_830_4e31;
            let got = loss.item::<f64>()?;
            assert!(
                (got - want).abs() <= want * 2f64.powi(-6),
                "weighted mse_loss: got {got}, PyTorch {want}"
            );
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn transfers_pinned_pageable_and_non_blocking() -> Result<()> {
    let dev = gpu();
    // Sizes around the staging chunk and the small-copy threshold.
    let (chunk, _) = cuda::staging_geometry();
    for n in [
        0usize,
        1,
        1000,
        (1 << 20) / 4 + 3,
        chunk / 4 * 3 + 11,
        chunk / 4 * 9 + 5,
    ] {
        let x = Tensor::arange(0.0, n as f64, 1.0, Some(DType::F32), Device::Cpu)?;
        let g = x.to(dev)?;
        assert_eq!(g.device(), dev);
        let back = g.to(Device::Cpu)?;
        assert_eq!(
            back.to_vec::<f32>()?,
            x.to_vec::<f32>()?,
            "pageable round trip of {n}"
        );
        let p = x.pin_memory()?;
        assert!(p.is_pinned());
        let g2 = p.to_device(dev, true)?;
        let back2 = g2.to_device(Device::Cpu, true)?;
        assert!(back2.is_pinned());
        cuda::current_stream(dev)?.synchronize()?;
        assert_eq!(
            back2.to_vec::<f32>()?,
            x.to_vec::<f32>()?,
            "pinned round trip of {n}"
        );
    }
    let stats = cuda::host_memory_stats(0).expect("stats");
    assert!(
        stats.to_map().values().any(|&v| v > 0),
        "{:?}",
        stats.to_map()
    );
    assert!(cuda::pinned_memory_stats().is_some());
    // Device-to-device (same device) and a strided source.
    let x = data(&[300, 500], DType::F64, 3)?;
    let g = x.to(dev)?;
    assert_same("clone", &x, &g.deep_clone()?);
    assert_same("strided to cpu", &x.t()?, &g.t()?);
    if cuda::device_count() > 1 {
        let g1 = g.to(Device::Cuda(1))?;
        assert_same("peer copy", &x, &g1);
    }
    Ok(())
}

/// `to(device)` lays the copy out as PyTorch's `_to_copy` does
/// (`preserve_format`), both ways and through pinned memory: a dense view
/// keeps its strides (transposed, permuted, sliced with an offset), any other
/// becomes dense in the order of its strides, as `deep_clone` (PyTorch's
/// `clone`) lays it out on the CPU. `pin_memory` keeps any view's strides,
/// as PyTorch 2.11's does on an H100
/// (`docs/bench-results/2026-12-05-session62-pin_probe.py`).
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn transfers_keep_pytorchs_layout() -> Result<()> {
    let dev = gpu();
    let base = data(&[6, 8, 10], DType::F32, 11)?;
    let views = [
        ("contiguous", base.clone()),
        ("transposed", base.transpose(0, 2)?),
        ("permuted", base.permute(&[1, 2, 0])?),
        ("sliced rows", base.narrow(0, 2, 3)?),
        ("permuted slice", base.narrow(0, 1, 4)?.permute(&[2, 0, 1])?),
        ("strided", base.slice(2, None, None, 2)?),
        (
            "strided transposed",
            base.slice(1, Some(1), None, 3)?.transpose(1, 2)?,
        ),
        ("expanded", base.narrow(0, 0, 1)?.expand(&[4, 8, 10])?),
        ("size-1 dims", base.narrow(1, 3, 1)?.transpose(0, 1)?),
        ("empty", base.narrow(1, 0, 0)?.transpose(0, 2)?),
    ];
    for (what, x) in views {
        let want = x.deep_clone()?;
        let g = x.to(dev)?;
        assert_eq!(g.strides(), want.strides(), "{what}: strides on the GPU");
        assert_eq!(g.offset(), 0, "{what}");
        assert_same(what, &x, &g);
        let back = g.to(Device::Cpu)?;
        assert_eq!(back.strides(), want.strides(), "{what}: strides back");
        assert!(back.equal(&x)?, "{what}: values back");
        // Through pinned memory, asynchronously both ways. PyTorch's
        // pin_memory keeps the view's strides and gaps at offset 0 and
        // refuses an expanded view (elements sharing memory).
        let p = match x.pin_memory() {
            Err(TensorError::Overlap { .. }) if x.layout().has_internal_overlap() => {
                let p = x.contiguous()?.pin_memory()?;
                assert!(p.is_contiguous(), "{what}");
                p
            }
            p => {
                let p = p?;
                assert_eq!(p.strides(), x.strides(), "{what}: pinned strides");
                assert_eq!(p.offset(), 0, "{what}: pinned offset");
                // PyTorch's computeStorageNbytes: one past the last element
                // at offset 0, nothing for an empty view.
                let span = Layout {
                    offset: 0,
                    ..x.layout().clone()
                }
                .storage_extent();
                assert_eq!(
                    p.storage_len(),
                    span,
                    "{what}: pinned storage spans the view"
                );
                assert!(p.is_pinned() && p.equal(&x)?, "{what}: pinned copy");
                p
            }
        };
        let gp = p.to_device(dev, true)?;
        let bp = gp.to_device(Device::Cpu, true)?;
        cuda::current_stream(dev)?.synchronize()?;
        assert_eq!(gp.strides(), want.strides(), "{what}: from pinned");
        assert_eq!(bp.strides(), want.strides(), "{what}: to pinned");
        assert!(bp.is_pinned() && bp.equal(&x)?, "{what}: pinned values");
        // A view of the GPU copy reads the same elements as the CPU view.
        if x.ndim() == 3 && x.numel() > 0 {
            assert_same(
                &format!("{what} viewed"),
                &x.transpose(0, 1)?,
                &g.transpose(0, 1)?,
            );
        }
    }
    Ok(())
}

/// `clamp` of an integer view to a float bound converts the input first on
/// every device (PyTorch's `build_unary_op(out, self.to(result_type))`), so
/// the GPU lays the f32 result out as the CPU does: PyTorch 2.11 gives
/// strides (16, 4, 1) on both devices for this view
/// (`docs/bench-results/2026-12-05-session60-probe_strides.py`).
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn clamp_to_a_float_bound_is_laid_out_as_on_the_cpu() -> Result<()> {
    let dev = gpu();
    let base = Tensor::arange(0i64, 50, 1, Some(DType::I32), Device::Cpu)?;
    for d in [Device::Cpu, dev] {
        let x = base.to(d)?.as_strided(&[1, 4, 4], &[5, 10, 1], Some(2))?;
        let y = x.clamp(Some(7e4), None::<f64>)?;
        assert_eq!(y.dtype(), DType::F32, "{d}");
        assert_eq!(y.strides(), &[16, 4, 1], "{d}");
        let z = x.clamp(None::<f64>, Some(20.5))?;
        assert_eq!(z.strides(), &[16, 4, 1], "{d}");
        assert!(z.to(Device::Cpu)?.equal(
            &x.to(Device::Cpu)?
                .to_dtype(DType::F32)?
                .clamp(None::<f64>, Some(20.5))?
        )?);
    }
    Ok(())
}

/// Stream priorities as PyTorch's `torch.cuda.Stream(priority=...)`: the
/// range is reported, out-of-range requests are clamped to it, and work on a
/// high-priority stream is ordered like work on any other.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn stream_priorities_are_clamped_and_reported() -> Result<()> {
    let dev = gpu();
    let (least, greatest) = cuda::Stream::priority_range(dev)?;
    assert!(
        greatest < least,
        "({least}, {greatest}): Hopper has more than one priority"
    );
    assert_eq!(cuda::Stream::new(dev)?.priority()?, 0);
    assert_eq!(cuda::Stream::default_stream(dev).priority()?, 0);
    let hi = cuda::Stream::with_priority(dev, greatest)?;
    assert_eq!(hi.priority()?, greatest);
    assert_eq!(
        cuda::Stream::with_priority(dev, i32::MIN)?.priority()?,
        greatest
    );
    assert_eq!(
        cuda::Stream::with_priority(dev, i32::MAX)?.priority()?,
        least
    );
    let a = Tensor::zeros(&[1 << 20], DType::F32, dev)?;
    {
        let _g = cuda::StreamGuard::new(&hi)?;
        hi.wait_stream(&cuda::Stream::default_stream(dev))?;
        a.add_(2.0)?;
        a.mul_(3.0)?;
    }
    a.record_stream(&hi)?;
    hi.synchronize()?;
    assert_eq!(a.min()?.item::<f32>()?, 6.0);
    assert_eq!(a.max()?.item::<f32>()?, 6.0);
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn streams_events_and_record_stream() -> Result<()> {
    let dev = gpu();
    let side = cuda::Stream::new(dev)?;
    assert_eq!(
        cuda::current_stream(dev)?,
        cuda::Stream::default_stream(dev)
    );
    let a = Tensor::zeros(&[1 << 20], DType::F32, dev)?;
    let start = cuda::Event::new(dev, true)?;
    let end = cuda::Event::new(dev, true)?;
    {
        let _g = cuda::StreamGuard::new(&side)?;
        assert_eq!(cuda::current_stream(dev)?, side);
        side.wait_stream(&cuda::Stream::default_stream(dev))?;
        start.record(&side)?;
        for _ in 0..10 {
            a.add_(1.0)?;
        }
        end.record(&side)?;
        // Memory allocated here belongs to the side stream.
        let tmp = Tensor::ones(&[1 << 16], DType::F32, dev)?;
        a.narrow(0, 0, 1 << 16)?.add_(&tmp)?;
    }
    assert_eq!(
        cuda::current_stream(dev)?,
        cuda::Stream::default_stream(dev)
    );
    a.record_stream(&side)?;
    end.synchronize()?;
    assert!(end.query()?);
    assert!(start.elapsed_ms(&end)? >= 0.0);
    side.synchronize()?;
    let v = a.to_vec::<f32>()?;
    assert_eq!(v[0], 11.0);
    assert_eq!(v[(1 << 20) - 1], 10.0);
    // A tensor used on the side stream and dropped is not reused before the
    // side stream's work has run: write, record, drop, reallocate, check.
    for round in 0..5 {
        let b = Tensor::zeros(&[1 << 22], DType::F32, dev)?;
        {
            let _g = cuda::StreamGuard::new(&side)?;
            side.wait_stream(&cuda::Stream::default_stream(dev))?;
            for _ in 0..50 {
                b.add_(1.0)?;
            }
        }
        b.record_stream(&side)?;
        drop(b);
        let c = Tensor::full(&[1 << 22], 5.0, DType::F32, dev)?;
        side.synchronize()?;
        assert_eq!(c.min()?.item::<f32>()?, 5.0, "round {round}");
        assert_eq!(c.max()?.item::<f32>()?, 5.0, "round {round}");
    }
    cuda::synchronize(dev)?;
    Ok(())
}

#[test]
fn without_a_gpu_cuda_tensors_are_typed_errors() {
    if strata_tensor::has_backend(GPU) {
        return; // `errors_are_typed` covers the GPU machine.
    }
    let e = Tensor::zeros(&[2], DType::F32, GPU).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::BackendUnavailable { .. } | TensorError::Alloc(_)
        ),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn errors_are_typed() -> Result<()> {
    let dev = gpu();
    let a = Tensor::ones(&[3], DType::F32, dev)?;
    let b = Tensor::ones(&[3], DType::F32, Device::Cpu)?;
    assert!(matches!(a.add(&b), Err(TensorError::DeviceMismatch { .. })));
    assert!(matches!(
        a.copy_(&b),
        Err(TensorError::DeviceMismatch { .. })
    ));
    let bad = Device::Cuda(1 << 10);
    assert!(Tensor::zeros(&[1], DType::F32, bad).is_err());
    Ok(())
}

/// `rand`, `randn` and `arange` are generated on the GPU from the same
/// counter-based streams as on the CPU: uniform values and ranges are
/// bit-identical, normal values agree to the last bits of f64's `ln`/`cos`/`sin`.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn generated_tensors_match_the_cpu() -> Result<()> {
    let dev = gpu();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for shape in [&[0usize][..], &[1], &[7, 3], &[100_003]] {
            for seed in [0u64, 1, 0xdead_beef_cafe] {
                let c = Tensor::rand(shape, dtype, seed, Device::Cpu)?;
                let g = Tensor::rand(shape, dtype, seed, dev)?;
                assert_eq!(g.device(), dev);
                assert_eq!(
                    c.to_scalars()?,
                    g.to(Device::Cpu)?.to_scalars()?,
                    "rand {dtype} {shape:?} seed {seed}"
                );
                let c = Tensor::randn(shape, dtype, seed, Device::Cpu)?.to_dtype(DType::F64)?;
                let g = Tensor::randn(shape, dtype, seed, dev)?
                    .to(Device::Cpu)?
                    .to_dtype(DType::F64)?;
                let (c, g) = (c.to_vec::<f64>()?, g.to_vec::<f64>()?);
                // One ulp of the dtype at the value (f64: a few ulps of ln/cos/sin).
                let eps = match dtype {
                    DType::F64 => 1e-13,
                    DType::F32 => 2f64.powi(-23),
                    DType::F16 => 2f64.powi(-10),
                    _ => 2f64.powi(-7),
                };
                for (k, (a, b)) in c.iter().zip(&g).enumerate() {
                    assert!(
                        (a - b).abs() <= eps * a.abs().max(1.0),
                        "randn {dtype} {shape:?} seed {seed} at {k}: {a} vs {b}"
                    );
                }
            }
        }
    }
    for dtype in DType::ALL {
        if dtype == DType::Bool {
            continue;
        }
        for (s, e, st) in [(0.0, 100_000.0, 1.0), (-3.5, 2.0, 0.25), (10.0, 0.0, -0.3)] {
            let c = Tensor::arange(s, e, st, Some(dtype), Device::Cpu);
            let g = Tensor::arange(s, e, st, Some(dtype), dev);
            match (c, g) {
                (Ok(c), Ok(g)) => assert_eq!(
                    c.to_scalars()?,
                    g.to(Device::Cpu)?.to_scalars()?,
                    "arange {dtype} {s} {e} {st}"
                ),
                // An integer dtype truncates the step -0.3 to 0: an error on both.
                (Err(_), Err(_)) => {}
                (c, g) => panic!("arange {dtype} {s} {e} {st}: cpu {c:?}, gpu {g:?}"),
            }
        }
        let c = Tensor::arange(-7, 1_000_003, 3, Some(dtype), Device::Cpu)?;
        let g = Tensor::arange(-7, 1_000_003, 3, Some(dtype), dev)?;
        assert_eq!(
            c.to_scalars()?,
            g.to(Device::Cpu)?.to_scalars()?,
            "arange {dtype}"
        );
    }
    // A size the GPU cannot hold is the allocator's typed error, not a host abort.
    assert!(matches!(
        Tensor::rand(&[1 << 50], DType::F32, 0, dev),
        Err(TensorError::Alloc(_))
    ));
    Ok(())
}

// ---- Tensor-core matrix products (issue 11): f16, bf16, f32, TF32 --------

/// `|x|` as relu(x) + relu(-x) (exact in f64).
fn abs64(t: &Tensor) -> Result<Tensor> {
    t.relu()?.add(&t.neg()?.relu()?)
}

/// The GPU product `ga @ gb` checked against the f64 product of the same
/// values on the CPU: within `rel` of the exact value plus `acc` times the
/// sum of |products| (the accumulation and operand-rounding error allowed).
fn check_gpu_product(what: &str, ga: &Tensor, gb: &Tensor, rel: f64, acc: f64) -> Result<()> {
    let r = ga.matmul(gb)?;
    assert_eq!(r.dtype(), ga.dtype(), "{what}: dtype");
    let a = ga.to(Device::Cpu)?.to_dtype(DType::F64)?;
    let b = gb.to(Device::Cpu)?.to_dtype(DType::F64)?;
    let exact = a.matmul(&b)?;
    let mag = abs64(&a)?.matmul(&abs64(&b)?)?;
    assert_eq!(r.shape(), exact.shape(), "{what}: shape");
    let got = r.to(Device::Cpu)?.to_dtype(DType::F64)?.to_vec::<f64>()?;
    let (e, m) = (exact.to_vec::<f64>()?, mag.to_vec::<f64>()?);
    for (i, ((g, e), m)) in got.iter().zip(&e).zip(&m).enumerate() {
        let tol = rel * e.abs() + acc * m + 1e-30;
        assert!(
            (g - e).abs() <= tol,
            "{what}: element {i}: gpu {g}, exact {e}, tolerance {tol}"
        );
    }
    Ok(())
}

/// Random operands on the GPU with the layouts of issue 11: plain,
/// transposed (a transpose flag for cuBLAS), broadcast batches with stride 0,
/// the folded `[B, m, k] @ [k, n]` case and batch dims that need a copy.
fn gpu_operands(
    dev: Device,
    case: u64,
    rng: &mut Rng,
    dtype: DType,
) -> Result<(String, Tensor, Tensor)> {
    let (m, k, n) = (
        1 + rng.below(150) as usize,
        1 + rng.below(700) as usize,
        1 + rng.below(150) as usize,
    );
    let bs = 1 + rng.below(5) as usize;
    let g =
        |shape: &[usize], s: u64| -> Result<Tensor> { data(shape, dtype, s)?.mul(0.125)?.to(dev) };
    let seed = 7000 + 10 * case;
    let kind = rng.below(7);
    let (a, b) = match kind {
        0 => (g(&[m, k], seed)?, g(&[k, n], seed + 1)?),
        1 => (g(&[k, m], seed)?.t()?, g(&[n, k], seed + 1)?.t()?),
        2 => (
            g(&[bs, m, k], seed)?,
            g(&[bs, n, k], seed + 1)?.transpose(1, 2)?,
        ),
        3 => (g(&[m, k], seed)?, g(&[bs, k, n], seed + 1)?),
        4 => (g(&[bs, m, k], seed)?, g(&[n, k], seed + 1)?.t()?),
        5 => (g(&[2, 1, m, k], seed)?, g(&[1, 3, k, n], seed + 1)?),
        _ => (
            g(&[bs, k, m], seed)?.transpose(1, 2)?,
            g(&[k, n], seed + 1)?.expand(&[bs as i64, k as i64, n as i64])?,
        ),
    };
    Ok((
        format!(
            "case {case} kind {kind} {dtype} a{:?} b{:?}",
            a.shape(),
            b.shape()
        ),
        a,
        b,
    ))
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn tensor_core_matmul_matches_f64_reference() -> Result<()> {
    use strata_tensor::{set_float32_matmul_precision, Precision};
    let dev = gpu();
    let mut rng = Rng(0x005e_ed11);
    let u32_ = 2f64.powi(-24);
    for case in 0..60u64 {
        let dtype = [DType::F16, DType::BF16, DType::F32][(case % 3) as usize];
        let (what, a, b) = gpu_operands(dev, case, &mut rng, dtype)?;
        let k = a.shape()[a.ndim() - 1] as f64;
        match dtype {
            // One rounding of an f32 accumulation; cuBLAS may reduce split-K
            // partials in the half type (PyTorch's default, allowed here too).
            DType::F16 => check_gpu_product(&what, &a, &b, 2f64.powi(-10), 2f64.powi(-9))?,
            DType::BF16 => check_gpu_product(&what, &a, &b, 2f64.powi(-7), 2f64.powi(-6))?,
            _ => {
                // Exact f32 by default: an error as large as TF32's fails here.
                check_gpu_product(&what, &a, &b, u32_, 2.0 * k * u32_)?;
                // TF32 when opted in: operands rounded to 10 mantissa bits.
                set_float32_matmul_precision(Precision::High);
                let r = check_gpu_product(&format!("{what} tf32"), &a, &b, u32_, 2f64.powi(-9));
                set_float32_matmul_precision(Precision::Highest);
                r?;
            }
        }
    }
    // A product large enough for cuBLAS's tensor-core tiles and split-K.
    for dtype in [DType::BF16, DType::F16] {
        let a = data(&[256, 4096], dtype, 71)?.mul(0.125)?.to(dev)?;
        let b = data(&[512, 4096], dtype, 72)?.mul(0.125)?.to(dev)?.t()?;
        check_gpu_product(
            &format!("{dtype} 256x4096x512"),
            &a,
            &b,
            2f64.powi(-8),
            2f64.powi(-7),
        )?;
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn tensor_core_matmul_keeps_pytorch_semantics() -> Result<()> {
    let dev = gpu();
    for dtype in [DType::F16, DType::BF16] {
        let a = data(&[5], dtype, 1)?.to(dev)?;
        let b = data(&[5], dtype, 2)?.to(dev)?;
        assert_eq!(a.matmul(&b)?.shape(), &[] as &[usize]);
        let m = data(&[3, 5], dtype, 3)?.to(dev)?;
        assert_eq!(m.matmul(&a)?.shape(), &[3]);
        assert_eq!(a.matmul(&m.t()?)?.shape(), &[3]);
        let z = data(&[3, 0], dtype, 4)?
            .to(dev)?
            .matmul(&data(&[0, 2], dtype, 5)?.to(dev)?)?;
        assert_eq!(
            z.to(Device::Cpu)?.to_dtype(DType::F64)?.to_vec::<f64>()?,
            vec![0.0; 6]
        );
        let other = if dtype == DType::F16 {
            DType::BF16
        } else {
            DType::F16
        };
        let c = data(&[5, 2], other, 6)?.to(dev)?;
        assert!(matches!(m.matmul(&c), Err(TensorError::DType { .. })));
        let d = data(&[2, 2, 3], dtype, 7)?.to(dev)?;
        let e = data(&[5, 3, 2], dtype, 8)?.to(dev)?;
        assert!(matches!(d.matmul(&e), Err(TensorError::Broadcast { .. })));
        assert!(matches!(d.bmm(&e), Err(TensorError::Shape { .. })));
    }
    Ok(())
}

// ---- issue 12: nn, indexing and joining ops against the CPU (branch nn) ----

/// Random i64 indices in `[0, hi)` on the CPU.
fn rand_index(shape: &[usize], hi: usize, seed: u64) -> Result<Tensor> {
    Tensor::rand(shape, DType::F64, seed, Device::Cpu)?
        .mul(hi as f64)?
        .to_dtype(DType::I64)
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn index_ops_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x1d3);
    for round in 0..24u64 {
        let (r, c) = (1 + rng.below(40) as usize, 1 + rng.below(40) as usize);
        let kind = rng.below(6);
        let dtype = DTYPES[(round % 8) as usize];
        let (x, base) = view(r, c, kind, dtype, round)?;
        let gx = twin(&x, &base, dev)?;
        let k = 1 + rng.below(50) as usize;
        let i0 = rand_index(&[k], r, round + 1)?;
        let i1 = rand_index(&[k], c, round + 2)?.to_dtype(DType::I32)?;
        assert_same(
            "index_select 0",
            &x.index_select(0, &i0)?,
            &gx.index_select(0, &i0.to(dev)?)?,
        );
        assert_same(
            "index_select 1",
            &x.index_select(1, &i1)?,
            &gx.index_select(1, &i1.to(dev)?)?,
        );
        let gi = rand_index(&[r, k], c, round + 3)?;
        assert_same("gather", &x.gather(1, &gi)?, &gx.gather(1, &gi.to(dev)?)?);
        if dtype != DType::Bool && !matches!(dtype, DType::F16 | DType::BF16) {
            // Exact sums (integers, or floats whose order does not matter much).
            let src = data(&[r, k], dtype, round + 4)?;
            assert_sum(
                "scatter_add",
                &x.scatter_add(1, &gi, &src)?,
                &gx.scatter_add(1, &gi.to(dev)?, &src.to(dev)?)?,
            );
        }
        let w = data(&[r, c], dtype, round + 5)?;
        let e = rand_index(&[3, k], r, round + 6)?;
        assert_same(
            "embedding",
            &Tensor::embedding(&e, &w, None)?,
            &Tensor::embedding(&e.to(dev)?, &w.to(dev)?, None)?,
        );
        let m = data(&[r, c], DType::F32, round + 7)?.gt(0.0)?;
        let v = if dtype == DType::Bool {
            Scalar::Bool(true)
        } else {
            Scalar::Int(3)
        };
        assert_same(
            "masked_fill",
            &x.masked_fill(&m, v)?,
            &gx.masked_fill(&m.to(dev)?, v)?,
        );
        let d = rng.below(5) as i64 - 2;
        assert_same("triu", &x.triu(d)?, &gx.triu(d)?);
        assert_same("tril", &x.tril(d)?, &gx.tril(d)?);
    }
    // Out-of-range indices are typed errors on the GPU too.
    let x = Tensor::zeros(&[3, 4], DType::F32, dev)?;
    let bad = Tensor::from_slice(&[0i64, 3], &[2], dev)?;
    assert!(matches!(
        x.index_select(0, &bad),
        Err(TensorError::Index { .. })
    ));
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn scatter_add_narrow_dtypes_accumulate_on_the_gpu() -> Result<()> {
    let dev = gpu();
    for dtype in [DType::F16, DType::BF16, DType::U8, DType::Bool] {
        let x = Tensor::zeros(&[4], dtype, Device::Cpu)?;
        let idx = Tensor::from_slice(&[1i64, 1, 3, 1], &[4], Device::Cpu)?;
        let src = Tensor::ones(&[4], dtype, Device::Cpu)?;
        let cpu = x.scatter_add(0, &idx, &src)?;
        let g = x.to(dev)?.scatter_add(0, &idx.to(dev)?, &src.to(dev)?)?;
        assert_same("scatter_add narrow", &cpu, &g);
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn join_ops_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x5a7);
    for round in 0..12u64 {
        let (r, c) = (1 + rng.below(20) as usize, 1 + rng.below(20) as usize);
        let (a, ab) = view(r, c, rng.below(4), DType::F32, round)?;
        let (b, bb) = view(r, c, rng.below(4), DType::BF16, round + 1)?;
        let (ga, gb) = (twin(&a, &ab, dev)?, twin(&b, &bb, dev)?);
        for d in [0, 1, -1] {
            assert_same(
                "cat",
                &Tensor::cat(&[&a, &b, &a], d)?,
                &Tensor::cat(&[&ga, &gb, &ga], d)?,
            );
        }
        assert_same(
            "stack",
            &Tensor::stack(&[&a, &a], 1)?,
            &Tensor::stack(&[&ga, &ga], 1)?,
        );
        let (ps, gs) = (a.split(3, 1)?, ga.split(3, 1)?);
        assert_eq!(ps.len(), gs.len());
        for (p, g) in ps.iter().zip(&gs) {
            assert!(g.same_storage(&ga));
            assert_same("split", p, g);
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn layer_norm_forward_and_backward_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x1a7);
    // Widths below and above the kernel's shared-memory row cache (4096 f32).
    for (round, cols) in [1usize, 7, 64, 768, 1000, 5000].into_iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let rows = 1 + rng.below(33) as usize;
            let seed = round as u64 * 10;
            let x = data(&[rows, cols], dtype, seed)?;
            let wdt = if dtype == DType::BF16 {
                DType::F32
            } else {
                dtype
            };
            let w = data(&[cols], wdt, seed + 1)?;
            let b = data(&[cols], wdt, seed + 2)?;
            let (y, m, s) = x.layer_norm_forward(&[cols], Some(&w), Some(&b), 1e-5)?;
            let (gx, gw, gb) = (x.to(dev)?, w.to(dev)?, b.to(dev)?);
            let (gy, gm, gs) = gx.layer_norm_forward(&[cols], Some(&gw), Some(&gb), 1e-5)?;
            assert_sum("layer_norm out", &y, &gy);
            assert_sum("layer_norm mean", &m, &gm);
            assert_sum("layer_norm rstd", &s, &gs);
            let dy = data(&[rows, cols], dtype, seed + 3)?;
            let c = Tensor::layer_norm_backward(&dy, &x, &m, &s, Some(&w), &[cols], [true; 3])?;
            let g = Tensor::layer_norm_backward(
                &dy.to(dev)?,
                &gx,
                &gm,
                &gs,
                Some(&gw),
                &[cols],
                [true; 3],
            )?;
            for (k, (c, g)) in c.iter().zip(&g).enumerate() {
                let what = format!("layer_norm grad {k} {dtype}");
                let (c, g) = (c.as_ref().unwrap(), g.as_ref().unwrap());
                let abs = |t: &Tensor| t.to_dtype(DType::F64)?.abs();
                if k == 1 {
                    // dgamma = sum over rows of dy (x - mean) rstd, whose
                    // exact value can be 0 (one column: x - mean is 0) while
                    // each device's rounding leaves noise of a few ulps of
                    // the terms (PyTorch's CPU kernel forms rstd x - rstd
                    // mean). Its tolerance scales with sum |dy| |x| rstd.
                    // For f16/bf16 input the CPU, as PyTorch's CPU kernel,
                    // rounds the column sums to the input's dtype as it goes
                    // (PyTorch 2.15's CPU dgamma of bf16 [33, 1000] input is
                    // up to 0.0114 × (1 + magnitude sum) off the exact sum;
                    // session 60's H100 run: 37.5 on the CPU, 35.35 on the
                    // GPU, magnitude sum 184.5), the GPU sums in f32.
                    let s64 = s.to_dtype(DType::F64)?.reshape(&[rows as i64, 1])?;
                    let scale = abs(&dy)?
                        .mul(&abs(&x)?)?
                        .mul(&s64)?
                        .sum(Some(&[0]), false)?;
                    assert_rounded_sum(&what, c, g, &scale, rows, dtype);
                } else if k == 2 {
                    // dbeta = sum over rows of dy. For f16/bf16 input the
                    // CPU follows PyTorch's CPU kernel, whose column sums
                    // are rounded to the input's dtype as they go (PyTorch
                    // 2.15: f32 parameters, bf16 rows summing to -18.95 give
                    // -18.75), the GPU PyTorch's CUDA kernel, which sums in
                    // f32: the tolerance is the input dtype's roundings over
                    // the rows, scaled by sum |dy|.
                    let scale = abs(&dy)?.sum(Some(&[0]), false)?;
                    assert_rounded_sum(&what, c, g, &scale, rows, dtype);
                } else {
                    assert_sum(&what, c, g);
                }
            }
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cross_entropy_forward_and_backward_match_cpu() -> Result<()> {
    use strata_tensor::Reduction;
    let dev = gpu();
    let mut rng = Rng(0xce);
    for round in 0..12u64 {
        let dtype = [DType::F32, DType::F64, DType::F16, DType::BF16][(round % 4) as usize];
        let (n, c) = (1 + rng.below(40) as usize, 2 + rng.below(3000) as usize);
        let x = data(&[c, n], dtype, round)?.t()?; // non-contiguous logits
        let mut t = rand_index(&[n], c, round + 1)?.to_vec::<i64>()?;
        t[0] = -100;
        let t = Tensor::from_vec(t, &[n], Device::Cpu)?;
        let w = Tensor::rand(&[c], dtype, round + 2, Device::Cpu)?;
        let gw = w.to(dev)?;
        for (red, smooth, weighted) in [
            (Reduction::Mean, 0.0, false),
            (Reduction::Sum, 0.1, true),
            (Reduction::None, 0.0, true),
        ] {
            let (args, gargs) = ce_args(&w, &gw, red, smooth, weighted);
            let (l, s) = x.cross_entropy_forward(&t, args)?;
            let gx = x.to(dev)?;
            let (gl, gs) = gx.cross_entropy_forward(&t.to(dev)?, gargs)?;
            assert_sum("cross_entropy loss", &l, &gl);
            let g = Tensor::ones(l.shape(), l.dtype(), Device::Cpu)?;
            let dx = x.cross_entropy_backward(&g, &s.unwrap(), args)?;
            let gdx = gx.cross_entropy_backward(&g.to(dev)?, &gs.unwrap(), gargs)?;
            assert_sum("cross_entropy grad", &dx, &gdx);
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn losses_and_dropout_match_cpu() -> Result<()> {
    use strata_tensor::Reduction;
    let dev = gpu();
    for dtype in [DType::F32, DType::BF16, DType::F64] {
        let x = data(&[9, 5], dtype, 1)?;
        let y = data(&[5], dtype, 2)?;
        let t = rand_index(&[9], 5, 3)?;
        assert_sum(
            "mse",
            &x.mse_loss(&y, Reduction::Mean, None)?,
            &x.to(dev)?.mse_loss(&y.to(dev)?, Reduction::Mean, None)?,
        );
        assert_sum(
            "nll",
            &x.nll_loss(&t, None, -100, Reduction::Sum)?,
            &x.to(dev)?
                .nll_loss(&t.to(dev)?, None, -100, Reduction::Sum)?,
        );
        // Probability targets with an f64 class weight: the product
        // promotes, to an f64 loss (session 51).
        let p = data(&[9, 5], dtype, 4)?.softmax(1, None)?;
        let w64 = data(&[5], DType::F64, 5)?.abs()?;
        let gw64 = w64.to(dev)?;
        let weighted = |w| strata_tensor::CrossEntropyArgs {
            weight: Some(w),
            ..Default::default()
        };
        let l = x.cross_entropy(&p, weighted(&w64))?;
        let gl = x.to(dev)?.cross_entropy(&p.to(dev)?, weighted(&gw64))?;
        assert_eq!((l.dtype(), gl.dtype()), (DType::F64, DType::F64));
        // The log-probabilities are the logits' dtype on each device (a few
        // of its ulps apart), the products and their sum f64.
        let (a, b) = (l.item::<f64>()?, gl.item::<f64>()?);
        let tol = match dtype {
            DType::F64 => 1e-12,
            DType::F32 => 1e-5,
            _ => 2e-2,
        };
        assert!(
            (a - b).abs() <= tol * a.abs(),
            "{dtype}: cpu {a} vs gpu {b}"
        );
        // The same seed gives the same mask on every device.
        assert_same(
            "dropout",
            &x.dropout(0.3, true, 42)?,
            &x.to(dev)?.dropout(0.3, true, 42)?,
        );
    }
    Ok(())
}

// ----- issue 12: element-wise math, ops along a dim, creation on the GPU -----

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn math_ops_match_cpu_on_random_layouts() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0x3a7);
    for case in 0..80u64 {
        let dtype = DTYPES[rng.below(8) as usize];
        let (r, c) = (1 + rng.below(30) as usize, 1 + rng.below(300) as usize);
        let k = rng.below(6);
        let (a, base) = view(r, c, k, dtype, 500 + case)?;
        let ga = twin(&a, &base, dev)?;
        let what = format!("case {case} {dtype} [{r},{c}] kind {k}");
        type F = fn(&Tensor) -> Result<Tensor>;
        let ops: Vec<(&str, F)> = vec![
            ("sqrt", |x| x.sqrt()),
            ("rsqrt", |x| x.rsqrt()),
            ("abs", |x| x.abs()),
            ("tanh", |x| x.tanh()),
            ("sigmoid", |x| x.sigmoid()),
            ("silu", |x| x.silu()),
            ("gelu", |x| x.gelu(strata_tensor::GeluApprox::None)),
            ("gelu tanh", |x| x.gelu(strata_tensor::GeluApprox::Tanh)),
            ("sin", |x| x.sin()),
            ("cos", |x| x.cos()),
            ("erf", |x| x.erf()),
            ("log1p", |x| x.log1p()),
            ("expm1", |x| x.div(8)?.expm1()),
            ("reciprocal", |x| x.reciprocal()),
            ("sign", |x| x.sign()),
            ("pow 2", |x| x.pow(2)),
            ("pow 3", |x| x.pow(3)),
            ("pow 0.5", |x| x.pow(0.5)),
            ("pow -0.5", |x| x.pow(-0.5)),
            ("pow 1.7", |x| x.pow(1.7)),
            ("pow self", |x| x.abs()?.pow(&x.div(4)?)),
            ("2 ^ x", |x| {
                Tensor::scalar_pow(2, &x.div_mode(4, RoundingMode::Trunc)?)
            }),
            ("maximum", |x| x.maximum(&x.neg()?)),
            ("minimum", |x| {
                x.minimum(&x.sub(1)?.div_mode(2, RoundingMode::Floor)?)
            }),
        ];
        for (name, f) in &ops {
            match (f(&a), f(&ga)) {
                (Ok(x), Ok(y)) => assert_sum(&format!("{what} {name}"), &x, &y),
                (Err(_), Err(_)) => {}
                (x, y) => panic!("{what} {name}: cpu {:?} vs gpu {:?}", x.err(), y.err()),
            }
        }
        // In place on a fresh copy (views of expanded tensors are refused on both).
        type G = fn(&Tensor) -> Result<Tensor>;
        let inplace: Vec<(&str, G)> = vec![
            ("sqrt_", |x| x.sqrt_()),
            ("tanh_", |x| x.tanh_()),
            ("sign_", |x| x.sign_()),
            ("abs_", |x| x.abs_()),
            ("pow_ 2", |x| x.pow_(2)),
        ];
        for (name, f) in &inplace {
            let (x, y) = (a.deep_clone()?, ga.deep_clone()?);
            match (f(&x), f(&y)) {
                (Ok(_), Ok(_)) => assert_sum(&format!("{what} {name}"), &x, &y),
                (Err(_), Err(_)) => {}
                (p, q) => panic!("{what} {name}: cpu {:?} vs gpu {:?}", p.err(), q.err()),
            }
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn softmax_log_softmax_cumsum_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0xc0ffee);
    // Short rows (warp per row), long rows (block per row), rows of odd
    // lengths (no vector loads), inner dims (column kernel), non-contiguous.
    let shapes: Vec<Vec<usize>> = vec![
        vec![7, 5],
        vec![64, 1024],
        vec![3, 1023],
        vec![2, 4096],
        vec![5, 3000],
        vec![1, 100_000],
        vec![4, 33, 6],
        vec![2, 3, 4, 5],
        vec![1000],
        vec![],
        vec![0, 4],
    ];
    for (i, shape) in shapes.iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let x = Tensor::randn(shape, DType::F64, 900 + i as u64, Device::Cpu)?
                .mul(4.0)?
                .to_dtype(dtype)?;
            let gx = x.to(dev)?;
            for dim in -(shape.len().max(1) as i64)..(shape.len().max(1) as i64) {
                let what = format!("{shape:?} {dtype} dim {dim}");
                assert_sum(
                    &format!("{what} softmax"),
                    &x.softmax(dim, None)?,
                    &gx.softmax(dim, None)?,
                );
                assert_sum(
                    &format!("{what} log_softmax"),
                    &x.log_softmax(dim, None)?,
                    &gx.log_softmax(dim, None)?,
                );
                assert_sum(
                    &format!("{what} softmax f32"),
                    &x.softmax(dim, Some(DType::F32))?,
                    &gx.softmax(dim, Some(DType::F32))?,
                );
                // cumsum sums in another order on neither device: same order, f32/f64 acc.
                let cx = x.div(64)?;
                assert_sum(
                    &format!("{what} cumsum"),
                    &cx.cumsum(dim, None)?,
                    &cx.to(dev)?.cumsum(dim, None)?,
                );
                if shape.len() >= 2 {
                    // A transposed (non-contiguous) input.
                    let (xt, gt) = (x.transpose(0, -1)?, gx.transpose(0, -1)?);
                    assert_sum(
                        &format!("{what} softmax of t"),
                        &xt.softmax(dim, None)?,
                        &gt.softmax(dim, None)?,
                    );
                }
            }
        }
        // Integer cumsum (i64 result, exact) and a wrapping i32 cumsum.
        let xi = Tensor::randn(shape, DType::F64, 1900 + i as u64, Device::Cpu)?
            .mul(1000.0)?
            .to_dtype(DType::I32)?;
        let d = rng.below(shape.len().max(1) as u64) as i64;
        assert_same(
            "i32 cumsum",
            &xi.cumsum(d, None)?,
            &xi.to(dev)?.cumsum(d, None)?,
        );
        assert_same(
            "u8 cumsum",
            &xi.cumsum(d, Some(DType::U8))?,
            &xi.to(dev)?.cumsum(d, Some(DType::U8))?,
        );
    }
    // Special rows: +inf, NaN, all -inf, [-inf, 1].
    let ninf = f32::NEG_INFINITY;
    let rows = Tensor::from_slice(
        &[
            1.0,
            f32::INFINITY,
            2.0,
            f32::NAN,
            1.0,
            0.0,
            ninf,
            ninf,
            ninf,
            ninf,
            1.0,
            ninf,
        ],
        &[4, 3],
        Device::Cpu,
    )?;
    let grows = rows.to(dev)?;
    assert_same(
        "special softmax",
        &rows.softmax(1, None)?,
        &grows.softmax(1, None)?,
    );
    assert_same(
        "special log_softmax",
        &rows.log_softmax(1, None)?,
        &grows.log_softmax(1, None)?,
    );
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn creation_ops_match_cpu() -> Result<()> {
    let dev = gpu();
    for dtype in DTYPES {
        let x = Tensor::zeros(&[3, 4], dtype, dev)?;
        assert_same(
            "zeros_like",
            &Tensor::zeros(&[3, 4], dtype, Device::Cpu)?,
            &x.ones_like(None)?.zeros_like(None)?,
        );
        assert_same(
            "ones_like",
            &Tensor::ones(&[3, 4], dtype, Device::Cpu)?,
            &x.ones_like(None)?,
        );
        assert_same(
            "full_like",
            &Tensor::full(&[3, 4], 1, dtype, Device::Cpu)?,
            &x.full_like(1, None)?,
        );
        assert_same(
            "eye",
            &Tensor::eye(5, Some(3), dtype, Device::Cpu)?,
            &Tensor::eye(5, Some(3), dtype, dev)?,
        );
        assert_eq!(x.empty_like(None)?.device(), dev);
    }
    for dtype in [DType::I64, DType::I32, DType::U8, DType::F32, DType::F64] {
        let c = Tensor::randint(-5, 100, &[3, 1000], Some(dtype), 11, Device::Cpu);
        let g = Tensor::randint(-5, 100, &[3, 1000], Some(dtype), 11, dev);
        match (c, g) {
            (Ok(c), Ok(g)) => assert_same("randint", &c, &g),
            (Err(_), Err(_)) => {}
            (c, g) => panic!("randint {dtype}: cpu {:?} vs gpu {:?}", c.err(), g.err()),
        }
    }
    // Bools within PyTorch's bounds [0, 2) on both devices, and the same
    // refusal beyond them.
    for (low, high) in [(0, 2), (0, 1), (1, 2)] {
        let c = Tensor::randint(low, high, &[3, 1000], Some(DType::Bool), 12, Device::Cpu)?;
        let g = Tensor::randint(low, high, &[3, 1000], Some(DType::Bool), 12, dev)?;
        assert_same("randint bool", &c, &g);
    }
    assert!(Tensor::randint(0, 3, &[4], Some(DType::Bool), 12, dev).is_err());
    let x = Tensor::zeros(&[4, 257], DType::F32, dev)?;
    assert_same(
        "rand_like",
        &Tensor::rand(&[4, 257], DType::F32, 5, Device::Cpu)?,
        &x.rand_like(None, 5)?,
    );
    assert_same(
        "randn_like",
        &Tensor::randn(&[4, 257], DType::F64, 5, Device::Cpu)?,
        &x.randn_like(Some(DType::F64), 5)?,
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Reductions at memory speed (issue 11) and argmin/var/std/logsumexp
// (issue 12): every kernel path (`rows` with vector loads and misaligned
// heads, `cols` vectorised and not, the general kernel, split outputs with a
// second pass) against the CPU.
// ---------------------------------------------------------------------------

/// Compares every reduction of `x` over `dims` on the GPU with the CPU.
fn check_all_reductions(what: &str, x: &Tensor, dims: &[Option<Vec<i64>>]) -> Result<()> {
    let dev = gpu();
    let g = x.to(dev)?;
    let dtype = x.dtype();
    for dims in dims {
        let d = dims.as_deref();
        let w = format!("{what} dims {dims:?}");
        if dtype.is_float() {
            // A float sum in another order differs by up to eps times the sum
            // of the magnitudes, which cancellation can make far larger than
            // the result itself.
            let mag = x.abs()?;
            assert_sum_scaled(
                &format!("{w} sum"),
                &x.sum(d, false)?,
                &g.sum(d, false)?,
                &mag.sum(d, false)?,
                x.dtype(),
            );
            assert_sum_scaled(
                &format!("{w} mean"),
                &x.mean(d, true)?,
                &g.mean(d, true)?,
                &mag.mean(d, true)?,
                x.dtype(),
            );
            assert_sum(
                &format!("{w} var"),
                &x.var(d, 1.0, false)?,
                &g.var(d, 1.0, false)?,
            );
            assert_sum(
                &format!("{w} std"),
                &x.std(d, 0.0, true)?,
                &g.std(d, 0.0, true)?,
            );
        } else {
            assert_sum(&format!("{w} sum"), &x.sum(d, false)?, &g.sum(d, false)?);
        }
        let ld = dims.clone().unwrap_or_default();
        let keep = ld.is_empty();
        assert_sum(
            &format!("{w} logsumexp"),
            &x.logsumexp(&ld, keep)?,
            &g.logsumexp(&ld, keep)?,
        );
    }
    if x.numel() > 0 {
        assert_same(&format!("{what} max"), &x.max()?, &g.max()?);
        assert_same(&format!("{what} min"), &x.min()?, &g.min()?);
        if dtype != DType::Bool {
            assert_same(
                &format!("{what} argmax"),
                &x.argmax(None, false)?,
                &g.argmax(None, false)?,
            );
            assert_same(
                &format!("{what} argmin"),
                &x.argmin(None, true)?,
                &g.argmin(None, true)?,
            );
        }
    }
    for dim in 0..x.ndim() as i64 {
        if x.shape()[dim as usize] == 0 {
            continue;
        }
        let (v, i) = x.max_dim(dim, false)?;
        let (gv, gi) = g.max_dim(dim, false)?;
        assert_same(&format!("{what} max_dim {dim}"), &v, &gv);
        assert_same(&format!("{what} max_dim {dim} indices"), &i, &gi);
        let (v, i) = x.min_dim(dim, true)?;
        let (gv, gi) = g.min_dim(dim, true)?;
        assert_same(&format!("{what} min_dim {dim}"), &v, &gv);
        assert_same(&format!("{what} min_dim {dim} indices"), &i, &gi);
        if dtype != DType::Bool {
            assert_same(
                &format!("{what} argmin {dim}"),
                &x.argmin(Some(dim), false)?,
                &g.argmin(Some(dim), false)?,
            );
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn fast_reductions_match_cpu_on_random_layouts() -> Result<()> {
    let mut rng = Rng(9001);
    let all_dims = [
        None,
        Some(vec![0i64]),
        Some(vec![1]),
        Some(vec![-1]),
        Some(vec![0, 2]),
        Some(vec![1, 2]),
        Some(vec![0, 1]),
    ];
    for case in 0..48u64 {
        let dtype = DTYPES[rng.below(8) as usize];
        // Sizes that are not multiples of any vector width, some large
        // enough that outputs are split over several blocks.
        let big = rng.below(4) == 0;
        let shape = [
            1 + rng.below(if big { 3 } else { 7 }) as usize,
            1 + rng.below(if big { 2000 } else { 40 }) as usize,
            1 + rng.below(if big { 700 } else { 300 }) as usize,
        ];
        let x = data(&shape, dtype, 7000 + case)?;
        // Layouts: contiguous, permuted (outer-dim reductions become inner and
        // the other way round), narrowed (misaligned starts), step-2 slice.
        let x = match rng.below(4) {
            1 => x.permute(&[2, 0, 1])?,
            2 => x.narrow(
                2,
                (shape[2] > 1) as i64,
                (shape[2] - (shape[2] > 1) as usize) as i64,
            )?,
            3 => x.slice(1, Some(0), None, 2)?,
            _ => x,
        };
        let what = format!(
            "case {case} {dtype} {:?} strides {:?}",
            x.shape(),
            x.strides()
        );
        check_all_reductions(&what, &x, &all_dims)?;
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn fast_reductions_on_large_and_special_inputs() -> Result<()> {
    let dev = gpu();
    // Full reduction split over many blocks: exact integer sums, f32 sums
    // within the tolerance of another order, first index on ties.
    for &(n, off) in &[(1usize << 22, 0usize), ((1 << 22) + 5, 3), (1_000_003, 1)] {
        for dtype in [DType::F32, DType::I32, DType::F16, DType::U8, DType::F64] {
            let base = data(&[n + off], dtype, n as u64)?;
            let x = base.narrow(0, off as i64, n as i64)?;
            check_all_reductions(&format!("full {n}+{off} {dtype}"), &x, &[None])?;
        }
    }
    // Outer-dim (column) reductions with few, many and odd column counts,
    // and inner-dim (row) reductions with long rows.
    for &(r, c) in &[
        (70_001usize, 3usize),
        (20_000, 64),
        (4097, 1031),
        (3, 200_003),
        (1000, 4096),
    ] {
        for dtype in [DType::F32, DType::BF16, DType::I64] {
            let x = data(&[r, c], dtype, (r * c) as u64)?;
            let dims = [Some(vec![0i64]), Some(vec![1])];
            check_all_reductions(&format!("[{r}, {c}] {dtype}"), &x, &dims)?;
            // The same through a misaligned narrow of the columns.
            if c > 2 {
                let xn = x.narrow(1, 1, c as i64 - 2)?;
                check_all_reductions(&format!("[{r}, {c}] narrowed {dtype}"), &xn, &dims)?;
            }
        }
    }
    // NaN and ties deep inside vectorised, split reductions: the first NaN
    // (or the first extreme) wins whichever block saw it.
    let n = (1usize << 21) + 7;
    let mut v = vec![0.0f32; n];
    v[n / 3] = 9.0;
    v[n / 2] = 9.0;
    v[n - 2] = 9.0;
    let x = Tensor::from_slice(&v, &[n], Device::Cpu)?;
    let g = x.to(dev)?;
    assert_eq!(g.argmax(None, false)?.item::<i64>()?, (n / 3) as i64);
    v[n / 2 + 1] = f32::NAN;
    v[n - 1] = f32::NAN;
    let x = Tensor::from_slice(&v, &[n], Device::Cpu)?;
    let g = x.to(dev)?;
    assert!(g.max()?.item::<f32>()?.is_nan());
    assert_eq!(g.argmax(None, false)?.item::<i64>()?, (n / 2 + 1) as i64);
    assert_eq!(g.argmin(None, false)?.item::<i64>()?, (n / 2 + 1) as i64);
    let cols = x.narrow(0, 0, 2048 * 1024)?.reshape(&[2048, 1024])?;
    check_all_reductions("nan columns", &cols, &[Some(vec![0]), Some(vec![1])])?;
    // logsumexp's infinities and an empty reduction.
    let x = Tensor::from_slice(
        &[
            f32::NEG_INFINITY,
            f32::NEG_INFINITY,
            1.0,
            f32::INFINITY,
            0.0,
            f32::NAN,
        ],
        &[3, 2],
        Device::Cpu,
    )?;
    assert_sum(
        "logsumexp specials",
        &x.logsumexp(&[1], false)?,
        &x.to(dev)?.logsumexp(&[1], false)?,
    );
    let e = Tensor::zeros(&[0, 4], DType::F32, Device::Cpu)?;
    assert_sum(
        "logsumexp empty",
        &e.logsumexp(&[0], false)?,
        &e.to(dev)?.logsumexp(&[0], false)?,
    );
    assert_sum(
        "var empty",
        &e.var(Some(&[0]), 1.0, false)?,
        &e.to(dev)?.var(Some(&[0]), 1.0, false)?,
    );
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn strided_copies_match_cpu() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(31337);
    for case in 0..24u64 {
        let dtype = DTYPES[rng.below(8) as usize];
        let (r, c) = (1 + rng.below(700) as usize, 1 + rng.below(700) as usize);
        let (v, base) = view(r, c, 1 + rng.below(3), dtype, 100 + case)?;
        let gv = twin(&v, &base, dev)?;
        let what = format!("case {case} {dtype} [{r}, {c}] strides {:?}", v.strides());
        assert_same(
            &format!("{what} contiguous"),
            &v.contiguous()?,
            &gv.contiguous()?,
        );
        // add_ of a transposed operand into a contiguous tensor.
        let a = data(&[r, c], dtype, 200 + case)?;
        let ga = a.to(dev)?;
        if dtype != DType::Bool {
            a.add_(&v)?;
            ga.add_(&gv)?;
            assert_same(&format!("{what} add_"), &a, &ga);
        }
    }
    // Square and tall transposes at tile-unfriendly sizes.
    for &(r, c) in &[(4099usize, 33usize), (33, 4099), (2048, 2048), (1, 5000)] {
        let base = data(&[c, r], DType::F32, (r + c) as u64)?;
        let v = base.t()?;
        let g = base.to(dev)?.t()?;
        assert_same(
            &format!("[{r}, {c}] contiguous of t"),
            &v.contiguous()?,
            &g.contiguous()?,
        );
    }
    Ok(())
}

/// Copies and binary ops over `[b, t, h, d]` views permuted to `[b, h, t, d]`
/// (attention's head split): rows of `d` elements, shorter than a block,
/// take the packed-rows kernels; every `d` from 1 to past a block's width,
/// aligned and not, each dtype, against the CPU.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn short_row_copies_and_ops_match_cpu() -> Result<()> {
    let dev = gpu();
    let ds = [
        1usize, 2, 3, 4, 5, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 96, 128, 129, 200, 1024, 1030,
    ];
    let mut seed = 7;
    for dtype in [
        DType::F32,
        DType::BF16,
        DType::F16,
        DType::F64,
        DType::I64,
        DType::U8,
    ] {
        for &d in &ds {
            seed += 1;
            let (b, t, h) = (2usize, 5usize, 3usize);
            let base = data(&[b, t, h, d], dtype, seed)?;
            let gbase = base.to(dev)?;
            let cpu = base.permute(&[0, 2, 1, 3])?;
            let g = gbase.permute(&[0, 2, 1, 3])?;
            let what = format!("{dtype:?} d={d}");
            assert_same(
                &format!("contiguous {what}"),
                &cpu.contiguous()?,
                &g.contiguous()?,
            );
            // A narrowed head (misaligned start) and an add with a contiguous operand.
            let other = data(&[b, h, t, d], dtype, seed + 1000)?;
            let gother = other.to(dev)?;
            assert_same(&format!("add {what}"), &cpu.add(&other)?, &g.add(&gother)?);
            if d > 1 {
                let cn = base.narrow(3, 1, (d - 1) as i64)?.permute(&[0, 2, 1, 3])?;
                let gn = gbase.narrow(3, 1, (d - 1) as i64)?.permute(&[0, 2, 1, 3])?;
                assert_same(
                    &format!("narrowed contiguous {what}"),
                    &cn.contiguous()?,
                    &gn.contiguous()?,
                );
            }
            // A row broadcast against the permuted view (a bias over heads).
            let row = data(&[d], dtype, seed + 2000)?;
            let grow = row.to(dev)?;
            assert_same(
                &format!("broadcast add {what}"),
                &cpu.add(&row)?,
                &g.add(&grow)?,
            );
        }
    }
    // Many rows: more than one grid's worth of row groups.
    let base = data(&[8, 1024, 12, 64], DType::BF16, 99)?;
    let g = base.to(dev)?.permute(&[0, 2, 1, 3])?.contiguous()?;
    assert_same(
        "large bf16 head split",
        &base.permute(&[0, 2, 1, 3])?.contiguous()?,
        &g,
    );
    Ok(())
}

/// The fused softmax / log-softmax gradients on the GPU against the CPU:
/// warp rows (held in registers or not), block rows, column layouts, every
/// float dtype, rows with masked (-inf) inputs whose outputs are 0; the
/// in-place softmax gradient equals the out-of-place one bit for bit, and
/// along a dim other than the last (the column kernel) the CPU's.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn softmax_backward_matches_cpu() -> Result<()> {
    let dev = gpu();
    let shapes: [&[usize]; 9] = [
        &[1],
        &[3, 7],
        &[64, 64],
        &[5, 1000],
        &[96, 1024],
        &[4, 1025],
        &[3, 4096],
        &[2, 50257],
        &[4, 33, 5],
    ];
    // Bit for bit, NaN (a fully masked column) matching NaN.
    let bits = |t: &Tensor| -> Result<Vec<Option<u64>>> {
        let v = t.to(Device::Cpu)?.to_dtype(DType::F64)?.to_vec::<f64>()?;
        Ok(v.iter()
            .map(|x| (!x.is_nan()).then(|| x.to_bits()))
            .collect())
    };
    let mut seed = 500;
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
        for shape in shapes {
            for dim in [shape.len() as i64 - 1, 0] {
                seed += 1;
                let x = data(shape, DType::F32, seed)?;
                // Mask about one element in eight to -inf (the causal mask's zeros).
                let masked = data(shape, DType::F32, seed + 1)?.lt(-9.0)?;
                let x = x.masked_fill(&masked, f64::NEG_INFINITY)?.to_dtype(dtype)?;
                let g = data(shape, dtype, seed + 2)?;
                for log in [false, true] {
                    let y = if log {
                        x.log_softmax(dim, None)?
                    } else {
                        x.softmax(dim, None)?
                    };
                    let (gy, gg) = (y.to(dev)?, g.to(dev)?);
                    let (c, d) = if log {
                        (
                            y.log_softmax_backward(&g, dim)?,
                            gy.log_softmax_backward(&gg, dim)?,
                        )
                    } else {
                        (y.softmax_backward(&g, dim)?, gy.softmax_backward(&gg, dim)?)
                    };
                    let what = format!("softmax_backward {shape:?} dim {dim} log {log}");
                    // Sums in another order: tolerance scaled by the row's magnitudes.
                    let scale = c.abs()?.add(&g.abs()?)?.mul(shape[dim as usize] as f64)?;
                    assert_sum_scaled(&what, &c, &d, &scale, c.dtype());
                    // Along a dim with elements after it, softmax's sum is
                    // taken in the CPU's order with the CPU's fused
                    // multiply-adds: the same bits.
                    let inner: usize = shape[dim as usize + 1..].iter().product();
                    if !log && inner > 1 {
                        assert_eq!(bits(&c)?, bits(&d)?, "as the CPU: {what}");
                    }
                    if !log {
                        // Written over the gradient: the same kernel reading
                        // each row in full first, so the same bits.
                        let gi = g.to(dev)?;
                        gy.softmax_backward_inplace(&gi, dim)?;
                        assert_eq!(bits(&gi)?, bits(&d)?, "in place: {what}");
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn masked_select_and_scatter_match_cpu() -> Result<()> {
    let dev = gpu();
    // (input shape, mask shape): plain, broadcast either way, 0-d, sizes
    // around the compaction's 4096-element chunks, many chunks.
    let cases: Vec<(Vec<usize>, Vec<usize>)> = vec![
        (vec![7, 5], vec![7, 5]),
        (vec![7, 5], vec![5]),
        (vec![7, 1], vec![3, 7, 5]),
        (vec![], vec![]),
        (vec![1], vec![1]),
        (vec![4095], vec![4095]),
        (vec![4096], vec![4096]),
        (vec![4097], vec![4097]),
        (vec![3, 4097], vec![1, 4097]),
        (vec![1000, 1001], vec![1000, 1001]),
        (vec![0, 3], vec![3]),
    ];
    for (i, (xs, ms)) in cases.iter().enumerate() {
        for (j, cut) in [-10.0, 0.3, 10.0].into_iter().enumerate() {
            let m = Tensor::randn(ms, DType::F64, 70 + i as u64, Device::Cpu)?.gt(cut)?;
            let gm = m.to(dev)?;
            for dtype in DTYPES {
                let x = data(xs, dtype, 80 + (i * 3 + j) as u64)?;
                let gx = x.to(dev)?;
                let what = format!("{xs:?} mask {ms:?} cut {cut} {dtype}");
                assert_same(
                    &format!("{what} masked_select"),
                    &x.masked_select(&m)?,
                    &gx.masked_select(&gm)?,
                );
                if xs.len() == 2 {
                    assert_same(
                        &format!("{what} masked_select of t"),
                        &x.t()?.contiguous()?.t()?.masked_select(&m)?,
                        &gx.t()?.contiguous()?.t()?.masked_select(&gm)?,
                    );
                }
                let count = x.masked_select(&m)?.numel();
                let src = data(&[count + 2], dtype, 90 + i as u64)?;
                assert_same(
                    &format!("{what} masked_scatter"),
                    &x.masked_scatter(&m, &src)?,
                    &gx.masked_scatter(&gm, &src.to(dev)?)?,
                );
            }
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn softmax_register_paths_match_cpu() -> Result<()> {
    let dev = gpu();
    // Row lengths at every kernel boundary: the warp kernels (1..=1024 in
    // powers of two), the block kernels (..=8192), the two-pass fallback;
    // odd lengths (scalar loads), and many rows (the grid-stride loops).
    let lens = [
        1usize, 2, 3, 7, 8, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 511, 512, 513, 1000, 1023,
        1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193, 50257,
    ];
    for (i, &n) in lens.iter().enumerate() {
        let rows = if n <= 64 {
            70_000
        } else {
            (200_000 / n).clamp(1, 300)
        };
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let x = Tensor::randn(&[rows, n], DType::F64, 300 + i as u64, Device::Cpu)?
                .mul(4.0)?
                .to_dtype(dtype)?;
            let gx = x.to(dev)?;
            let what = format!("[{rows}, {n}] {dtype}");
            assert_sum(
                &format!("{what} softmax"),
                &x.softmax(-1, None)?,
                &gx.softmax(-1, None)?,
            );
            assert_sum(
                &format!("{what} log_softmax"),
                &x.log_softmax(-1, None)?,
                &gx.log_softmax(-1, None)?,
            );
            if dtype != DType::F32 {
                assert_sum(
                    &format!("{what} softmax to f32"),
                    &x.softmax(-1, Some(DType::F32))?,
                    &gx.softmax(-1, Some(DType::F32))?,
                );
            }
            // Rows starting off a 16-byte boundary (a narrowed, copied view).
            if n > 1 {
                let (xn, gn) = (
                    x.narrow(1, 1, n as i64 - 1)?,
                    gx.narrow(1, 1, n as i64 - 1)?,
                );
                assert_sum(
                    &format!("{what} softmax of a narrowed row"),
                    &xn.softmax(-1, None)?,
                    &gn.softmax(-1, None)?,
                );
            }
        }
    }
    // -inf entries (an attention mask), fully masked rows (NaN, as on the
    // CPU), a NaN and a +inf row, at lengths of each kernel.
    for n in [5usize, 32, 1000, 1024, 1025, 4097, 8192, 50257] {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let x = Tensor::randn(&[6, n], DType::F64, 500 + n as u64, Device::Cpu)?;
            let tri = Tensor::ones(&[6, n], DType::Bool, Device::Cpu)?.triu(1)?;
            let mut masked = x.masked_fill(&tri, f64::NEG_INFINITY)?;
            let full = Tensor::ones(&[n], DType::Bool, Device::Cpu)?;
            let last = masked
                .narrow(0, 5, 1)?
                .masked_fill(&full, f64::NEG_INFINITY)?;
            masked = Tensor::cat(&[&masked.narrow(0, 0, 5)?, &last], 0)?;
            masked
                .narrow(0, 3, 1)?
                .narrow(1, n as i64 / 2, 1)?
                .fill_(f64::NAN)?;
            masked
                .narrow(0, 4, 1)?
                .narrow(1, n as i64 - 1, 1)?
                .fill_(f64::INFINITY)?;
            let xd = masked.to_dtype(dtype)?;
            let gd = xd.to(dev)?;
            let what = format!("masked [6, {n}] {dtype}");
            assert_sum(
                &format!("{what} softmax"),
                &xd.softmax(1, None)?,
                &gd.softmax(1, None)?,
            );
            assert_sum(
                &format!("{what} log_softmax"),
                &xd.log_softmax(1, None)?,
                &gd.log_softmax(1, None)?,
            );
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn embedding_row_copies_match_cpu() -> Result<()> {
    let dev = gpu();
    // Row widths whose bytes are and are not multiples of 16, one unit, and
    // more units than a block has threads; every dtype; both index dtypes;
    // a weight whose rows are padded (a column-narrowed view).
    for (i, &d) in [
        1usize, 2, 3, 4, 5, 8, 16, 17, 64, 767, 768, 769, 1024, 2050, 4097,
    ]
    .iter()
    .enumerate()
    {
        for dtype in DTYPES {
            let v = 37;
            let w = data(&[v, d], dtype, 600 + i as u64)?;
            let gw = w.to(dev)?;
            let idx = Tensor::randint(
                0,
                v as i64,
                &[7, 13],
                Some(DType::I64),
                700 + i as u64,
                Device::Cpu,
            )?;
            for it in [DType::I64, DType::I32] {
                let ix = idx.to_dtype(it)?;
                let gix = ix.to(dev)?;
                let what = format!("[{v}, {d}] {dtype} indices {it}");
                assert_same(
                    &format!("{what} embedding"),
                    &Tensor::embedding(&ix, &w, None)?,
                    &Tensor::embedding(&gix, &gw, None)?,
                );
                assert_same(
                    &format!("{what} index_select"),
                    &w.index_select(0, &ix.reshape(&[-1])?)?,
                    &gw.index_select(0, &gix.reshape(&[-1])?)?,
                );
            }
            // Padded rows: a view of the first d columns of [v, d + pad].
            for pad in [1usize, 8] {
                let wide = data(&[v, d + pad], dtype, 800 + i as u64)?;
                let (wv, gv) = (
                    wide.narrow(1, 0, d as i64)?,
                    wide.to(dev)?.narrow(1, 0, d as i64)?,
                );
                assert_same(
                    &format!("[{v}, {d}] pad {pad} {dtype} embedding"),
                    &Tensor::embedding(&idx, &wv, None)?,
                    &Tensor::embedding(&idx.to(dev)?, &gv, None)?,
                );
            }
        }
    }
    // An out-of-range index is still a typed error on the GPU.
    let w = Tensor::zeros(&[4, 8], DType::F32, dev)?;
    let bad = Tensor::from_slice(&[0i64, 4], &[2], dev)?;
    assert!(matches!(
        Tensor::embedding(&bad, &w, None),
        Err(TensorError::Index { .. })
    ));
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn batched_transposes_match_cpu() -> Result<()> {
    let dev = gpu();
    // Batched last-two-dims swaps (the tiled kernel's `outer` > 1, more
    // batches than a grid dimension's 65535), tile-unfriendly sizes, sizes
    // of 1, every dtype; contiguous() and an add_ of the swapped operand.
    let shapes: [&[usize]; 8] = [
        &[3, 33, 31],
        &[2, 1025, 3],
        &[5, 1, 40],
        &[70_000, 2, 3],
        &[2, 3, 17, 65],
        &[1, 4097, 33],
        &[4, 64, 64],
        &[2, 2, 2, 129, 7],
    ];
    for (i, shape) in shapes.iter().enumerate() {
        for dtype in DTYPES {
            let base = data(shape, dtype, 1000 + i as u64)?;
            let gbase = base.to(dev)?;
            let n = shape.len() as i64;
            let (v, gv) = (
                base.transpose(n - 2, n - 1)?,
                gbase.transpose(n - 2, n - 1)?,
            );
            let what = format!("{shape:?} {dtype}");
            assert_same(
                &format!("{what} contiguous of a swap"),
                &v.contiguous()?,
                &gv.contiguous()?,
            );
            if dtype != DType::Bool {
                let a = data(v.shape(), dtype, 2000 + i as u64)?;
                let ga = a.to(dev)?;
                a.add_(&v)?;
                ga.add_(&gv)?;
                assert_same(&format!("{what} add_ of a swap"), &a, &ga);
            }
            // A rotation of the dims (not a swap of the last two).
            let mut order: Vec<i64> = (0..n).collect();
            order.rotate_left(1);
            assert_same(
                &format!("{what} contiguous of a rotation"),
                &base.permute(&order)?.contiguous()?,
                &gbase.permute(&order)?.contiguous()?,
            );
        }
    }
    Ok(())
}

/// The fused GELU gradients (exact and tanh) on the GPU against the CPU, on
/// contiguous, transposed and broadcast operands, every float dtype.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gelu_backward_matches_cpu() -> Result<()> {
    use strata_tensor::GeluApprox;
    let dev = gpu();
    let mut seed = 900;
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
        for (r, c) in [(1usize, 1usize), (7, 33), (64, 3072), (129, 1000)] {
            for kind in 0..6 {
                seed += 1;
                let (xv, xb) = view(r, c, kind, dtype, seed)?;
                let g = data(&[r, c], dtype, seed + 1)?;
                let gx = twin(&xv, &xb, dev)?;
                let gg = g.to(dev)?;
                for approx in [GeluApprox::None, GeluApprox::Tanh] {
                    let x = xv.div(8.0)?;
                    let cpu = g.gelu_backward(&x, approx)?;
                    let gpu_r = gg.gelu_backward(&gx.div(8.0)?, approx)?;
                    check_same(
                        &format!("gelu_backward {approx:?} {dtype:?} [{r}, {c}] kind {kind}"),
                        &cpu,
                        &gpu_r,
                        true,
                    );
                }
            }
        }
    }
    Ok(())
}

/// The list step on the GPU (one kernel over up to 64 tensors a launch)
/// equals the GPU's `adam_step_` item by item, bit for bit: every float
/// dtype, 150 items (three launches) of ragged lengths, empty ones, items
/// misaligned by one element (no 16-byte path), gradients as views into one
/// bucket and moments into flat buffers as the optimizers make them, an f32
/// item split over several list entries, and a list naming one parameter
/// twice (updated in order).
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn adam_step_list_matches_each_items_step() -> Result<()> {
    let dev = gpu();
    let h = list_hyper();
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
        // 16.7M elements per list entry: one f32 item over several entries.
        let it = ListItems::new(dtype, dev, 40_000_000)?;
        let (ps, gs, ms, vs) = (&it.ps, &it.gs, &it.ms, &it.vs);
        let (ps2, ms2, vs2) = (deep_clones(ps), deep_clones(ms), deep_clones(vs));
        Tensor::adam_step_list_(ps, gs, ms, vs, h)?;
        for k in 0..it.lens.len() {
            ps2[k].adam_step_(&gs[k], &ms2[k], &vs2[k], h)?;
        }
        for k in 0..it.lens.len() {
            let what = format!("{dtype:?} item {k} of length {}", it.lens[k]);
            assert!(host_vec(&ps[k]) == host_vec(&ps2[k]), "{what}: parameter");
            assert!(host_vec(&ms[k]) == host_vec(&ms2[k]), "{what}: exp_avg");
            assert!(host_vec(&vs[k]) == host_vec(&vs2[k]), "{what}: exp_avg_sq");
        }
        // One parameter twice (with moments of its own each time): two
        // updates in order.
        let twice = [ps[5].clone(), ps[5].clone()];
        let reference = ps[5].deep_clone()?;
        let (m2, v2) = (
            [ms[5].deep_clone()?, ms[5].add(0.25)?],
            [vs[5].deep_clone()?, vs[5].mul(2.0)?],
        );
        let (mr, vr) = (deep_clones(&m2), deep_clones(&v2));
        let g2 = [gs[5].clone(), gs[5].clone()];
        Tensor::adam_step_list_(&twice, &g2, &m2, &v2, h)?;
        reference.adam_step_(&g2[0], &mr[0], &vr[0], h)?;
        reference.adam_step_(&g2[1], &mr[1], &vr[1], h)?;
        assert!(
            host_vec(&ps[5]) == host_vec(&reference),
            "{dtype:?}: a parameter listed twice"
        );
    }
    Ok(())
}

/// The hyper-parameters of the list-step tests.
fn list_hyper() -> strata_tensor::AdamHyper {
    strata_tensor::AdamHyper {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.1,
        step: 3,
    }
}

/// A tensor's elements on the host, in f64.
fn host_vec(t: &Tensor) -> Vec<f64> {
    t.to(Device::Cpu)
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

fn deep_clones(ts: &[Tensor]) -> Vec<Tensor> {
    ts.iter().map(|t| t.deep_clone().unwrap()).collect()
}

/// The list-step tests' items on the GPU: 150 of ragged lengths (item 75 of
/// `big` elements in f32), empty ones, every third one element into its
/// buffers (no 16-byte path); parameters of their own, gradients as views
/// into one bucket and the moments (and AMSGrad's maxima) into flat buffers,
/// as the optimizers make them.
struct ListItems {
    lens: Vec<usize>,
    ps: Vec<Tensor>,
    gs: Vec<Tensor>,
    ms: Vec<Tensor>,
    vs: Vec<Tensor>,
    xs: Vec<Tensor>,
}

impl ListItems {
    fn new(dtype: DType, dev: Device, big: usize) -> Result<ListItems> {
        let mut lens: Vec<usize> = (0..150)
            .map(|k| [0usize, 1, 7, 8, 768, 2304, 4099, 65_539][k % 8] + k)
            .collect();
        if dtype == DType::F32 {
            lens[75] = big;
        }
        let total: usize = lens.iter().map(|n| n + 1).sum();
        let flat = |seed: u64, nonneg: bool| -> Result<Tensor> {
            let t = Tensor::rand(&[total], dtype, seed, dev)?;
            if nonneg {
                Ok(t)
            } else {
                t.sub(0.5)
            }
        };
        let (bucket, m, v) = (flat(1, false)?, flat(2, false)?, flat(3, true)?);
        let x = flat(4, true)?.mul(0.5)?;
        let mut it = ListItems {
            lens: lens.clone(),
            ps: vec![],
            gs: vec![],
            ms: vec![],
            vs: vec![],
            xs: vec![],
        };
        let mut off = 0i64;
        for (k, &n) in lens.iter().enumerate() {
            let skew = i64::from(k % 3 == 0);
            let base = Tensor::rand(&[n + 1], dtype, 100 + k as u64, dev)?;
            it.ps.push(base.narrow(0, skew, n as i64)?);
            let at = off + skew;
            it.gs.push(bucket.narrow(0, at, n as i64)?);
            it.ms.push(m.narrow(0, at, n as i64)?);
            it.vs.push(v.narrow(0, at, n as i64)?);
            it.xs.push(x.narrow(0, at, n as i64)?);
            off += n as i64 + 1;
        }
        Ok(it)
    }
}

/// The fused Adam / AdamW step on the GPU against the CPU: every float
/// dtype, lengths with ragged vector tails, misaligned bases (a narrow by one
/// element disables the 16-byte path), with and without weight decay, three
/// steps in a row.
/// `adam_step_` with the infinite hyper-parameters PyTorch accepts (lr,
/// eps, weight decay of +inf): the GPU writes what the CPU writes, NaN and
/// the infinities in the same places (their order of operations is the
/// same: `p * decay`, then `p - step_size * (m / denom)`).
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn adam_step_with_infinite_hyperparameters_matches_cpu() -> Result<()> {
    use strata_tensor::AdamHyper;
    let dev = gpu();
    let inf = f64::INFINITY;
    let base = AdamHyper {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        step: 1,
    };
    let cases = [
        AdamHyper { lr: inf, ..base },
        AdamHyper {
            lr: inf,
            weight_decay: 0.01,
            ..base
        },
        AdamHyper { eps: inf, ..base },
        AdamHyper {
            weight_decay: inf,
            ..base
        },
        AdamHyper {
            lr: 0.0,
            weight_decay: inf,
            ..base
        },
    ];
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for (k, h) in cases.iter().enumerate() {
            // Zeros among the weights and gradients (inf * 0 is NaN).
            let p = Tensor::from_slice(
                &[1.0f64, -2.0, 0.0, -0.0, 4.0, 0.5, 3.0, -1.0, 2.0],
                &[9],
                Device::Cpu,
            )?
            .to_dtype(dtype)?;
            let g = Tensor::from_slice(
                &[0.5f64, -0.25, 0.0, -0.0, 0.0, 1.0, -3.0, 2.0, -0.5],
                &[9],
                Device::Cpu,
            )?
            .to_dtype(dtype)?;
            let (m, v) = (p.zeros_like(None)?, p.zeros_like(None)?);
            let (gp, gm, gv) = (p.to(dev)?, m.to(dev)?, v.to(dev)?);
            p.adam_step_(&g, &m, &v, *h)?;
            gp.adam_step_(&g.to(dev)?, &gm, &gv, *h)?;
            // NaN where NaN (`bits` gives every NaN one pattern: the
            // devices' payloads differ), every other value bit for bit (the
            // sign of zero included).
            for (what, c, gt) in [("p", &p, &gp), ("m", &m, &gm), ("v", &v, &gv)] {
                assert_eq!(bits(c), bits(gt), "{dtype} case {k}: {what}");
            }
        }
    }
    Ok(())
}

/// An Adam operand of the GPU tests: `n` values of `data` (nonnegative
/// when `nonneg`, as a second moment) divided by 8, `skew` elements into
/// their CPU storage.
fn adam_operand(dtype: DType, n: usize, skew: i64, seed: u64, nonneg: bool) -> Result<Tensor> {
    let t = data(&[n + skew as usize], dtype, seed)?.div(8.0)?;
    let t = if nonneg { t.abs()? } else { t };
    t.narrow(0, skew, n as i64)
}

/// `t` (a view `skew` elements into its storage) copied into a GPU storage
/// of the same length, as a view the same `skew` elements in (a misaligned
/// base when `skew` is odd).
fn skewed_twin(t: &Tensor, skew: i64, dev: Device) -> Result<Tensor> {
    let n = t.numel();
    let base = Tensor::zeros(&[n + skew as usize], t.dtype(), dev)?;
    let view = base.narrow(0, skew, n as i64)?;
    view.copy_(&t.to(dev)?)?;
    Ok(view)
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn adam_step_matches_cpu() -> Result<()> {
    use strata_tensor::AdamHyper;
    let dev = gpu();
    let mut seed = 1300;
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
        for n in [1usize, 7, 8, 4099, 1 << 20] {
            for skew in [0i64, 1] {
                for wd in [0.0, 0.1] {
                    seed += 4;
                    let make = |s: u64, nonneg: bool| adam_operand(dtype, n, skew, s, nonneg);
                    let (p, m, v) = (
                        make(seed, false)?,
                        make(seed + 1, false)?,
                        make(seed + 2, true)?,
                    );
                    let (gp, gm, gv) = (p.to(dev)?, m.to(dev)?, v.to(dev)?);
                    // The GPU twins keep the skew.
                    let skewed = |t: &Tensor| skewed_twin(t, skew, dev);
                    let (gp, gm, gv) = if skew == 0 {
                        (gp, gm, gv)
                    } else {
                        (skewed(&p)?, skewed(&m)?, skewed(&v)?)
                    };
                    for step in 1..=3 {
                        let g = make(seed + 3 + step as u64 * 97, false)?;
                        let h = AdamHyper {
                            lr: 1e-2,
                            beta1: 0.9,
                            beta2: 0.999,
                            eps: 1e-8,
                            weight_decay: wd,
                            step,
                        };
                        p.adam_step_(&g, &m, &v, h)?;
                        gp.adam_step_(&g.to(dev)?, &gm, &gv, h)?;
                    }
                    let what = format!("adam_step {dtype:?} n={n} skew={skew} wd={wd}");
                    check_same(
                        &format!("{what} p"),
                        &p.contiguous()?,
                        &gp.contiguous()?,
                        true,
                    );
                    check_same(
                        &format!("{what} m"),
                        &m.contiguous()?,
                        &gm.contiguous()?,
                        true,
                    );
                    check_same(
                        &format!("{what} v"),
                        &v.contiguous()?,
                        &gv.contiguous()?,
                        true,
                    );
                }
            }
        }
    }
    Ok(())
}

/// `adam_step_` on transposed (non-contiguous) GPU operands updates them
/// bit for bit as the fused kernel updates contiguous ones, in every float
/// dtype (the strided path copies to contiguous tensors, runs the same
/// kernel, and copies back), and matches the CPU's strided update.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn adam_step_on_strided_gpu_operands_matches_the_contiguous_update() -> Result<()> {
    use strata_tensor::AdamHyper;
    let dev = gpu();
    for (k, dtype) in [DType::F32, DType::BF16, DType::F16]
        .into_iter()
        .enumerate()
    {
        let s = 1700 + 10 * k as u64;
        // Stored as [67, 33] and seen transposed as [33, 67].
        let p = data(&[67, 33], dtype, s)?.div(8.0)?;
        let m = data(&[67, 33], dtype, s + 1)?.div(8.0)?;
        let v = data(&[67, 33], dtype, s + 2)?.div(8.0)?.abs()?;
        let (gp, gm, gv) = (p.to(dev)?, m.to(dev)?, v.to(dev)?);
        let (pt, mt, vt) = (gp.t()?, gm.t()?, gv.t()?);
        assert!(!pt.is_contiguous(), "the operands must be strided");
        let (cp, cm, cv) = (pt.contiguous()?, mt.contiguous()?, vt.contiguous()?);
        let (hp, hm, hv) = (p.t()?, m.t()?, v.t()?);
        for step in 1..=3 {
            let g = data(&[33, 67], dtype, s + 3 + step as u64)?.div(8.0)?;
            let h = AdamHyper {
                lr: 1e-2,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.1,
                step,
            };
            pt.adam_step_(&g.to(dev)?, &mt, &vt, h)?;
            cp.adam_step_(&g.to(dev)?, &cm, &cv, h)?;
            hp.adam_step_(&g, &hm, &hv, h)?;
        }
        for (what, strided, contiguous, host) in [
            ("p", &pt, &cp, &hp),
            ("m", &mt, &cm, &hm),
            ("v", &vt, &cv, &hv),
        ] {
            let a = strided.contiguous()?.to(Device::Cpu)?;
            let b = contiguous.to(Device::Cpu)?;
            assert_eq!(
                a.to_dtype(DType::F64)?.to_vec::<f64>()?,
                b.to_dtype(DType::F64)?.to_vec::<f64>()?,
                "{dtype:?} {what}: strided GPU update differs from the contiguous one"
            );
            check_same(
                &format!("adam strided {dtype:?} {what}"),
                &host.contiguous()?,
                &strided.contiguous()?,
                true,
            );
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cross_entropy_register_paths_match_cpu() -> Result<()> {
    use strata_tensor::{CrossEntropyArgs, Reduction};
    let dev = gpu();
    // Class counts at every boundary of the register kernels (warp rows up
    // to 1024, block rows up to 8192, the online fallback beyond), odd
    // counts (scalar loads), and row counts that leave partial blocks.
    let classes = [
        1usize, 2, 7, 8, 31, 32, 33, 100, 767, 768, 769, 1024, 1025, 4095, 4096, 8191, 8192, 8193,
    ];
    for (i, &c) in classes.iter().enumerate() {
        let rows = if c <= 64 { 1003 } else { 37 };
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let x = Tensor::randn(&[rows, c], DType::F64, 900 + i as u64, Device::Cpu)?
                .mul(3.0)?
                .to_dtype(dtype)?;
            let t = Tensor::randint(0, c as i64, &[rows], None, 950 + i as u64, Device::Cpu)?;
            // Every fifth row ignored.
            let every5: Vec<bool> = (0..rows).map(|r| r % 5 == 0).collect();
            let ign = Tensor::from_slice(&every5, &[rows], Device::Cpu)?;
            let t = t.masked_fill(&ign, -100)?;
            let w = Tensor::rand(&[c], DType::F64, 990 + i as u64, Device::Cpu)?
                .add(0.5)?
                .to_dtype(dtype)?;
            let (gx, gt, gw) = (x.to(dev)?, t.to(dev)?, w.to(dev)?);
            for reduction in [Reduction::None, Reduction::Mean, Reduction::Sum] {
                for smoothing in [0.0, 0.1] {
                    for weighted in [false, true] {
                        let (a, ga) = ce_args(&w, &gw, reduction, smoothing, weighted);
                        let what = format!(
                            "[{rows}, {c}] {dtype} {reduction:?} eps {smoothing} weight {weighted}"
                        );
                        let (l, s) = x.cross_entropy_forward(&t, a)?;
                        let (gl, gs) = gx.cross_entropy_forward(&gt, ga)?;
                        assert_sum(&format!("{what} loss"), &l, &gl);
                        let (s, gs) = (s.expect("saved"), gs.expect("saved"));
                        assert_sum(&format!("{what} lse"), &s.lse, &gs.lse);
                        assert_sum(
                            &format!("{what} total weight"),
                            &s.total_weight,
                            &gs.total_weight,
                        );
                    }
                }
            }
            // Rows that start off a 16-byte boundary: a contiguous view
            // beginning at row 1 (scalar loads when c * size is not a
            // multiple of 16).
            if rows > 1 {
                let (xv, gv) = (
                    x.narrow(0, 1, rows as i64 - 1)?,
                    gx.narrow(0, 1, rows as i64 - 1)?,
                );
                let (tv, gtv) = (
                    t.narrow(0, 1, rows as i64 - 1)?,
                    gt.narrow(0, 1, rows as i64 - 1)?,
                );
                let a = CrossEntropyArgs::default();
                assert_sum(
                    &format!("[{rows}, {c}] {dtype} offset rows"),
                    &xv.cross_entropy(&tv, a)?,
                    &gv.cross_entropy(&gtv, a)?,
                );
            }
        }
    }
    // Non-finite logits: a NaN row and a +inf row give NaN, an all -inf
    // row gives inf (or NaN through the target), as on the CPU.
    for c in [5usize, 768, 8192] {
        for dtype in [DType::F32, DType::BF16] {
            let x = Tensor::randn(&[4, c], DType::F64, 77, Device::Cpu)?;
            x.narrow(0, 1, 1)?.narrow(1, 2, 1)?.fill_(f64::NAN)?;
            x.narrow(0, 2, 1)?.narrow(1, 3, 1)?.fill_(f64::INFINITY)?;
            x.narrow(0, 3, 1)?.fill_(f64::NEG_INFINITY)?;
            let x = x.to_dtype(dtype)?;
            let t = Tensor::from_slice(&[0i64, 1, 1, 4], &[4], Device::Cpu)?;
            let a = CrossEntropyArgs {
                reduction: Reduction::None,
                ..CrossEntropyArgs::default()
            };
            assert_sum(
                &format!("non-finite [4, {c}] {dtype}"),
                &x.cross_entropy(&t, a)?,
                &x.to(dev)?.cross_entropy(&t.to(dev)?, a)?,
            );
        }
    }
    // An out-of-range target is still a typed error on the GPU, whether the
    // targets' range is cached (randint) or must be read (written by a kernel).
    let x = Tensor::zeros(&[3, 4], DType::F32, dev)?;
    let t = Tensor::randint(0, 4, &[3], None, 1, dev)?;
    assert!(x.cross_entropy(&t, CrossEntropyArgs::default()).is_ok());
    t.narrow(0, 1, 1)?.fill_(4)?;
    assert!(matches!(
        x.cross_entropy(&t, CrossEntropyArgs::default()),
        Err(TensorError::Index { .. })
    ));
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn layer_norm_register_paths_match_cpu() -> Result<()> {
    let dev = gpu();
    let cols = [
        1usize, 2, 7, 8, 31, 32, 33, 100, 767, 768, 769, 1024, 1025, 3000, 4096, 8191, 8192, 8193,
    ];
    for (i, &c) in cols.iter().enumerate() {
        let rows = if c <= 64 { 2001 } else { 43 };
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let x = Tensor::randn(&[rows, c], DType::F64, 1100 + i as u64, Device::Cpu)?
                .mul(2.0)?
                .add(1.5)?
                .to_dtype(dtype)?;
            let gx = x.to(dev)?;
            let pdts: &[DType] = if matches!(dtype, DType::F16 | DType::BF16) {
                &[dtype, DType::F32]
            } else {
                &[dtype]
            };
            for &pd in pdts {
                let w =
                    Tensor::randn(&[c], DType::F64, 1200 + i as u64, Device::Cpu)?.to_dtype(pd)?;
                let b =
                    Tensor::randn(&[c], DType::F64, 1300 + i as u64, Device::Cpu)?.to_dtype(pd)?;
                let (gw, gb) = (w.to(dev)?, b.to(dev)?);
                for (wo, bo, gwo, gbo, tag) in [
                    (Some(&w), Some(&b), Some(&gw), Some(&gb), "w+b"),
                    (Some(&w), None, Some(&gw), None, "w"),
                    (None, Some(&b), None, Some(&gb), "b"),
                    (None, None, None, None, "plain"),
                ] {
                    let what = format!("[{rows}, {c}] {dtype} params {pd} {tag}");
                    let (y, m, r) = x.layer_norm_forward(&[c], wo, bo, 1e-5)?;
                    let (gy, gm, gr) = gx.layer_norm_forward(&[c], gwo, gbo, 1e-5)?;
                    assert_sum(&format!("{what} out"), &y, &gy);
                    assert_sum(&format!("{what} mean"), &m, &gm);
                    assert_sum(&format!("{what} rstd"), &r, &gr);
                }
            }
            // Misaligned rows: a contiguous view starting at row 1.
            if rows > 1 {
                let (xv, gv) = (
                    x.narrow(0, 1, rows as i64 - 1)?,
                    gx.narrow(0, 1, rows as i64 - 1)?,
                );
                assert_sum(
                    &format!("[{rows}, {c}] {dtype} offset rows"),
                    &xv.layer_norm(&[c], None, None, 1e-5)?,
                    &gv.layer_norm(&[c], None, None, 1e-5)?,
                );
            }
        }
    }
    // Constant rows (variance 0) and a NaN row.
    for c in [5usize, 768, 4096] {
        let x = Tensor::full(&[3, c], 2.5, DType::F32, Device::Cpu)?;
        x.narrow(0, 2, 1)?.narrow(1, 1, 1)?.fill_(f64::NAN)?;
        assert_sum(
            &format!("constant and NaN rows [3, {c}]"),
            &x.layer_norm(&[c], None, None, 1e-5)?,
            &x.to(dev)?.layer_norm(&[c], None, None, 1e-5)?,
        );
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn layer_norm_zeros_have_the_cpus_signs() -> Result<()> {
    // eps = inf: rstd is 0 and each output is (x - mean) * 0 * w + b, a
    // signed zero (or b). Both devices end with `* gamma + beta`, beta 0
    // when absent (PyTorch's CPU kernel and its general CUDA kernel), so
    // every zero has the same sign: +0.0 unless the bias is -0.0 and the
    // product -0.0. The rows are integers in +/- pairs (and zeros, -0.0
    // among them), whose exact mean is 0; the first row is all -0.0. The
    // computed mean is the reduction's: the CPU's follows PyTorch's CPU
    // Welford update bit for bit, which on a row of +/- pairs can end at
    // -0.0 or a few ulps off 0 (PyTorch 2.15's CPU `native_layer_norm`
    // returns 7.45e-8 for the f32 row [1, -1, -9, 9, -8, 8, 1, -1], and a
    // non-zero mean on 102 of 200 such random f32 rows of 8), where the
    // GPU's sums can differ; the sign of `-mean * rstd` then differs and so
    // may the zeros. Rows whose means have the same bits must agree bit for
    // bit, and every mean is within a few ulps of 0.
    let dev = gpu();
    let mut rng = Rng(0x5160);
    // The warp and block register kernels and the shared-memory one.
    for cols in [3usize, 8, 100, 1024, 2048, 8192, 10000] {
        let rows = 5;
        let mut v = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            let mut row = vec![0.0f64; cols];
            if r == 0 {
                // A row of -0.0: mean +0.0 on both (sums from +0.0).
                v.extend(vec![-0.0f64; cols]);
                continue;
            }
            for j in (0..cols - 1).step_by(2) {
                let a = rng.below(21) as f64 - 10.0;
                row[j] = a;
                row[j + 1] = -a;
            }
            if cols % 2 == 1 {
                row[cols - 1] = -0.0;
            }
            v.extend(row);
        }
        let x64 = Tensor::from_slice(&v, &[rows, cols], Device::Cpu)?;
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let x = x64.to_dtype(dtype)?;
            let gx = x.to(dev)?;
            let w = Tensor::randn(&[cols], DType::F64, 7, Device::Cpu)?.to_dtype(dtype)?;
            let nb = Tensor::full(&[cols], -0.0, dtype, Device::Cpu)?;
            let (gw, gnb) = (w.to(dev)?, nb.to(dev)?);
            for (wo, bo, gwo, gbo, tag) in [
                (None, None, None, None, "plain"),
                (Some(&w), None, Some(&gw), None, "w"),
                (None, Some(&nb), None, Some(&gnb), "b = -0.0"),
                (Some(&w), Some(&nb), Some(&gw), Some(&gnb), "w, b = -0.0"),
            ] {
                let what = format!("[{rows}, {cols}] {dtype} {tag}");
                let (y, m, r) = x.layer_norm_forward(&[cols], wo, bo, f64::INFINITY)?;
                let (gy, gm, gr) = gx.layer_norm_forward(&[cols], gwo, gbo, f64::INFINITY)?;
                assert_eq!(bits(&r), bits(&gr), "{what}: rstd");
                assert!(bits(&r).iter().all(|&b| b == 0), "{what}: rstd");
                // Every mean is 0 up to rounding: a mean accumulated in f32
                // (or f64) of `cols` values of at most 10 is off by less
                // than cols * 10 * f32::EPSILON.
                for mean in [&m, &gm] {
                    let mean = mean.to(Device::Cpu)?.to_dtype(DType::F64)?;
                    let mean = mean.to_vec::<f64>()?;
                    assert!(
                        mean.iter()
                            .all(|v| v.abs() < cols as f64 * 10.0 * f32::EPSILON as f64),
                        "{what}: mean {mean:?}"
                    );
                }
                let (c, g) = (bits(&y), bits(&gy));
                let (cm, gm) = (bits(&m), bits(&gm));
                let mut same = 0;
                for row in 0..rows {
                    if cm[row] == gm[row] {
                        let span = row * cols..(row + 1) * cols;
                        assert_eq!(c[span.clone()], g[span], "{what}: out, row {row}");
                        same += 1;
                    }
                }
                // Row 0 (all -0.0) has a mean of +0.0 on both.
                assert!(
                    same >= 1 && cm[0] == 0 && gm[0] == 0,
                    "{what}: mean of row 0"
                );
                if bo.is_none() {
                    assert!(c.iter().all(|&b| b == 0), "{what}: +0.0 everywhere");
                }
            }
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn index_checks_with_cached_ranges_on_gpu() -> Result<()> {
    let dev = gpu();
    let w = data(&[50, 24], DType::F32, 1400)?;
    let gw = w.to(dev)?;
    // Indices whose range is known (randint on the device, host data copied
    // in, arange) and one whose range is read back (computed by a kernel).
    let sources: Vec<(&str, Tensor)> = vec![
        ("randint", Tensor::randint(0, 50, &[9, 11], None, 3, dev)?),
        (
            "from host",
            Tensor::randint(0, 50, &[9, 11], None, 4, Device::Cpu)?.to(dev)?,
        ),
        (
            "arange",
            Tensor::arange(49, -1, -1, None, dev)?.reshape(&[50])?,
        ),
        (
            "computed",
            Tensor::randint(0, 25, &[9, 11], None, 5, dev)?.mul(2)?,
        ),
    ];
    for (what, gi) in &sources {
        let ci = gi.to(Device::Cpu)?;
        assert_same(
            &format!("{what} embedding"),
            &Tensor::embedding(&ci, &w, None)?,
            &Tensor::embedding(gi, &gw, None)?,
        );
        // A write through any view makes the next check read the values.
        let flat = gi.reshape(&[-1])?;
        flat.narrow(0, 0, 1)?.fill_(50)?;
        assert!(
            matches!(
                Tensor::embedding(gi, &gw, None),
                Err(TensorError::Index { .. })
            ),
            "{what}: an index written out of range must be caught"
        );
        flat.narrow(0, 0, 1)?.fill_(-1)?;
        assert!(matches!(
            gw.index_select(0, &flat),
            Err(TensorError::Index { .. })
        ));
    }
    Ok(())
}

/// Attention's fused softmax (`scaled_softmax`: scale and causal mask in the
/// softmax pass) on the GPU against the CPU, every float dtype and every row
/// kernel (warp and block register rows, the two-pass block kernel, odd
/// lengths without vector loads, non-square `[L, S]` matrices), and against
/// the unfused `mul`, `masked_fill`, `softmax` on the GPU.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn scaled_causal_softmax_matches_cpu_and_the_unfused_ops() -> Result<()> {
    let dev = gpu();
    let shapes: [&[usize]; 8] = [
        &[1, 1],
        &[7, 5],
        &[2, 3, 64, 64],
        &[2, 12, 33, 33],
        &[1, 2, 1024, 1024],
        &[3, 40, 1023],
        &[2, 9000],
        &[1, 4, 17, 9],
    ];
    for (i, shape) in shapes.iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let x = Tensor::randn(shape, DType::F64, 1700 + i as u64, Device::Cpu)?
                .mul(4.0)?
                .to_dtype(dtype)?;
            let gx = x.to(dev)?;
            for (scale, causal) in [(0.125, true), (0.37, false), (1.0, true)] {
                let what = format!("{shape:?} {dtype} scale {scale} causal {causal}");
                let g = gx.scaled_softmax(scale, causal, None)?;
                assert_sum(&what, &x.scaled_softmax(scale, causal, None)?, &g);
                assert_sum(
                    &format!("{what} to f32"),
                    &x.scaled_softmax(scale, causal, Some(DType::F32))?,
                    &gx.scaled_softmax(scale, causal, Some(DType::F32))?,
                );
                if dtype == DType::F32 || dtype == DType::F64 {
                    // The unfused ops on the GPU: mul, masked_fill(j > i), softmax.
                    let n = shape.len();
                    let (l, s) = (shape[n - 2] as i64, shape[n - 1] as i64);
                    let mut y = gx.mul(scale)?;
                    if causal {
                        let i = Tensor::arange(0, l, 1, Some(DType::I64), dev)?.unsqueeze(1)?;
                        let j = Tensor::arange(0, s, 1, Some(DType::I64), dev)?.unsqueeze(0)?;
                        y = y.masked_fill(&j.gt(&i)?, f64::NEG_INFINITY)?;
                    }
                    let unfused = y.softmax(-1, None)?;
                    assert_sum(&format!("{what} vs unfused"), &unfused.to(Device::Cpu)?, &g);
                }
            }
        }
    }
    Ok(())
}

// ----- issue 17: NCCL collectives with a one-rank communicator -----

/// The host result of each collective over the inputs of `world` ranks,
/// computed in f64 from the ranks' elements (the reference the GPU is checked
/// against; with one GPU `world` is 1).
fn host_reduce(inputs: &[Vec<f64>], op: strata_tensor::distributed::ReduceOp) -> Vec<f64> {
    use strata_tensor::distributed::ReduceOp;
    (0..inputs[0].len())
        .map(|i| {
            let col = inputs.iter().map(|v| v[i]);
            match op {
                ReduceOp::Sum => col.sum(),
                ReduceOp::Avg => col.sum::<f64>() / inputs.len() as f64,
                ReduceOp::Max => col.fold(f64::NEG_INFINITY, f64::max),
            }
        })
        .collect()
}

fn as_f64(t: &Tensor) -> Result<Vec<f64>> {
    t.to(Device::Cpu)?.to_dtype(DType::F64)?.to_vec::<f64>()
}

/// Every collective on every dtype NCCL and strata share, with a one-rank
/// communicator, against the host computation; the inputs are written by a
/// kernel on a non-default current stream right before each collective, so
/// a missing compute -> communication ordering would show as stale data.
#[test]
#[ignore = "needs a CUDA GPU and NCCL; run with --include-ignored on a GPU machine"]
fn nccl_one_rank_collectives_match_host() -> Result<()> {
    use strata_tensor::distributed::{nccl_version, Communicator, ReduceOp};
    let dev = gpu();
    let comms = Communicator::for_devices(&[dev])?;
    let comm = &comms[0];
    assert_eq!((comm.rank(), comm.world_size(), comm.device()), (0, 1, dev));
    eprintln!("NCCL {:?}", nccl_version()?);
    let side = cuda::Stream::new(dev)?;
    let _g = cuda::StreamGuard::new(&side)?;
    let mut seed = 1700;
    for dtype in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
    ] {
        for n in [1usize, 1000, 1 << 20] {
            seed += 1;
            let host = Tensor::randint(0, 100, &[n], Some(DType::I64), seed, Device::Cpu)?
                .to_dtype(dtype)?;
            let mut ops = vec![ReduceOp::Sum, ReduceOp::Max];
            if dtype.is_float() {
                ops.push(ReduceOp::Avg);
            }
            for op in ops {
                let t = Tensor::zeros(&[n], dtype, dev)?;
                t.copy_(&host.to(dev)?)?; // a kernel on the side stream
                let w = comm.all_reduce(&t, op)?;
                w.wait()?;
                let expect = host_reduce(&[as_f64(&host)?], op);
                assert_eq!(as_f64(&t)?, expect, "all_reduce {op:?} {dtype} n={n}");
            }
            // broadcast from rank 0
            let t = Tensor::zeros(&[n], dtype, dev)?;
            t.copy_(&host.to(dev)?)?;
            comm.broadcast(&t, 0)?.wait()?;
            assert_eq!(as_f64(&t)?, as_f64(&host)?, "broadcast {dtype} n={n}");
            // all_gather from a non-contiguous input (copied first)
            if n > 1 && n.is_multiple_of(2) {
                let src = host.to(dev)?.view(&[2, (n / 2) as i64])?.transpose(0, 1)?;
                let out = Tensor::zeros(&[n], dtype, dev)?;
                comm.all_gather(&src, &out)?.wait()?;
                assert_eq!(
                    as_f64(&out)?,
                    as_f64(&src.contiguous()?)?,
                    "all_gather {dtype} n={n}"
                );
            }
            // reduce_scatter: one rank keeps the whole reduction
            let out = Tensor::zeros(&[n], dtype, dev)?;
            comm.reduce_scatter(&host.to(dev)?, &out, ReduceOp::Sum)?
                .wait()?;
            assert_eq!(
                as_f64(&out)?,
                host_reduce(&[as_f64(&host)?], ReduceOp::Sum),
                "reduce_scatter {dtype} n={n}"
            );
        }
    }
    // bool: broadcast and all_gather only
    let b = Tensor::from_slice(&[true, false, true], &[3], dev)?;
    comm.broadcast(&b, 0)?.synchronize()?;
    assert_eq!(b.to_vec::<bool>()?, vec![true, false, true]);
    Ok(())
}

/// The multi-process path with one process: a unique id through bytes,
/// `init_rank`, a collective inside `group`, and host synchronisation.
#[test]
#[ignore = "needs a CUDA GPU and NCCL; run with --include-ignored on a GPU machine"]
fn nccl_init_rank_unique_id_and_group() -> Result<()> {
    use strata_tensor::distributed::{group, Communicator, ReduceOp, UniqueId};
    let dev = gpu();
    let id = UniqueId::new()?;
    let id2 = UniqueId::from_bytes(id.as_bytes())?;
    assert_eq!(id, id2);
    let comm = Communicator::init_rank(dev, 0, 1, &id2)?;
    let t = Tensor::from_slice(&[1.5f32, -2.0, 8.0], &[3], dev)?;
    let w = group(|| comm.all_reduce(&t, ReduceOp::Sum))?;
    w.synchronize()?;
    assert!(w.is_completed()?);
    assert_eq!(t.to_vec::<f32>()?, vec![1.5, -2.0, 8.0]);
    assert!(group(|| group(|| Ok(()))).is_err(), "groups do not nest");
    // NVLS stays off unless the user set it.
    assert!(std::env::var("NCCL_NVLS_ENABLE").is_ok());
    Ok(())
}

/// Bad arguments on a real communicator are typed errors, and a dropped
/// input stays valid for NCCL (record_stream) while the allocator is busy.
#[test]
#[ignore = "needs a CUDA GPU and NCCL; run with --include-ignored on a GPU machine"]
fn nccl_typed_errors_and_buffer_lifetime() -> Result<()> {
    use strata_tensor::distributed::{Communicator, ReduceOp};
    let dev = gpu();
    let comm = Communicator::for_devices(&[dev])?.remove(0);
    let cpu = Tensor::zeros(&[4], DType::F32, Device::Cpu)?;
    assert!(matches!(
        comm.all_reduce(&cpu, ReduceOp::Sum),
        Err(TensorError::DeviceMismatch { .. })
    ));
    let t = Tensor::zeros(&[4, 4], DType::F32, dev)?;
    assert!(matches!(
        comm.all_reduce(&t.transpose(0, 1)?, ReduceOp::Sum),
        Err(TensorError::Value { .. })
    ));
    let i = Tensor::zeros(&[4], DType::I32, dev)?;
    assert!(matches!(
        comm.all_reduce(&i, ReduceOp::Avg),
        Err(TensorError::DType { .. })
    ));
    let b = Tensor::zeros(&[4], DType::Bool, dev)?;
    assert!(matches!(
        comm.all_reduce(&b, ReduceOp::Max),
        Err(TensorError::DType { .. })
    ));
    assert!(matches!(
        comm.broadcast(&t, 1),
        Err(TensorError::Value { .. })
    ));
    let f64_out = Tensor::zeros(&[16], DType::F64, dev)?;
    assert!(matches!(
        comm.all_gather(&t, &f64_out),
        Err(TensorError::DType { .. })
    ));
    let small = Tensor::zeros(&[15], DType::F32, dev)?;
    assert!(matches!(
        comm.all_gather(&t, &small),
        Err(TensorError::Shape { .. })
    ));
    assert!(matches!(
        comm.reduce_scatter(&t, &small, ReduceOp::Sum),
        Err(TensorError::Shape { .. })
    ));
    assert!(matches!(
        Communicator::for_devices(&[dev, dev]),
        Err(TensorError::Value { .. })
    ));
    let missing = Device::Cuda(cuda::device_count());
    assert!(matches!(
        Communicator::for_devices(&[dev, missing]),
        Err(TensorError::BackendUnavailable { .. })
    ));
    // Lifetime: queue many all-reduces of temporaries that are dropped at once;
    // the allocator must not hand their blocks to the fills queued meanwhile.
    let keep = Tensor::full(&[1 << 22], 3.0, DType::F32, dev)?;
    for _ in 0..20 {
        let tmp = keep.deep_clone()?;
        let _w = comm.all_reduce(&tmp, ReduceOp::Sum)?;
        drop(tmp);
        let other = Tensor::full(&[1 << 22], -1.0, DType::F32, dev)?;
        drop(other);
    }
    cuda::synchronize(dev)?;
    assert_eq!(
        keep.sum(None, false)?.item::<f32>()?,
        3.0 * (1 << 22) as f32
    );
    Ok(())
}

/// The vectorised transpose (`tiled_v`: 16-byte accesses, both dims multiples
/// of the vector width) against the CPU: copies and binary ops of transposed
/// operands in every dtype, partial tiles, outer dims, two transposed inputs,
/// mixed dtypes, and layouts it must decline (an odd offset, a dim that is not
/// a multiple of the vector) falling back to the scalar tile.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn vectorised_transposes_match_cpu() -> Result<()> {
    let dev = gpu();
    for (i, &dtype) in DTYPES.iter().enumerate() {
        for &(r, c) in &[
            (64usize, 64usize),
            (16, 2064),
            (1040, 80),
            (272, 48),
            (48, 8),
        ] {
            let seed = 7000 + 10 * i as u64 + r as u64;
            let base = data(&[c, r], dtype, seed)?;
            let gbase = base.to(dev)?;
            let what = format!("{dtype} [{r}, {c}]");
            assert_same(
                &format!("{what} contiguous of t"),
                &base.t()?.contiguous()?,
                &gbase.t()?.contiguous()?,
            );
            if dtype == DType::Bool {
                continue;
            }
            let a = data(&[r, c], dtype, seed + 1)?;
            let ga = a.to(dev)?;
            a.add_(&base.t()?)?;
            ga.add_(&gbase.t()?)?;
            assert_same(&format!("{what} add_ of t"), &a, &ga);
            // Both inputs transposed, the output contiguous.
            let other = data(&[c, r], dtype, seed + 2)?;
            assert_same(
                &format!("{what} t + t"),
                &base.t()?.mul(&other.t()?)?,
                &gbase.t()?.mul(&other.to(dev)?.t()?)?,
            );
            // Mixed dtypes: the transposed input is promoted to f32.
            let f = data(&[r, c], DType::F32, seed + 3)?;
            assert_same(
                &format!("{what} f32 + t"),
                &f.add(&base.t()?)?,
                &f.to(dev)?.add(&gbase.t()?)?,
            );
            // Declined layouts: an offset of one element, an odd width.
            let off = data(&[c + 1, r], dtype, seed + 4)?;
            let (v, gv) = (
                off.narrow(0, 1, c as i64)?.t()?,
                off.to(dev)?.narrow(0, 1, c as i64)?.t()?,
            );
            assert_same(
                &format!("{what} offset t"),
                &v.contiguous()?,
                &gv.contiguous()?,
            );
            let odd = data(&[c, r + 1], dtype, seed + 5)?;
            assert_same(
                &format!("{what} odd t"),
                &odd.t()?.contiguous()?,
                &odd.to(dev)?.t()?.contiguous()?,
            );
        }
        // Outer dims: [b, t, h, d] permuted, the last two dims swapped.
        let x = data(&[3, 32, 5, 48], dtype, 7500 + i as u64)?;
        let gx = x.to(dev)?;
        for perm in [[0usize, 2, 3, 1], [2, 0, 3, 1], [1, 3, 0, 2]] {
            let p: Vec<i64> = perm.iter().map(|&d| d as i64).collect();
            assert_same(
                &format!("{dtype} permute {perm:?}"),
                &x.permute(&p)?.contiguous()?,
                &gx.permute(&p)?.contiguous()?,
            );
        }
    }
    Ok(())
}

/// The values of `t` as f64 bits, every NaN one pattern: bit-for-bit
/// comparisons of f16/bf16 results.
fn bits(t: &Tensor) -> Vec<u64> {
    let v = t.to(Device::Cpu).unwrap().to_dtype(DType::F64).unwrap();
    v.to_vec::<f64>()
        .unwrap()
        .iter()
        .map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn half_division_rounding_matches_cpu_bit_for_bit() -> Result<()> {
    let dev = gpu();
    let mut rng = Rng(0xd1f);
    for dtype in [DType::F16, DType::BF16] {
        // Every bit pattern is possible (NaN, ±inf, ±0, subnormals).
        let mut pattern = |n: usize| -> Result<Tensor> {
            let w: Vec<u16> = (0..n).map(|_| rng.next() as u16).collect();
            Ok(match dtype {
                DType::F16 => Tensor::from_vec(
                    w.iter().map(|&b| half::f16::from_bits(b)).collect(),
                    &[n],
                    Device::Cpu,
                )?,
                _ => Tensor::from_vec(
                    w.iter().map(|&b| half::bf16::from_bits(b)).collect(),
                    &[n],
                    Device::Cpu,
                )?,
            })
        };
        let (a, b) = (pattern(64 * 1031)?, pattern(64 * 1031)?);
        let (a, b) = (a.reshape(&[64, 1031])?, b.reshape(&[64, 1031])?);
        let (ga, gb) = (a.to(dev)?, b.to(dev)?);
        let modes = [None, Some(RoundingMode::Trunc), Some(RoundingMode::Floor)];
        let div = |x: &Tensor, y: &Tensor, m: Option<RoundingMode>| match m {
            Some(m) => x.div_mode(y, m),
            None => x.div(y),
        };
        for m in modes {
            let what = format!("{dtype} {m:?}");
            assert_eq!(bits(&div(&a, &b, m)?), bits(&div(&ga, &gb, m)?), "{what}");
            // Transposed operands (the strided kernels).
            let (at, bt) = (a.t()?, b.t()?);
            assert_eq!(
                bits(&div(&at, &bt, m)?),
                bits(&div(&ga.t()?, &gb.t()?, m)?),
                "{what} transposed"
            );
            // Divisors of one element: 0-d of several dtypes, [1], a
            // broadcast column, and a scalar.
            for (k, x) in [0.1f64, -3.3, 60001.0, 0.0].into_iter().enumerate() {
                let mut ones = vec![
                    Tensor::scalar(x, dtype, Device::Cpu)?,
                    Tensor::scalar(x, DType::F32, Device::Cpu)?,
                    Tensor::scalar(x, DType::F64, Device::Cpu)?,
                    Tensor::scalar(x as i64, DType::I64, Device::Cpu)?,
                    Tensor::scalar(x, dtype, Device::Cpu)?.reshape(&[1, 1])?,
                ];
                // The broadcast column is expanded on each device: moving an
                // expanded tensor materialises it (as PyTorch's `to` does),
                // and a materialised column is no longer one element.
                let mut gones = ones.iter().map(|o| o.to(dev)).collect::<Result<Vec<_>>>()?;
                ones.push(ones[0].reshape(&[1, 1])?.expand(&[64, 1])?);
                gones.push(gones[0].reshape(&[1, 1])?.expand(&[64, 1])?);
                for (j, (o, go)) in ones.iter().zip(&gones).enumerate() {
                    let w = format!("{what} divisor {k}/{j}");
                    assert_eq!(bits(&div(&a, o, m)?), bits(&div(&ga, go, m)?), "{w}");
                    let (c, gc) = (a.deep_clone()?, ga.deep_clone()?);
                    match m {
                        Some(m) => {
                            c.div_mode_(o, m)?;
                            gc.div_mode_(go, m)?;
                        }
                        None => {
                            c.div_(o)?;
                            gc.div_(go)?;
                        }
                    }
                    assert_eq!(bits(&c), bits(&gc), "{w} in place");
                }
                let (r, gr) = match m {
                    Some(m) => (a.div_mode(x, m)?, ga.div_mode(x, m)?),
                    None => (a.div(x)?, ga.div(x)?),
                };
                assert_eq!(bits(&r), bits(&gr), "{what} scalar {x}");
            }
        }
    }
    // PyTorch's answers (tests/div_and_cross_entropy.rs has the snippets).
    let bf = |v: &[f32]| -> Result<Tensor> {
        let v: Vec<half::bf16> = v.iter().map(|&x| half::bf16::from_f32(x)).collect();
        Tensor::from_vec(v, &[5], Device::Cpu)?.to(dev)
    };
    let (a, b) = (
        bf(&[1., 3., 23., 56., -1.])?,
        bf(&[0.1, 0.3, 0.7, 3.3, 0.1])?,
    );
    let got = a.div_mode(&b, RoundingMode::Trunc)?.to_dtype(DType::F64)?;
    assert_eq!(
        got.to(Device::Cpu)?.to_vec::<f64>()?,
        [10., 10., 33., 17., -10.]
    );
    let (a, b) = (
        bf(&[26., 67., 66., 134., -26.])?,
        bf(&[0.1, 0.3, 0.7, 1.1, 0.1])?,
    );
    let got = a.div_mode(&b, RoundingMode::Floor)?.to_dtype(DType::F64)?;
    assert_eq!(
        got.to(Device::Cpu)?.to_vec::<f64>()?,
        [258., 223., 93., 120., -260.]
    );
    let a = bf(&[1., 2., 3., 26., 28.])?;
    let b0 = Tensor::scalar(0.1, DType::BF16, dev)?;
    for m in [RoundingMode::Trunc, RoundingMode::Floor] {
        let got = a.div_mode(&b0, m)?.to_dtype(DType::F64)?;
        assert_eq!(
            got.to(Device::Cpu)?.to_vec::<f64>()?,
            [9., 19., 29., 260., 280.]
        );
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cross_entropy_of_huge_logits_matches_cpu() -> Result<()> {
    use strata_tensor::Reduction;
    let dev = gpu();
    // Class counts of each forward kernel: warp rows (2, 1000), block rows
    // (5000) and the online kernel beyond 8192 (9000).
    for c in [2usize, 1000, 5000, 9000] {
        for dtype in [DType::F32, DType::F64, DType::BF16] {
            // Row r: base[r] + small offsets, base ±1e30 (the offsets vanish:
            // equal logits) or 3e4 (offsets of 1/8 survive in f32).
            let bases = [-1e30, 1e30, 3e4, -3e4];
            let mut v = Vec::with_capacity(bases.len() * c);
            for (r, &base) in bases.iter().enumerate() {
                v.extend((0..c).map(|j| base + ((j * 7 + r) % 13) as f64 / 8.0));
            }
            let x = Tensor::from_vec(v, &[bases.len(), c], Device::Cpu)?.to_dtype(dtype)?;
            let t = Tensor::from_vec(vec![0i64, (c - 1) as i64, 1, -100], &[4], Device::Cpu)?;
            let w = Tensor::rand(&[c], dtype, c as u64, Device::Cpu)?.add(0.5)?;
            let (gx, gt, gw) = (x.to(dev)?, t.to(dev)?, w.to(dev)?);
            for (red, smooth, weighted) in [
                (Reduction::None, 0.0, false),
                (Reduction::None, 0.1, true),
                (Reduction::Mean, 0.1, false),
            ] {
                let (args, gargs) = ce_args(&w, &gw, red, smooth, weighted);
                let what = format!("[4, {c}] {dtype} {red:?} eps {smooth} weight {weighted}");
                let (l, s) = x.cross_entropy_forward(&t, args)?;
                let (gl, gs) = gx.cross_entropy_forward(&gt, gargs)?;
                assert_sum(&format!("{what} loss"), &l, &gl);
                let (s, gs) = (s.unwrap(), gs.unwrap());
                assert_sum(&format!("{what} lse"), &s.lse, &gs.lse);
                // Rows of equal logits: -log p = log C whatever the magnitude.
                if matches!(red, Reduction::None) && !weighted {
                    let got = gl.to(Device::Cpu)?.to_dtype(DType::F64)?.to_vec::<f64>()?;
                    let tol = if dtype == DType::BF16 { 1e-2 } else { 1e-5 };
                    for (r, &l) in got[..2].iter().enumerate() {
                        let want = (c as f64).ln();
                        assert!((l - want).abs() <= tol * want, "{what} row {r}: {l}");
                    }
                }
                let g = Tensor::ones(l.shape(), l.dtype(), Device::Cpu)?;
                let dx = x.cross_entropy_backward(&g, &s, args)?;
                let gdx = gx.cross_entropy_backward(&g.to(dev)?, &gs, gargs)?;
                assert_sum(&format!("{what} grad"), &dx, &gdx);
            }
        }
    }
    Ok(())
}

/// `empty` of `bool` over a block that held other bytes starts `false` on
/// every device, and the ops read it so (a byte other than 0 or 1 is not a
/// valid `bool`); comparisons, whose outputs are written in full, still give
/// their values.
fn empty_bool_starts_false(dev: Device) -> Result<()> {
    for n in [1usize, 300, 70_000] {
        drop(Tensor::full(&[n], 240, DType::U8, dev)?);
        let b = Tensor::empty(&[n], DType::Bool, dev)?;
        assert_eq!(b.to(Device::Cpu)?.to_vec::<bool>()?, vec![false; n]);
        assert_eq!(
            b.sum(None, false)?.to(Device::Cpu)?.to_vec::<i64>()?,
            vec![0]
        );
        let x = Tensor::arange(0.0, n as f64, 1.0, Some(DType::F32), dev)?;
        let lt = x.lt(&Tensor::full(&[1], 100.0, DType::F32, dev)?)?;
        let want = (0..n).filter(|&i| i < 100).count() as i64;
        assert_eq!(
            lt.sum(None, false)?.to(Device::Cpu)?.to_vec::<i64>()?,
            vec![want]
        );
    }
    Ok(())
}
test_device!(
    empty_bool_starts_false,
    empty_bool_starts_false_cpu,
    empty_bool_starts_false_gpu
);

/// Label smoothing's sum Σ w[c] (-log p[c]) is taken term by term, as the CPU
/// (and PyTorch) take it: an infinite class weight at a class whose logit is
/// the row's max gives an infinite loss, not NaN (`ls * Σ w - Σ w (x - m)`
/// made `inf * 0` there; `fuzz_ops.s181_cross_entropy_0624`). Rows of equal
/// logits: -log p[c] = ln C for every class, so each row's loss is
/// 0.9 w[t] ln C + 0.1 / C Σ w ln C.
fn label_smoothing_with_infinite_weights(dev: Device) -> Result<()> {
    use strata_tensor::{CrossEntropyArgs, Reduction};
    for classes in [4usize, 300, 20_000] {
        let rows = 3;
        let x = Tensor::full(&[rows, classes], 0.5, DType::F64, dev)?;
        let t = Tensor::from_vec(vec![classes as i64 - 1; rows], &[rows], dev)?;
        let ln_c = (classes as f64).ln();
        for (w0, want) in [
            (f64::NEG_INFINITY, f64::NEG_INFINITY),
            (f64::INFINITY, f64::INFINITY),
            (
                2.0,
                0.9 * ln_c + 0.1 / classes as f64 * (classes as f64 + 1.0) * ln_c,
            ),
        ] {
            let mut w = vec![1.0f64; classes];
            w[0] = w0;
            let w = Tensor::from_vec(w, &[classes], dev)?;
            let args = CrossEntropyArgs {
                weight: Some(&w),
                reduction: Reduction::None,
                label_smoothing: 0.1,
                ..Default::default()
            };
            let got = x.cross_entropy(&t, args)?.to_vec::<f64>()?;
            for g in got {
                let close = g == want || (g - want).abs() <= 1e-12 * want.abs();
                assert!(
                    close,
                    "{classes} classes, w[0] = {w0}: got {g}, want {want}"
                );
            }
        }
    }
    Ok(())
}
test_device!(
    label_smoothing_with_infinite_weights,
    label_smoothing_with_infinite_weights_cpu,
    label_smoothing_with_infinite_weights_cuda
);

/// A float cumsum of a short row adds one element after the other, as the
/// CPU does: 2^62 + 10 - 2^62 - 10 in f32 is 2^62, 2^62, 0, -10 (a tree
/// order would give 0 last; `fuzz_ops.s162_cumsum_0664`).
fn cumsum_of_short_float_rows_adds_in_order(dev: Device) -> Result<()> {
    let big = 1i64 << 62;
    let rows = [big, 10, -big, -10, 3, 3, 0, -15];
    let x = Tensor::from_vec(rows.to_vec(), &[2, 4], dev)?;
    let got = x.cumsum(1, Some(DType::F32))?.to_vec::<f32>()?;
    let b = big as f32;
    assert_eq!(got, vec![b, b, 0.0, -10.0, 3.0, 6.0, 6.0, -9.0]);
    // The same along dim 0 of the transpose (a thread per column).
    let got = x
        .t()?
        .cumsum(0, Some(DType::F32))?
        .t()?
        .contiguous()?
        .to_vec::<f32>()?;
    assert_eq!(got, vec![b, b, 0.0, -10.0, 3.0, 6.0, 6.0, -9.0]);
    Ok(())
}
test_device!(
    cumsum_of_short_float_rows_adds_in_order,
    cumsum_of_short_float_rows_adds_in_order_cpu,
    cumsum_of_short_float_rows_adds_in_order_cuda
);

/// Attention's fused causal softmax of a row whose kept scores hold a NaN
/// or +inf, or are all -inf, is NaN through and through, masked columns
/// included, as PyTorch's `softmax(s.masked_fill(triu(ones(L, S), 1),
/// -inf), -1)` makes it (`exp(-inf - nan)`); other rows keep exact zeros
/// in their masked columns. Row lengths reach every kernel (a warp or a
/// block per row, cached in registers or not) and both load widths.
///
/// ```python
/// nan, inf = float('nan'), float('inf')
/// s = torch.tensor([[[nan,1,2],[inf,0,5],[1,2,3]],[[-inf,7,7],[1,2,nan],[0,-inf,0]]])
/// m = torch.ones(3, 3, dtype=torch.bool).triu(1)
/// torch.softmax((s * 0.5).masked_fill(m, -inf), -1)
/// # [[[nan]*3, [nan]*3, [0.18632373, 0.30719590, 0.50648040]],
/// #  [[nan]*3, [0.37754068, 0.62245935, 0.0], [0.5, 0.0, 0.5]]]
/// torch.softmax(torch.tensor([1., 2.]), -1)  # [0.26894143, 0.73105860]
/// ```
fn causal_softmax_of_a_nan_row_is_nan_in_its_masked_columns(dev: Device) -> Result<()> {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let s = Tensor::from_slice(
        &[
            nan, 1., 2., inf, 0., 5., 1., 2., 3., -inf, 7., 7., 1., 2., nan, 0., -inf, 0.,
        ],
        &[2, 3, 3],
        dev,
    )?;
    let got = s.scaled_softmax(0.5, true, None)?.to_vec::<f32>()?;
    let want = [
        nan, nan, nan, nan, nan, nan, 0.18632373, 0.3071959, 0.5064804, nan, nan, nan, 0.37754068,
        0.62245935, 0.0, 0.5, 0.0, 0.5,
    ];
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else {
            (g - w).abs() < 1e-6
        };
        assert!(ok, "element {i}: got {g}, PyTorch {w}");
    }
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for n in [3usize, 40, 100, 1000, 2000, 9000, 10000] {
            for first in [nan, inf, -inf] {
                // Row 0 keeps one element (`first`), row 1 keeps two.
                let mut v = vec![0.0f32; 2 * n];
                v[0] = first;
                v[n] = 1.0;
                v[n + 1] = 2.0;
                let x = Tensor::from_slice(&v, &[2, n], dev)?.to_dtype(dtype)?;
                let p = x
                    .scaled_softmax(1.0, true, None)?
                    .to_dtype(DType::F64)?
                    .to_vec::<f64>()?;
                let what = format!("{dtype} n = {n}, first {first}");
                assert!(
                    p[..n].iter().all(|v| v.is_nan()),
                    "{what}: row 0 {:?}",
                    &p[..4]
                );
                assert!((p[n] - 0.26894143).abs() < 4e-3, "{what}: {}", p[n]);
                assert!((p[n + 1] - 0.7310586).abs() < 4e-3, "{what}: {}", p[n + 1]);
                assert!(p[n + 2..].iter().all(|&v| v == 0.0), "{what}: masked not 0");
            }
        }
    }
    Ok(())
}
test_device!(
    causal_softmax_of_a_nan_row_is_nan_in_its_masked_columns,
    causal_softmax_of_a_nan_row_is_nan_in_its_masked_columns_cpu,
    causal_softmax_of_a_nan_row_is_nan_in_its_masked_columns_cuda
);

/// Dropout multiplies by its noise, as PyTorch does (`input * noise`), so a
/// dropped NaN or infinity stays NaN and a dropped negative value is -0.0;
/// p = 1 is `input * 0`; in f16 the kept scale is rounded to f16.
///
/// ```python
/// x = torch.tensor([-1., nan, 2., -inf, inf, -0.])
/// F.dropout(x, 1.0, True)                   # [-0., nan, 0., nan, nan, -0.]
/// y = F.dropout(torch.tensor([nan] * 64 + [-1.] * 64), 0.5, True)
/// y[:64].isnan().all()                      # True; y[64:] is -0.0 or -2.0
/// F.dropout(torch.ones(4000, dtype=torch.half), 0.1, True).unique()  # [0.0000, 1.1113]
/// F.dropout(torch.tensor([1, 2]), 1.0, True)   # tensor([0, 0])
/// ```
fn dropout_multiplies_by_its_noise(dev: Device) -> Result<()> {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let x = Tensor::from_slice(&[-1.0f32, nan, 2.0, -inf, inf, -0.0], &[6], dev)?;
    let y = x.dropout(1.0, true, 3)?.to_vec::<f32>()?;
    let bits = |v: &[f32]| {
        v.iter()
            .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&y), bits(&[-0.0, nan, 0.0, nan, nan, -0.0]));

    let mut v = vec![nan; 64];
    v.extend([-1.0f32; 64]);
    let y = Tensor::from_slice(&v, &[128], dev)?
        .dropout(0.5, true, 11)?
        .to_vec::<f32>()?;
    assert!(y[..64].iter().all(|v| v.is_nan()), "{:?}", &y[..8]);
    assert!(y[64..]
        .iter()
        .all(|&v| v.to_bits() == (-0.0f32).to_bits() || v == -2.0));
    assert!(y[64..].contains(&0.0) && y[64..].contains(&-2.0));

    let h = Tensor::ones(&[4000], DType::F16, dev)?;
    let y = h
        .dropout(0.1, true, 5)?
        .to_dtype(DType::F32)?
        .to_vec::<f32>()?;
    let scale = half::f16::from_f64(1.0 / 0.9).to_f32();
    assert!((scale - 1.1113).abs() < 1e-4);
    assert!(y.iter().all(|&v| v == 0.0 || v == scale));
    assert!(y.contains(&0.0) && y.contains(&scale));

    let i = Tensor::from_slice(&[1i64, 2], &[2], dev)?;
    assert_eq!(i.dropout(1.0, true, 0)?.to_vec::<i64>()?, vec![0, 0]);
    assert!(matches!(
        Tensor::dropout_noise(&[2], 0.5, 0, DType::I64, dev),
        Err(TensorError::DType { .. })
    ));
    Ok(())
}
test_device!(
    dropout_multiplies_by_its_noise,
    dropout_multiplies_by_its_noise_cpu,
    dropout_multiplies_by_its_noise_cuda
);

/// The fused Adam step's `maximize` and AMSGrad (`adam_step_with_`) on the
/// GPU against the CPU: every float dtype, lengths with ragged vector tails,
/// misaligned bases (a narrow by one element disables the 16-byte path),
/// AMSGrad alone, maximize alone and both, with and without weight decay,
/// three steps in a row whose gradients shrink (so that v falls below its
/// running maximum); the parameter, both moments and the maximum compared
/// as `adam_step_matches_cpu` compares them.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn adam_step_options_match_cpu() -> Result<()> {
    use strata_tensor::AdamHyper;
    let dev = gpu();
    let mut seed = 4400;
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
        for n in [1usize, 7, 4099, 1 << 20] {
            for skew in [0i64, 1] {
                for (amsgrad, maximize) in [(true, false), (false, true), (true, true)] {
                    for wd in [0.0, 0.1] {
                        seed += 8;
                        let make = |s: u64, nonneg: bool| adam_operand(dtype, n, skew, s, nonneg);
                        let (p, m, v) = (
                            make(seed, false)?,
                            make(seed + 1, false)?,
                            make(seed + 2, true)?,
                        );
                        let x = make(seed + 3, true)?.mul(0.5)?;
                        // The GPU twins keep the skew.
                        let skewed = |t: &Tensor| skewed_twin(t, skew, dev);
                        let (gp, gm, gv, gx) = (skewed(&p)?, skewed(&m)?, skewed(&v)?, skewed(&x)?);
                        for step in 1..=3 {
                            let g = make(seed + 4 + step as u64 * 97, false)?
                                .mul(4.0 / f64::from(step * step))?;
                            let h = AdamHyper {
                                lr: 1e-2,
                                beta1: 0.9,
                                beta2: 0.9,
                                eps: 1e-8,
                                weight_decay: wd,
                                step,
                            };
                            let (cx, gxo) = if amsgrad {
                                (Some(&x), Some(&gx))
                            } else {
                                (None, None)
                            };
                            p.adam_step_with_(&g, &m, &v, cx, h, maximize)?;
                            gp.adam_step_with_(&g.to(dev)?, &gm, &gv, gxo, h, maximize)?;
                        }
                        let what = format!(
                            "adam_step_with_ {dtype:?} n={n} skew={skew} amsgrad={amsgrad} \
                             maximize={maximize} wd={wd}"
                        );
                        for (name, c, g) in [
                            ("p", &p, &gp),
                            ("m", &m, &gm),
                            ("v", &v, &gv),
                            ("max", &x, &gx),
                        ] {
                            check_same(
                                &format!("{what} {name}"),
                                &c.contiguous()?,
                                &g.contiguous()?,
                                true,
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The GPU list step with AMSGrad and maximize (`adam_step_list_with_`, one
/// kernel over up to 64 tensors a launch, the maxima a fifth pointer table)
/// equals the GPU's `adam_step_with_` item by item, bit for bit: every
/// float dtype, 150 items (three launches) of ragged lengths, empty ones,
/// items misaligned by one element, moments and maxima as views into flat
/// buffers as AdamW makes them, and an f32 item split over several list
/// entries.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn adam_step_list_with_options_matches_each_items_step() -> Result<()> {
    let dev = gpu();
    let h = list_hyper();
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
        // More than one list entry.
        let it = ListItems::new(dtype, dev, 20_000_000)?;
        let (ps, gs, ms, vs, xs) = (&it.ps, &it.gs, &it.ms, &it.vs, &it.xs);
        for maximize in [false, true] {
            let (ps2, ms2, vs2, xs2) = (
                deep_clones(ps),
                deep_clones(ms),
                deep_clones(vs),
                deep_clones(xs),
            );
            Tensor::adam_step_list_with_(ps, gs, ms, vs, Some(xs), h, maximize)?;
            for k in 0..it.lens.len() {
                ps2[k].adam_step_with_(&gs[k], &ms2[k], &vs2[k], Some(&xs2[k]), h, maximize)?;
            }
            for k in 0..it.lens.len() {
                let what = format!(
                    "{dtype:?} maximize={maximize} item {k} of length {}",
                    it.lens[k]
                );
                assert!(host_vec(&ps[k]) == host_vec(&ps2[k]), "{what}: parameter");
                assert!(host_vec(&ms[k]) == host_vec(&ms2[k]), "{what}: exp_avg");
                assert!(host_vec(&vs[k]) == host_vec(&vs2[k]), "{what}: exp_avg_sq");
                assert!(
                    host_vec(&xs[k]) == host_vec(&xs2[k]),
                    "{what}: max_exp_avg_sq"
                );
            }
        }
    }
    Ok(())
}

/// `file` (written by strata) with its header's dtype `from` relabelled
/// `to`, a name of the same length, so every size and offset stays right:
/// the loaders' widened dtypes (`.npy` `|i1` and `<u2`, safetensors I8 and
/// U16) are not ones strata writes.
fn relabel(file: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = file
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .expect("the dtype in the header");
    let mut out = file.to_vec();
    out[at..at + to.len()].copy_from_slice(to.as_bytes());
    out
}

/// `.npy` and safetensors bytes load onto the GPU as onto the CPU, bit for
/// bit: every dtype strata writes (`.npy`: all but bf16), and the narrow integers the loaders widen
/// (safetensors I8 and U16, `.npy` i1 and u2) into a buffer reserved
/// fallibly before the copy to the device.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn model_files_load_onto_the_gpu_as_onto_the_cpu() -> Result<()> {
    let dev = gpu();
    let same = |what: &str, c: &Tensor, g: &Tensor| -> Result<()> {
        assert_eq!(g.device(), dev, "{what}");
        assert_eq!((c.dtype(), c.shape()), (g.dtype(), g.shape()), "{what}");
        assert_eq!(
            c.to_raw_bytes()?,
            g.to(Device::Cpu)?.to_raw_bytes()?,
            "{what}"
        );
        Ok(())
    };
    for (k, dtype) in DType::ALL.into_iter().enumerate() {
        let t = data(&[3, 5], dtype, 40 + k as u64)?;
        // NumPy has no bf16.
        if dtype != DType::BF16 {
            let npy = strata_tensor::interop::npy_to_bytes(&t)?;
            let (c, g) = (
                strata_tensor::interop::npy_from_bytes(&npy, Device::Cpu)?,
                strata_tensor::interop::npy_from_bytes(&npy, dev)?,
            );
            same(&format!("npy {dtype}"), &c, &g)?;
        }
        let st = strata_tensor::interop::safetensors_to_bytes([("t", &t)])?;
        let (c, g) = (
            strata_tensor::interop::safetensors_from_bytes(&st, Device::Cpu)?,
            strata_tensor::interop::safetensors_from_bytes(&st, dev)?,
        );
        same(&format!("safetensors {dtype}"), &c["t"], &g["t"])?;
    }
    // 24 bytes as u8 (relabelled i1 and I8) and as 12 f16 (relabelled u2 and
    // U16).
    let bytes: Vec<u8> = (0..24u8).map(|i| i.wrapping_mul(37)).collect();
    let u8s = Tensor::from_raw_bytes(&bytes, DType::U8, &[4, 6], Device::Cpu)?;
    let f16s = Tensor::from_raw_bytes(&bytes, DType::F16, &[3, 4], Device::Cpu)?;
    let npy = strata_tensor::interop::npy_to_bytes;
    let st = |t: &Tensor| strata_tensor::interop::safetensors_to_bytes([("t", t)]);
    for (what, f) in [
        ("npy |i1", relabel(&npy(&u8s)?, "|u1", "|i1")),
        ("npy <u2", relabel(&npy(&f16s)?, "<f2", "<u2")),
    ] {
        let (c, g) = (
            strata_tensor::interop::npy_from_bytes(&f, Device::Cpu)?,
            strata_tensor::interop::npy_from_bytes(&f, dev)?,
        );
        assert_eq!(c.dtype(), DType::I32, "{what} widens to i32");
        same(what, &c, &g)?;
    }
    for (what, f) in [
        ("safetensors I8", relabel(&st(&u8s)?, "\"U8\"", "\"I8\"")),
        (
            "safetensors U16",
            relabel(&st(&f16s)?, "\"F16\"", "\"U16\""),
        ),
    ] {
        let (c, g) = (
            strata_tensor::interop::safetensors_from_bytes(&f, Device::Cpu)?,
            strata_tensor::interop::safetensors_from_bytes(&f, dev)?,
        );
        assert_eq!(c["t"].dtype(), DType::I32, "{what} widens to i32");
        same(what, &c["t"], &g["t"])?;
    }
    Ok(())
}

// ---- Session 58: large sizes, many dims, empty tensors --------------------
//
// Tensors past 2^31 elements (and 2^32 bytes), rows past 65535, views at
// offsets past 2^32, more than the kernels' 12 dims, and size-0 operands.
// Expected values are closed forms (a count of ones, the position of a
// planted extreme, a product of constants) or the CPU backend's result on
// the same data. Each large test holds at most about 17 GiB of GPU memory,
// and `big()` keeps two of them from running at once.

/// Serialises the tests that hold several GiB of GPU memory.
static BIG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn big() -> std::sync::MutexGuard<'static, ()> {
    BIG.lock().unwrap_or_else(|e| e.into_inner())
}

/// The elements `[start, start + len)` of a tensor's flattened view, on the
/// host, as f64.
fn span(t: &Tensor, start: usize, len: usize) -> Result<Vec<f64>> {
    t.reshape(&[-1])?
        .narrow(0, start as i64, len as i64)?
        .to(Device::Cpu)?
        .to_dtype(DType::F64)?
        .to_vec::<f64>()
}

/// The one element of a 0-d (or one-element) tensor, as f64.
fn one(t: &Tensor) -> Result<f64> {
    t.to(Device::Cpu)?.to_dtype(DType::F64)?.item::<f64>()
}

/// Sets the flattened element `i` of the contiguous `t` to `v`.
fn plant(t: &Tensor, i: usize, v: impl Into<Scalar>) -> Result<()> {
    t.reshape(&[-1])?.narrow(0, i as i64, 1)?.fill_(v)?;
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU (17 GiB); run with --include-ignored on a GPU machine"]
fn reductions_past_2_31_elements_count_every_element() -> Result<()> {
    let dev = gpu();
    let _g = big();
    // A full sum and mean of 2^31 + 3 ones (f64: exact).
    let n = (1usize << 31) + 3;
    let x = Tensor::ones(&[n], DType::F64, dev)?;
    assert_eq!(one(&x.sum(None, false)?)?, n as f64);
    assert_eq!(one(&x.mean(None, false)?)?, 1.0);
    drop(x);
    // Planted extremes past 2^31 and 2^32 in 2^32 + 100 bytes.
    let n = (1usize << 32) + 100;
    let x = Tensor::zeros(&[n], DType::U8, dev)?;
    let far = (1usize << 32) + 7;
    plant(&x, far, 9.0)?;
    plant(&x, n - 1, 9.0)?;
    assert_eq!(one(&x.argmax(None, false)?)?, far as f64);
    assert_eq!(one(&x.max()?)?, 9.0);
    x.fill_(1)?;
    let low = (1usize << 31) + 5;
    plant(&x, low, 0.0)?;
    assert_eq!(one(&x.argmin(None, false)?)?, low as f64);
    assert_eq!(one(&x.min()?)?, 0.0);
    drop(x);
    // Per-dim reductions of [2^21 + 3, 1024] f16 (2^31 + 3072 elements):
    // dim 0 (columns), dim 1 (rows), the planted last row.
    let rows = (1usize << 21) + 3;
    let x = Tensor::zeros(&[rows, 1024], DType::F16, dev)?;
    x.narrow(0, rows as i64 - 1, 1)?.fill_(1.0)?;
    let s0 = x.sum(Some(&[0]), false)?;
    assert_eq!((one(&s0.min()?)?, one(&s0.max()?)?), (1.0, 1.0));
    let (v0, i0) = x.max_dim(0, false)?;
    assert_eq!(one(&v0.min()?)?, 1.0);
    assert_eq!(
        (one(&i0.min()?)?, one(&i0.max()?)?),
        ((rows - 1) as f64, (rows - 1) as f64)
    );
    let s1 = x.sum(Some(&[1]), false)?;
    assert_eq!(span(&s1, rows - 2, 2)?, vec![0.0, 1024.0]);
    assert_eq!(one(&s1.narrow(0, 0, rows as i64 - 1)?.max()?)?, 0.0);
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU (9 GiB); run with --include-ignored on a GPU machine"]
fn elementwise_kernels_past_2_31_elements_write_every_element() -> Result<()> {
    let dev = gpu();
    let _g = big();
    // Contiguous: 2^32 + 37 bytes, a planted run at an offset past 2^32.
    let n = (1usize << 32) + 37;
    let x = Tensor::zeros(&[n], DType::U8, dev)?;
    x.narrow(0, 1 << 32, 37)?.fill_(3)?;
    let y = x.add(1)?;
    assert_eq!(one(&y.min()?)?, 1.0, "every element written");
    assert_eq!(one(&y.max()?)?, 4.0);
    assert_eq!(one(&y.argmax(None, false)?)?, (1u64 << 32) as f64);
    assert_eq!(span(&y, (1 << 32) - 1, 3)?, vec![1.0, 4.0, 4.0]);
    drop(y);
    // A view whose row stride is 2^32 elements: rows 0 (zeros) and 2^32
    // (the planted 3s), added to, reduced, transposed.
    let v = x.as_strided(&[2, 37], &[1 << 32, 1], Some(0))?;
    let w = v.add(1)?;
    assert_eq!(span(&w, 0, 74)?, [[1.0; 37], [4.0; 37]].concat());
    let s = v.to_dtype(DType::F32)?.sum(Some(&[1]), false)?;
    assert_eq!(span(&s, 0, 2)?, vec![0.0, 111.0]);
    let t = v.t()?.contiguous()?;
    assert_eq!(span(&t, 0, 4)?, vec![0.0, 3.0, 0.0, 3.0]);
    drop((x, v, w, t));
    // Strided rows (the row kernel) with more rows than a grid's 65535.
    let x = Tensor::zeros(&[65537, 65600], DType::U8, dev)?;
    plant(&x, 65536 * 65600 + 65535, 7.0)?;
    let y = x.narrow(1, 0, 65536)?.add(1)?;
    assert_eq!(y.shape(), &[65537, 65536]);
    assert_eq!(one(&y.min()?)?, 1.0, "every element written");
    assert_eq!(one(&y.max()?)?, 8.0);
    assert_eq!(one(&y.argmax(None, false)?)?, (65537.0 * 65536.0) - 1.0);
    drop((x, y));
    // Two columns of three (the general kernel), 2^31 + 2 outputs.
    let rows = (1usize << 30) + 1;
    let x = Tensor::zeros(&[rows, 3], DType::U8, dev)?;
    plant(&x, 3 * (rows - 1) + 1, 5.0)?;
    let y = x.narrow(1, 0, 2)?.add(1)?;
    assert_eq!(one(&y.min()?)?, 1.0, "every element written");
    assert_eq!(one(&y.argmax(None, false)?)?, (2 * rows - 1) as f64);
    drop((x, y));
    // Broadcast row + column into [65537, 65536].
    let a = Tensor::zeros(&[65537, 1], DType::U8, dev)?;
    let b = Tensor::zeros(&[1, 65536], DType::U8, dev)?;
    plant(&a, 65536, 3.0)?;
    plant(&b, 65535, 4.0)?;
    let y = a.add(&b)?;
    assert_eq!(one(&y.max()?)?, 7.0);
    assert_eq!(one(&y.argmax(None, false)?)?, (65537.0 * 65536.0) - 1.0);
    // y[65535, 65535] = 0 + 4, y[65536, 0] = 3 + 0.
    assert_eq!(span(&y, 65536 * 65536 - 1, 2)?, vec![4.0, 3.0]);
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU (9 GiB); run with --include-ignored on a GPU machine"]
fn transposes_past_2_31_elements_move_every_element() -> Result<()> {
    let dev = gpu();
    let _g = big();
    // 46341^2 > 2^31 (the scalar tiled kernel: not a multiple of 16), and
    // [46352, 46336] (multiples of 16: the vectorised one).
    for (r, c) in [(46341usize, 46341usize), (46352, 46336)] {
        let x = Tensor::zeros(&[r, c], DType::U8, dev)?;
        plant(&x, (r - 1) * c, 9.0)?; // x[r-1, 0]
        plant(&x, (r - 2) * c + c - 1, 8.0)?; // x[r-2, c-1]
        let y = x.t()?.contiguous()?;
        assert_eq!(y.shape(), &[c, r]);
        // y[0, r-1] = 9 is the first maximum; y[c-1, r-2] = 8.
        assert_eq!(one(&y.argmax(None, false)?)?, (r - 1) as f64);
        assert_eq!(span(&y, (c - 1) * r + r - 2, 2)?, vec![8.0, 0.0]);
        // Nothing else moved: the sum of what is not planted is 0.
        assert_eq!(one(&y.to_dtype(DType::F32)?.sum(None, false)?)?, 17.0);
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU (9 GiB); run with --include-ignored on a GPU machine"]
fn row_ops_past_2_31_elements_reach_the_last_row() -> Result<()> {
    let dev = gpu();
    let _g = big();
    // Rows of 1024 (a warp each), 8192 (a block, in registers) and 16384
    // (the two-pass block kernel), 2^31 + n elements in all, f16.
    for n in [1024usize, 8192, 16384] {
        let rows = (1usize << 31) / n + 1;
        let x = Tensor::zeros(&[rows, n], DType::F16, dev)?;
        let last = x.narrow(0, rows as i64 - 1, 1)?;
        last.narrow(1, 3, 1)?.fill_(4.0)?;
        last.narrow(1, n as i64 - 1, 1)?.fill_(-2.0)?;
        let cpu_last = last.to(Device::Cpu)?;
        let s = x.softmax(1, None)?;
        // Every uniform row is 1/n exactly.
        let head = s.narrow(0, 0, rows as i64 - 1)?;
        let u = 1.0 / n as f64;
        assert_eq!(
            (one(&head.min()?)?, one(&head.max()?)?),
            (u, u),
            "softmax {n}"
        );
        assert_same(
            &format!("softmax last row of {n}"),
            &cpu_last.softmax(1, None)?,
            &s.narrow(0, rows as i64 - 1, 1)?,
        );
        let ls = x.log_softmax(1, None)?;
        assert_same(
            &format!("log_softmax last row of {n}"),
            &cpu_last.log_softmax(1, None)?,
            &ls.narrow(0, rows as i64 - 1, 1)?,
        );
        drop(ls);
        // The gradient of a uniform row under a gradient of ones is 0.
        let g = Tensor::ones(&[rows, n], DType::F16, dev)?;
        let dx = s.softmax_backward(&g, 1)?;
        let dhead = dx.narrow(0, 0, rows as i64 - 1)?;
        assert_eq!((one(&dhead.min()?)?, one(&dhead.max()?)?), (0.0, 0.0));
        let cpu_s = s.narrow(0, rows as i64 - 1, 1)?.to(Device::Cpu)?;
        let cpu_g = Tensor::ones(&[1, n], DType::F16, Device::Cpu)?;
        assert_sum(
            &format!("softmax_backward last row of {n}"),
            &cpu_s.softmax_backward(&cpu_g, 1)?,
            &dx.narrow(0, rows as i64 - 1, 1)?,
        );
        drop((s, g, dx));
        // cumsum along the rows: zeros, then the planted row's running sum.
        let c = x.cumsum(1, None)?;
        assert_eq!(one(&c.narrow(0, 0, rows as i64 - 1)?.abs()?.max()?)?, 0.0);
        assert_same(
            &format!("cumsum last row of {n}"),
            &cpu_last.cumsum(1, None)?,
            &c.narrow(0, rows as i64 - 1, 1)?,
        );
    }
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU (9 GiB); run with --include-ignored on a GPU machine"]
fn index_ops_past_2_31_elements_address_the_far_rows() -> Result<()> {
    let dev = gpu();
    let _g = big();
    // A [2^21 + 5, 1024] f16 table (2^31 + 5120 elements), the last row 2.
    let rows = (1usize << 21) + 5;
    let w = Tensor::zeros(&[rows, 1024], DType::F16, dev)?;
    w.narrow(0, rows as i64 - 1, 1)?.fill_(2.0)?;
    let far = (rows - 1) as i64;
    let idx = Tensor::from_slice(&[far, 0, far], &[3], dev)?;
    let want = |cols: usize| -> Vec<f64> {
        [2.0, 0.0, 2.0]
            .iter()
            .flat_map(|&v| std::iter::repeat_n(v, cols))
            .collect()
    };
    // 16-byte row copies, element copies (rows not 16-byte multiples), the
    // general gather.
    let e = Tensor::embedding(&idx, &w, None)?;
    assert_eq!(span(&e, 0, 3 * 1024)?, want(1024));
    let narrow = w.narrow(1, 1, 1023)?;
    let e = narrow.index_select(0, &idx)?;
    assert_eq!(span(&e, 0, 3 * 1023)?, want(1023));
    let gi = Tensor::full(&[1, 1024], far, DType::I64, dev)?;
    let g = w.gather(0, &gi)?;
    assert_eq!(span(&g, 0, 1024)?, vec![2.0; 1024]);
    drop((w, narrow, e, g));
    // scatter_add into element 2^31 + 5 of a 2^31 + 8 f32 vector.
    let n = (1usize << 31) + 8;
    let out = Tensor::zeros(&[n], DType::F32, dev)?;
    let at = Tensor::from_slice(&[(1i64 << 31) + 5], &[1], dev)?;
    let src = Tensor::from_slice(&[5.0f32], &[1], dev)?;
    out.scatter_add_(0, &at, &src)?;
    assert_eq!(one(&out.argmax(None, false)?)?, ((1u64 << 31) + 5) as f64);
    assert_eq!(one(&out.sum(None, false)?)?, 5.0);
    drop(out);
    // masked_select over 2^31 + 100 positions, set ones before and after 2^31.
    let n = (1usize << 31) + 100;
    let x = Tensor::zeros(&[n], DType::U8, dev)?;
    let m = Tensor::zeros(&[n], DType::Bool, dev)?;
    plant(&x, 7, 9.0)?;
    plant(&m, 7, true)?;
    let tail = (1usize << 31) + 50;
    x.narrow(0, tail as i64, 3)?
        .copy_(&Tensor::from_slice(&[1u8, 2, 3], &[3], dev)?)?;
    m.narrow(0, tail as i64, 3)?.fill_(true)?;
    let sel = x.masked_select(&m)?;
    assert_eq!(span(&sel, 0, 4)?, vec![9.0, 1.0, 2.0, 3.0]);
    assert_eq!(sel.numel(), 4);
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU (17 GiB); run with --include-ignored on a GPU machine"]
fn matmuls_past_2_31_elements_and_int_sizes() -> Result<()> {
    let dev = gpu();
    let _g = big();
    // An output of 2^32 elements (f16 ones: every element 2).
    let a = Tensor::ones(&[65536, 2], DType::F16, dev)?;
    let b = Tensor::ones(&[2, 65536], DType::F16, dev)?;
    let c = a.matmul(&b)?;
    assert_eq!((one(&c.min()?)?, one(&c.max()?)?), (2.0, 2.0));
    drop((a, b, c));
    // A batch whose matrices hold more than 2^31 elements each (the batch
    // stride of the output past i32).
    let a = Tensor::ones(&[2, 46341, 1], DType::F16, dev)?;
    let b = Tensor::ones(&[2, 1, 46341], DType::F16, dev)?;
    b.narrow(0, 1, 1)?.fill_(3.0)?;
    let c = a.matmul(&b)?;
    let (c0, c1) = (c.narrow(0, 0, 1)?, c.narrow(0, 1, 1)?);
    assert_eq!((one(&c0.min()?)?, one(&c0.max()?)?), (1.0, 1.0));
    assert_eq!((one(&c1.min()?)?, one(&c1.max()?)?), (3.0, 3.0));
    drop((a, b, c, c0, c1));
    // m past i32::MAX (cuBLAS's 64-bit entry point).
    let m = (1usize << 31) + 16;
    let a = Tensor::ones(&[m, 1], DType::BF16, dev)?;
    plant(&a, m - 1, 2.0)?;
    let b = Tensor::full(&[1, 1], 3.0, DType::BF16, dev)?;
    let c = a.matmul(&b)?;
    assert_eq!(c.shape(), &[m, 1]);
    assert_eq!((one(&c.min()?)?, one(&c.max()?)?), (3.0, 6.0));
    assert_eq!(one(&c.argmax(None, false)?)?, (m - 1) as f64);
    drop((a, b, c));
    // Leading dims past i32::MAX: rows 2^31 + 8 elements apart, as they are
    // and transposed, times the identity.
    let base = Tensor::zeros(&[(1usize << 31) + 16], DType::F16, dev)?;
    let far = (1usize << 31) + 8;
    for (i, v) in [(0, 1.0), (1, 2.0), (far, 3.0), (far + 1, 4.0)] {
        plant(&base, i, v)?;
    }
    let a = base.as_strided(&[2, 2], &[far as i64, 1], Some(0))?;
    let eye = Tensor::eye(2, None, DType::F16, dev)?;
    assert_eq!(span(&a.matmul(&eye)?, 0, 4)?, vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(span(&a.t()?.matmul(&eye)?, 0, 4)?, vec![1.0, 3.0, 2.0, 4.0]);
    assert_eq!(span(&eye.matmul(&a.t()?)?, 0, 4)?, vec![1.0, 3.0, 2.0, 4.0]);
    drop((base, a, eye));
    // More batches than a grid dimension's 65535, against the CPU.
    let a = data(&[70_000, 2, 3], DType::F32, 5801)?;
    let b = data(&[70_000, 3, 2], DType::F32, 5802)?;
    assert_sum(
        "bmm 70000",
        &a.matmul(&b)?,
        &a.to(dev)?.matmul(&b.to(dev)?)?,
    );
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn ops_over_more_dims_than_the_kernels_walk_match_cpu() -> Result<()> {
    let dev = gpu();
    for nd in [13usize, 14, 20] {
        // `[2; nd]` with its dims reversed: no two dims coalesce.
        let perm: Vec<i64> = (0..nd as i64).rev().collect();
        let base = data(&vec![2; nd], DType::F32, 5810 + nd as u64)?;
        let x = base.permute(&perm)?;
        let gx = twin(&x, &base, dev)?;
        let y = data(&vec![2; nd], DType::F32, 5830 + nd as u64)?;
        let gy = y.to(dev)?;
        assert_eq!(gx.strides(), x.strides());
        assert_same(&format!("add {nd}"), &x.add(&y)?, &gx.add(&gy)?);
        assert_same(
            &format!("contiguous {nd}"),
            &x.contiguous()?,
            &gx.contiguous()?,
        );
        let (c, gc) = (x.gt(&y)?, gx.gt(&gy)?);
        assert_same(
            &format!("where {nd}"),
            &Tensor::where_cond(&c, &x, &y)?,
            &Tensor::where_cond(&gc, &gx, &gy)?,
        );
        // Reductions whose kept (or reduced) dims stay apart.
        assert_sum(
            &format!("sum dim 0 of {nd}"),
            &x.sum(Some(&[0]), false)?,
            &gx.sum(Some(&[0]), false)?,
        );
        let all: Vec<i64> = (0..nd as i64).collect();
        assert_sum(
            &format!("sum all {nd}"),
            &x.sum(Some(&all), false)?,
            &gx.sum(Some(&all), false)?,
        );
        assert_sum(
            &format!("mean 0,1 of {nd}"),
            &x.mean(Some(&[0, 1]), false)?,
            &gx.mean(Some(&[0, 1]), false)?,
        );
        let ((v, i), (gv, gi)) = (x.max_dim(5, false)?, gx.max_dim(5, false)?);
        assert_same(&format!("max_dim values {nd}"), &v, &gv);
        assert_same(&format!("max_dim indices {nd}"), &i, &gi);
        assert_same(
            &format!("argmin {nd}"),
            &x.argmin(Some(2), false)?,
            &gx.argmin(Some(2), false)?,
        );
        // gather / scatter_add along dim 3 with an index of the same rank.
        let idx = rand_index(&vec![2; nd], 2, 5850 + nd as u64)?;
        let gidx = idx.to(dev)?;
        assert_same(
            &format!("gather {nd}"),
            &x.gather(3, &idx)?,
            &gx.gather(3, &gidx)?,
        );
        let z = Tensor::zeros(&vec![2; nd], DType::F32, Device::Cpu)?;
        let gz = z.to(dev)?;
        assert_sum(
            &format!("scatter_add {nd}"),
            &z.scatter_add(3, &idx, &x)?,
            &gz.scatter_add(3, &gidx, &gx)?,
        );
    }
    Ok(())
}

/// `f` on the CPU and on the GPU: both results equal, or both typed errors
/// of the same kind.
fn same_on_both(what: &str, dev: Device, f: impl Fn(Device) -> Result<Tensor>) {
    match (f(Device::Cpu), f(dev)) {
        (Ok(c), Ok(g)) => assert_same(what, &c, &g),
        (Err(c), Err(g)) => assert_eq!(
            std::mem::discriminant(&c),
            std::mem::discriminant(&g),
            "{what}: cpu {c} vs gpu {g}"
        ),
        (c, g) => panic!("{what}: cpu {c:?} vs gpu {g:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn empty_tensors_give_the_cpus_results() -> Result<()> {
    let dev = gpu();
    for shape in [&[0usize, 5][..], &[5, 0], &[3, 0, 2], &[0]] {
        let z = |d: Device| Tensor::zeros(shape, DType::F32, d);
        let last = shape.len() as i64 - 1;
        same_on_both("add", dev, |d| z(d)?.add(1.0));
        same_on_both("sum", dev, |d| z(d)?.sum(None, false));
        same_on_both("sum dim 0", dev, |d| z(d)?.sum(Some(&[0]), false));
        same_on_both("mean", dev, |d| z(d)?.mean(None, false));
        same_on_both("mean last", dev, |d| z(d)?.mean(Some(&[last]), false));
        same_on_both("max", dev, |d| z(d)?.max());
        same_on_both("argmax last", dev, |d| z(d)?.argmax(Some(last), false));
        same_on_both("softmax", dev, |d| z(d)?.softmax(last, None));
        same_on_both("log_softmax 0", dev, |d| z(d)?.log_softmax(0, None));
        same_on_both("cumsum", dev, |d| z(d)?.cumsum(last, None));
        same_on_both("transpose copy", dev, |d| z(d)?.t()?.contiguous());
        same_on_both("masked_select", dev, |d| {
            z(d)?.masked_select(&Tensor::ones(shape, DType::Bool, d)?)
        });
    }
    for (m, k, n) in [(3usize, 0usize, 4usize), (0, 3, 4), (3, 4, 0)] {
        same_on_both(&format!("matmul {m}x{k}x{n}"), dev, |d| {
            Tensor::ones(&[m, k], DType::F32, d)?.matmul(&Tensor::ones(&[k, n], DType::F32, d)?)
        });
        same_on_both(&format!("addmm {m}x{k}x{n}"), dev, |d| {
            Tensor::ones(&[m, n], DType::F32, d)?.addmm(
                &Tensor::ones(&[m, k], DType::F32, d)?,
                &Tensor::ones(&[k, n], DType::F32, d)?,
            )
        });
    }
    same_on_both("index_select of no rows", dev, |d| {
        Tensor::ones(&[4, 3], DType::F32, d)?.index_select(0, &Tensor::zeros(&[0], DType::I64, d)?)
    });
    same_on_both("index_select from no rows", dev, |d| {
        Tensor::ones(&[0, 3], DType::F32, d)?.index_select(0, &Tensor::zeros(&[0], DType::I64, d)?)
    });
    same_on_both("gather of nothing", dev, |d| {
        Tensor::ones(&[4, 3], DType::F32, d)?.gather(1, &Tensor::zeros(&[4, 0], DType::I64, d)?)
    });
    same_on_both("layer_norm of no rows", dev, |d| {
        Tensor::ones(&[0, 8], DType::F32, d)?.layer_norm(&[8], None, None, 1e-5)
    });
    same_on_both("layer_norm of empty rows", dev, |d| {
        Tensor::ones(&[4, 0], DType::F32, d)?.layer_norm(&[0], None, None, 1e-5)
    });
    same_on_both("sum of empty rows", dev, |d| {
        Tensor::ones(&[4, 0], DType::F32, d)?.sum(Some(&[1]), false)
    });
    same_on_both("argmax of empty rows", dev, |d| {
        Tensor::ones(&[4, 0], DType::F32, d)?.argmax(Some(1), false)
    });
    Ok(())
}
#[path = "cuda_ops/contract.rs"]
mod contract;
#[path = "cuda_ops/scatter_ops.rs"]
mod scatter_ops;
#[path = "cuda_ops/shape_ops.rs"]
mod shape_ops;
#[path = "cuda_ops/sort.rs"]
mod sort;
