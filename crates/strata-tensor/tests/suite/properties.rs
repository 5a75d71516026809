//! Property tests: for random shapes, layouts (transposes, stepped slices,
//! narrows, expands) and broadcasts, every op equals a naive element-by-element
//! reference computed on the logical (row-major) values, in every dtype.
//!
//! Each case runs on a device drawn from every device available here: the
//! CPU, and `cuda:0` where this build has a usable GPU backend (otherwise the
//! GPU is skipped and the reason printed once).

use proptest::prelude::*;
use strata_tensor::{DType, Device, Element, Scalar, Tensor};

const DTYPES: [DType; 8] = DType::ALL;

/// The devices this run can compute on.
fn devices() -> &'static [Device] {
    static D: std::sync::OnceLock<Vec<Device>> = std::sync::OnceLock::new();
    D.get_or_init(|| {
        let gpu = Device::Cuda(0);
        if strata_tensor::has_backend(gpu) {
            vec![Device::Cpu, gpu]
        } else {
            println!("property tests on cuda:0: skipped: no usable GPU backend here");
            vec![Device::Cpu]
        }
    })
}

/// A random tensor reached through views of a larger base, with its base.
#[derive(Debug, Clone)]
struct Spec {
    shape: Vec<usize>,
    dtype: DType,
    seed: u64,
    /// Permutation applied after building (a transpose for 2-D).
    perm: Vec<usize>,
    /// Slice step on the (post-permutation) dim 0 of the base (1 = none).
    step: usize,
    /// Offset from narrowing the base's last dim by one at the front.
    narrow: bool,
    /// Where the tensors live.
    device: Device,
}

fn spec(max_dims: usize) -> impl Strategy<Value = Spec> {
    (
        1..=max_dims,
        0..8usize,
        any::<u64>(),
        1..=3usize,
        any::<bool>(),
        0..devices().len(),
    )
        .prop_flat_map(|(nd, dt, seed, step, narrow, dev)| {
            (
                proptest::collection::vec(1..=4usize, nd),
                Just(Vec::from_iter(0..nd)).prop_shuffle(),
                Just((dt, seed, step, narrow, dev)),
            )
        })
        .prop_map(|(shape, perm, (dt, seed, step, narrow, dev))| Spec {
            shape,
            dtype: DTYPES[dt],
            seed,
            perm,
            step,
            narrow,
            device: devices()[dev],
        })
}

/// Small values exact in every dtype (bool: parity; u8: non-negative).
fn values(n: usize, dtype: DType, seed: u64) -> Vec<Scalar> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (x % 17) as i64 - 8;
            match dtype {
                DType::Bool => Scalar::Bool(v % 2 == 0),
                DType::U8 => Scalar::Int(v + 8),
                d if d.is_float() => Scalar::Float(v as f64 / 2.0),
                _ => Scalar::Int(v),
            }
        })
        .collect()
}

/// Builds the view described by `s`, returning (view, base).
fn build(s: &Spec) -> (Tensor, Tensor) {
    // Base shape: dim 0 stretched by the step, last dim one longer when narrowed.
    let mut bshape = s.shape.clone();
    bshape[0] *= s.step;
    let nd = bshape.len();
    if s.narrow {
        bshape[nd - 1] += 1;
    }
    // Lay the base out in permuted order so the view is transposed in memory.
    let inv: Vec<usize> = (0..nd)
        .map(|d| s.perm.iter().position(|&p| p == d).unwrap())
        .collect();
    let phys: Vec<usize> = s.perm.iter().map(|&p| bshape[p]).collect();
    let n: usize = phys.iter().product();
    let base = Tensor::from_scalars(&values(n, s.dtype, s.seed), &phys, s.dtype, s.device).unwrap();
    let inv_i: Vec<i64> = inv.iter().map(|&d| d as i64).collect();
    let mut v = base.permute(&inv_i).unwrap();
    v = v.slice(0, None, None, s.step as i64).unwrap();
    if s.narrow {
        v = v.narrow(nd as i64 - 1, 1, s.shape[nd - 1] as i64).unwrap();
    }
    assert_eq!(v.shape(), s.shape.as_slice());
    (v, base)
}

fn multi_index(mut k: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

/// Row-major position in `shape` of the element a broadcast to `out` reads.
fn broadcast_pos(idx: &[usize], shape: &[usize]) -> usize {
    let lead = idx.len() - shape.len();
    let mut p = 0;
    for d in 0..shape.len() {
        let i = if shape[d] == 1 { 0 } else { idx[lead + d] };
        p = p * shape[d] + i;
    }
    p
}

fn cast(s: Scalar, d: DType) -> Scalar {
    s.cast_to(d)
}

#[derive(Debug, Clone, Copy)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Lt,
    Eq,
}

/// The reference: exact in f64/i64 on the small values, then rounded once to
/// the result dtype (f64 carries enough bits that rounding f64 -> f32 -> f16
/// equals computing in f32 and rounding, for + - * /).
fn reference(op: Bin, a: Scalar, b: Scalar, dtype: DType) -> Scalar {
    match op {
        Bin::Lt => Scalar::Bool(a.to_f64() < b.to_f64()),
        Bin::Eq => Scalar::Bool(a.to_f64() == b.to_f64()),
        _ if dtype == DType::Bool => {
            let (x, y) = (a == Scalar::Bool(true), b == Scalar::Bool(true));
            Scalar::Bool(match op {
                Bin::Add => x | y,
                _ => x & y,
            })
        }
        _ if dtype.is_float() || matches!(op, Bin::Div) => {
            let (x, y) = (a.to_f64(), b.to_f64());
            let r = match op {
                Bin::Add => x + y,
                Bin::Sub => x - y,
                Bin::Mul => x * y,
                _ => x / y,
            };
            cast(
                Scalar::Float(r),
                if dtype.is_float() { dtype } else { DType::F32 },
            )
        }
        _ => {
            let (x, y) = (a.to_i64(), b.to_i64());
            let r = match op {
                Bin::Add => x.wrapping_add(y),
                Bin::Sub => x.wrapping_sub(y),
                _ => x.wrapping_mul(y),
            };
            cast(Scalar::Int(r), dtype)
        }
    }
}

fn same(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::Float(x), Scalar::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

fn run_binary(op: Bin, a: &Tensor, b: &Tensor) -> strata_tensor::Result<Tensor> {
    match op {
        Bin::Add => a.add(b),
        Bin::Sub => a.sub(b),
        Bin::Mul => a.mul(b),
        Bin::Div => a.div(b),
        Bin::Lt => a.lt(b),
        Bin::Eq => a.eq(b),
    }
}

/// A broadcastable partner shape: a suffix of `shape` with some dims set to 1.
fn partner(shape: &[usize], mask: u8, drop: usize) -> Vec<usize> {
    let drop = drop.min(shape.len() - 1);
    shape[drop..]
        .iter()
        .enumerate()
        .map(|(i, &s)| if mask >> i & 1 == 1 { 1 } else { s })
        .collect()
}

proptest! {
    // About a fifth of the drawn cases are rejected (bool operands of ops that
    // refuse them): a long run (PROPTEST_CASES) must not hit the reject limit.
    #![proptest_config(ProptestConfig { cases: 96, max_global_rejects: 1 << 20, ..ProptestConfig::default() })]

    #[test]
    fn binary_ops_match_reference(s in spec(3), op in 0..6usize, mask in any::<u8>(), drop in 0..3usize, seed in any::<u64>()) {
        let op = [Bin::Add, Bin::Sub, Bin::Mul, Bin::Div, Bin::Lt, Bin::Eq][op];
        prop_assume!(!(s.dtype == DType::Bool && matches!(op, Bin::Sub | Bin::Div)));
        let (a, _) = build(&s);
        let bshape = partner(&s.shape, mask, drop);
        let bn: usize = bshape.iter().product();
        let b = Tensor::from_scalars(&values(bn, s.dtype, seed), &bshape, s.dtype, s.device).unwrap();
        // Through a transposed copy as well, when b has two dims or more.
        let b = if b.ndim() >= 2 { b.transpose(-1, -2).unwrap().contiguous().unwrap().transpose(-1, -2).unwrap() } else { b };
        let out = run_binary(op, &a, &b).unwrap();
        let (av, bv, ov) = (a.to_scalars().unwrap(), b.to_scalars().unwrap(), out.to_scalars().unwrap());
        prop_assert_eq!(out.shape(), a.shape());
        for (k, got) in ov.iter().enumerate() {
            let idx = multi_index(k, a.shape());
            let want = reference(op, av[k], bv[broadcast_pos(&idx, &bshape)], s.dtype);
            prop_assert!(same(*got, want), "{op:?} {:?} at {idx:?}: got {got:?} want {want:?}", s.dtype);
        }
    }

    #[test]
    fn in_place_ops_write_only_the_view(s in spec(3), op in 0..3usize, mask in any::<u8>(), seed in any::<u64>()) {
        let op = [Bin::Add, Bin::Mul, Bin::Sub][op];
        prop_assume!(!(s.dtype == DType::Bool && matches!(op, Bin::Sub)));
        let (a, base) = build(&s);
        let before = base.to_scalars().unwrap();
        let av = a.to_scalars().unwrap();
        let bshape = partner(&s.shape, mask, 0);
        let bn: usize = bshape.iter().product();
        let b = Tensor::from_scalars(&values(bn, s.dtype, seed), &bshape, s.dtype, s.device).unwrap();
        let v0 = a.version();
        match op {
            Bin::Add => a.add_(&b),
            Bin::Mul => a.mul_(&b),
            _ => a.sub_(&b),
        }.unwrap();
        prop_assert_eq!(a.version(), v0 + 1);
        let bv = b.to_scalars().unwrap();
        let got = a.to_scalars().unwrap();
        for (k, g) in got.iter().enumerate() {
            let idx = multi_index(k, a.shape());
            let want = reference(op, av[k], bv[broadcast_pos(&idx, &bshape)], s.dtype);
            prop_assert!(same(*g, want));
        }
        // Elements of the base outside the view are untouched: count changes.
        let after = base.to_scalars().unwrap();
        let changed = before.iter().zip(&after).filter(|(x, y)| !same(**x, **y)).count();
        let changed_in_view = av.iter().zip(&got).filter(|(x, y)| !same(**x, **y)).count();
        prop_assert_eq!(changed, changed_in_view);
    }

    #[test]
    fn copy_converts_between_any_layouts_and_dtypes(src in spec(3), dt in 0..8usize, perm_dst in any::<bool>()) {
        let (s, _) = build(&src);
        let dtype = DTYPES[dt];
        let dst = if perm_dst && s.ndim() >= 2 {
            let mut sh = s.shape().to_vec();
            sh.swap(0, 1);
            Tensor::zeros(&sh, dtype, src.device).unwrap().transpose(0, 1).unwrap()
        } else {
            Tensor::zeros(s.shape(), dtype, src.device).unwrap()
        };
        dst.copy_(&s).unwrap();
        let (sv, dv) = (s.to_scalars().unwrap(), dst.to_scalars().unwrap());
        for (x, y) in sv.iter().zip(&dv) {
            prop_assert!(same(cast(*x, dtype), *y), "{x:?} -> {dtype}: {y:?}");
        }
        // contiguous() and to_dtype agree with the copy.
        prop_assert_eq!(s.to_dtype(dtype).unwrap().to_scalars().unwrap().len(), dv.len());
        prop_assert_eq!(s.contiguous().unwrap().to_scalars().unwrap(), sv);
    }

    #[test]
    fn unary_ops_match_reference(s in spec(3), op in 0..4usize) {
        let (a, _) = build(&s);
        prop_assume!(s.dtype != DType::Bool);
        let av = a.to_scalars().unwrap();
        let (out, f): (Tensor, Box<dyn Fn(Scalar) -> Scalar>) = match op {
            0 => (a.neg().unwrap(), Box::new(|x: Scalar| match x {
                Scalar::Int(i) => cast(Scalar::Int(-i), s.dtype),
                _ => Scalar::Float(-x.to_f64()),
            })),
            1 => (a.relu().unwrap(), Box::new(|x: Scalar| match x {
                Scalar::Int(i) => Scalar::Int(i.max(0)),
                _ => Scalar::Float(x.to_f64().max(0.0)),
            })),
            2 => (a.clamp(Some(1), Some(3)).unwrap(), Box::new(|x: Scalar| match x {
                Scalar::Int(i) => Scalar::Int(i.clamp(1, 3)),
                _ => Scalar::Float(x.to_f64().clamp(1.0, 3.0)),
            })),
            _ => {
                prop_assume!(s.dtype.is_float());
                // exp is computed at f32/f64 precision then rounded once.
                let dt = s.dtype;
                (a.exp().unwrap(), Box::new(move |x: Scalar| {
                    let e = if dt == DType::F64 { x.to_f64().exp() } else { (x.to_f64() as f32).exp() as f64 };
                    cast(Scalar::Float(e), dt)
                }))
            }
        };
        for (x, y) in av.iter().zip(out.to_scalars().unwrap()) {
            prop_assert!(same(f(*x), y), "{op} {:?}: {x:?} -> {y:?}", s.dtype);
        }
    }

    #[test]
    fn reductions_match_reference(s in spec(3), dim in 0..3i64, keep in any::<bool>()) {
        let (a, _) = build(&s);
        let dim = dim % a.ndim() as i64;
        let d = dim as usize;
        let av = a.to_scalars().unwrap();
        let shape = a.shape().to_vec();
        let sum = a.sum(Some(&[dim]), keep).unwrap();
        let (mx, imx) = a.max_dim(dim, keep).unwrap();
        let mut out_shape = shape.clone();
        out_shape[d] = 1;
        let expect_shape: Vec<usize> = if keep { out_shape.clone() } else {
            shape.iter().enumerate().filter(|&(i, _)| i != d).map(|(_, &x)| x).collect()
        };
        prop_assert_eq!(sum.shape(), expect_shape.as_slice());
        let (sv, mv, iv) = (sum.to_scalars().unwrap(), mx.to_scalars().unwrap(), imx.to_vec::<i64>().unwrap());
        for o in 0..sv.len() {
            let mut idx = multi_index(o, &out_shape);
            let mut acc = 0.0f64;
            let mut best: Option<(f64, usize)> = None;
            for j in 0..shape[d] {
                idx[d] = j;
                let k = idx.iter().zip(&shape).fold(0, |p, (&i, &n)| p * n + i);
                let x = av[k].to_f64();
                acc += x;
                if best.is_none_or(|(b, _)| x > b) {
                    best = Some((x, j));
                }
            }
            prop_assert_eq!(sv[o].to_f64(), acc);
            prop_assert_eq!(mv[o].to_f64(), best.unwrap().0);
            prop_assert_eq!(iv[o], best.unwrap().1 as i64);
        }
        let argmax = a.argmax(None, false);
        if s.dtype == DType::Bool {
            prop_assert!(argmax.is_err());
        } else {
            let k = argmax.unwrap().item::<i64>().unwrap() as usize;
            let m = av.iter().map(|x| x.to_f64()).fold(f64::MIN, f64::max);
            prop_assert_eq!(av[k].to_f64(), m);
            prop_assert!(av[..k].iter().all(|x| x.to_f64() < m));
        }
    }

    #[test]
    fn matmul_matches_reference(m in 1..6usize, k in 0..6usize, n in 1..6usize, dt in 0..4usize, ta in any::<bool>(), tb in any::<bool>(), seed in any::<u64>(), dev in 0..devices().len()) {
        let device = devices()[dev];
        let dtype = [DType::F32, DType::F64, DType::I64, DType::BF16][dt];
        let mk = |r: usize, c: usize, t: bool, seed: u64| {
            if t {
                Tensor::from_scalars(&values(r * c, dtype, seed), &[c, r], dtype, device).unwrap().t().unwrap()
            } else {
                Tensor::from_scalars(&values(r * c, dtype, seed), &[r, c], dtype, device).unwrap()
            }
        };
        let (a, b) = (mk(m, k, ta, seed), mk(k, n, tb, seed ^ 0x55));
        let c = a.matmul(&b).unwrap();
        prop_assert_eq!(c.shape(), &[m, n]);
        let (av, bv, cv) = (a.to_scalars().unwrap(), b.to_scalars().unwrap(), c.to_scalars().unwrap());
        for i in 0..m {
            for j in 0..n {
                let want: f64 = (0..k).map(|p| av[i * k + p].to_f64() * bv[p * n + j].to_f64()).sum();
                prop_assert_eq!(cv[i * n + j].to_f64(), cast(Scalar::Float(want), dtype).to_f64());
            }
        }
    }

    #[test]
    fn where_addcmul_mean_min_match_reference(s in spec(3), mask in any::<u8>(), seed in any::<u64>(), dim in 0..3i64) {
        let (a, _) = build(&s);
        let bshape = partner(&s.shape, mask, 0);
        let bn: usize = bshape.iter().product();
        let b = Tensor::from_scalars(&values(bn, s.dtype, seed), &bshape, s.dtype, s.device).unwrap();
        let (av, bv) = (a.to_scalars().unwrap(), b.to_scalars().unwrap());
        // where(a < b, a, b) is the element-wise minimum.
        let w = Tensor::where_cond(&a.lt(&b).unwrap(), &a, &b).unwrap();
        for (k, got) in w.to_scalars().unwrap().iter().enumerate() {
            let y = bv[broadcast_pos(&multi_index(k, a.shape()), &bshape)];
            let want = if av[k].to_f64() < y.to_f64() { av[k] } else { y };
            prop_assert!(same(*got, want));
        }
        if s.dtype != DType::Bool {
            // a + 2 * a * b, in place on a fresh copy, rounded once per element.
            let x = a.deep_clone().unwrap();
            x.addcmul_(&a, &b, 2).unwrap();
            for (k, got) in x.to_scalars().unwrap().iter().enumerate() {
                let y = bv[broadcast_pos(&multi_index(k, a.shape()), &bshape)];
                let prod = 2.0 * av[k].to_f64() * y.to_f64();
                let want = if s.dtype.is_float() {
                    Scalar::Float(av[k].to_f64() + prod).cast_to(s.dtype)
                } else {
                    Scalar::Int((av[k].to_f64() + prod) as i64).cast_to(s.dtype)
                };
                prop_assert!(same(*got, want), "addcmul {:?}: {got:?} vs {want:?}", s.dtype);
            }
        }
        // mean (floats) and min along a dim.
        let d = (dim % a.ndim() as i64) as usize;
        let shape = a.shape().to_vec();
        let mut out_shape = shape.clone();
        out_shape[d] = 1;
        let mn = a.min_dim(d as i64, true).unwrap().0.to_scalars().unwrap();
        let mean = s.dtype.is_float().then(|| a.mean(Some(&[d as i64]), true).unwrap().to_scalars().unwrap());
        prop_assert_eq!(a.mean(None, false).is_ok(), s.dtype.is_float());
        for (o, m) in mn.iter().enumerate() {
            let mut idx = multi_index(o, &out_shape);
            let mut vals = Vec::new();
            for j in 0..shape[d] {
                idx[d] = j;
                vals.push(av[idx.iter().zip(&shape).fold(0, |p, (&i, &n)| p * n + i)].to_f64());
            }
            prop_assert_eq!(m.to_f64(), vals.iter().copied().fold(f64::MAX, f64::min));
            if let Some(mean) = &mean {
                let want = Scalar::Float(vals.iter().sum::<f64>() / vals.len() as f64).cast_to(s.dtype);
                prop_assert!(same(mean[o], want), "mean {:?}: {:?} vs {want:?}", s.dtype, mean[o]);
            }
        }
    }

    #[test]
    fn expanded_operands_and_outputs(s in spec(2), n in 1..4usize) {
        let (a, _) = build(&s);
        let mut target: Vec<i64> = vec![n as i64];
        target.extend(a.shape().iter().map(|&x| x as i64));
        let e = a.expand(&target).unwrap();
        // A new leading dim: stride 0, but for size 1, where PyTorch gives
        // the next dim's size times its stride (0 for a 0-d tensor).
        let lead = if n == 1 && a.ndim() > 0 { a.shape()[0] * a.strides()[0] } else { 0 };
        prop_assert_eq!(e.strides()[0], lead);
        // Reading through stride 0 repeats the block.
        let ev = e.to_scalars().unwrap();
        let av = a.to_scalars().unwrap();
        for (k, v) in ev.iter().enumerate() {
            prop_assert!(same(*v, av[k % av.len()]));
        }
        // Writing into an expanded tensor is refused (unless filling).
        if n > 1 {
            prop_assert!(e.add_(Scalar::Int(1)).is_err());
        }
        prop_assert!(e.zero_().is_ok());
        prop_assert!(a.to_scalars().unwrap().iter().all(|x| x.to_f64() == 0.0));
    }
}

#[test]
fn element_trait_is_exercised() {
    // Guard that the dtype list above covers every dtype.
    assert_eq!(DTYPES.len(), 8);
    assert_eq!(<f32 as Element>::DTYPE, DType::F32);
}

/// Large operands take the parallel and tiled paths (with ragged tile edges);
/// check them against the same reference, in several dtypes.
#[test]
fn large_transposed_and_stepped_ops_match_reference() {
    for (dtype, seed) in [
        (DType::F32, 1u64),
        (DType::F64, 2),
        (DType::U8, 3),
        (DType::F16, 4),
        (DType::I64, 5),
    ] {
        let (r, c) = (301usize, 517usize);
        let a =
            Tensor::from_scalars(&values(r * c, dtype, seed), &[r, c], dtype, Device::Cpu).unwrap();
        let b = Tensor::from_scalars(
            &values(r * c, dtype, seed + 10),
            &[c, r],
            dtype,
            Device::Cpu,
        )
        .unwrap();
        let bt = b.t().unwrap();
        let av = a.to_scalars().unwrap();
        let btv = bt.to_scalars().unwrap();
        // a += b^T (tiled), out-of-place a * b^T, and b^T made contiguous.
        let prod = a.mul(&bt).unwrap();
        a.add_(&bt).unwrap();
        let got = a.to_scalars().unwrap();
        let pv = prod.to_scalars().unwrap();
        for k in 0..r * c {
            assert!(
                same(got[k], reference(Bin::Add, av[k], btv[k], dtype)),
                "{dtype} add at {k}"
            );
            assert!(
                same(pv[k], reference(Bin::Mul, av[k], btv[k], dtype)),
                "{dtype} mul at {k}"
            );
        }
        // Reductions over the transposed view (parallel over outputs).
        if dtype.is_float() || dtype == DType::I64 {
            let sums = bt.sum(Some(&[0]), false).unwrap().to_scalars().unwrap();
            let (amax, argm) = bt.max_dim(1, false).unwrap();
            let (amax, argm) = (amax.to_scalars().unwrap(), argm.to_vec::<i64>().unwrap());
            for j in 0..c {
                let col: Vec<f64> = (0..r).map(|i| btv[i * c + j].to_f64()).collect();
                let want = Scalar::Float(col.iter().sum()).cast_to(if dtype.is_float() {
                    dtype
                } else {
                    DType::F64
                });
                assert_eq!(sums[j].to_f64(), want.to_f64(), "{dtype} column sum {j}");
            }
            for i in 0..r {
                let row: Vec<f64> = (0..c).map(|j| btv[i * c + j].to_f64()).collect();
                let m = row.iter().copied().fold(f64::MIN, f64::max);
                assert_eq!(amax[i].to_f64(), m);
                assert_eq!(argm[i] as usize, row.iter().position(|&x| x == m).unwrap());
            }
        }
        let ct = bt.contiguous().unwrap();
        assert!(ct.is_contiguous());
        assert_eq!(ct.to_scalars().unwrap(), btv);
        // Every other column of both operands, in place (the stride-2 loop).
        let c2 = Tensor::from_scalars(
            &values(r * c, dtype, seed + 20),
            &[r, c],
            dtype,
            Device::Cpu,
        )
        .unwrap();
        let (x, y) = (
            a.slice(1, None, None, 2).unwrap(),
            c2.slice(1, None, None, 2).unwrap(),
        );
        let (xv, yv) = (x.to_scalars().unwrap(), y.to_scalars().unwrap());
        x.add_(&y).unwrap();
        for (k, g) in x.to_scalars().unwrap().iter().enumerate() {
            assert!(
                same(*g, reference(Bin::Add, xv[k], yv[k], dtype)),
                "{dtype} step-2 add at {k}"
            );
        }
        // Stepped columns, in place, leave the skipped columns alone.
        let a2 = a.slice(1, Some(1), None, 2).unwrap();
        let b2 = bt.slice(1, Some(1), None, 2).unwrap();
        let before = a.to_scalars().unwrap();
        let (a2v, b2v) = (a2.to_scalars().unwrap(), b2.to_scalars().unwrap());
        a2.sub_(&b2).ok();
        if dtype != DType::Bool {
            let after = a2.to_scalars().unwrap();
            for k in 0..after.len() {
                assert!(same(after[k], reference(Bin::Sub, a2v[k], b2v[k], dtype)));
            }
            let full = a.to_scalars().unwrap();
            for k in (0..r * c).filter(|k| k % c % 2 == 0) {
                assert!(same(full[k], before[k]), "skipped column changed at {k}");
            }
        }
    }
}
