//! Adversarial property suite: random calls of the public constructors, views
//! and ops with hostile arguments — huge and zero sizes, sizes whose product
//! overflows, extreme strides and offsets for `as_strided`, NaN/inf/huge
//! scalars, dtype mismatches, out-of-range dims and indices, devices that do
//! not exist — each asserting:
//!
//! * a typed error, or a correct result (checked against a reference where
//!   the result is cheap to compute, and always against the layout
//!   invariants: the view stays inside its storage, its element count fits
//!   an i64);
//! * no panic (`catch_unwind`);
//! * the tensors involved unchanged after an error;
//! * the allocator consistent (`check_consistency`) and nothing left
//!   allocated once the case's tensors are dropped.
//!
//! The CPU allocator of this test binary is capped at 256 MiB, so sizes that
//! fit the limits but not the cap exercise the typed out-of-memory path
//! without touching the machine's memory. Work over huge *views* (a sum over
//! 2^62 aliased elements is legitimate, just slow) is not attempted.
//!
//! `cargo test -p strata-tensor --release --test adversarial` runs a bounded
//! number of cases (a few seconds); for a longer run set `PROPTEST_CASES`,
//! e.g. `PROPTEST_CASES=20000 cargo test -p strata-tensor --release --test
//! adversarial`. A debug build (`cargo test -p strata-tensor --test
//! adversarial`) also catches arithmetic overflow panics.

use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use strata_alloc::driver::host::HostDriver;
use strata_alloc::{AllocatorConfig, CachingAllocator};
use strata_tensor::{DType, Device, RoundingMode, Scalar, Tensor, TensorError};

/// The cap on host memory for this binary.
const CAP: u64 = 256 << 20;

/// Work over more elements than this is not attempted (see the module docs).
const MAX_WORK: usize = 1 << 22;

/// Installs the capped CPU allocator once and serialises the tests (each one
/// checks that it leaves nothing allocated).
fn setup() -> std::sync::MutexGuard<'static, ()> {
    static INIT: OnceLock<Arc<CachingAllocator>> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    INIT.get_or_init(|| {
        let a = CachingAllocator::new(
            Arc::new(HostDriver::new(Some(CAP))),
            AllocatorConfig::default(),
        );
        strata_alloc::set_allocator(Arc::clone(&a));
        a
    });
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn cpu_allocator() -> Arc<CachingAllocator> {
    strata_alloc::allocator(Device::Cpu).unwrap()
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

/// A size: mostly small, often 0 or 1, sometimes huge or near the limits.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..5,
        1 => Just(1usize << 31),
        1 => Just(1usize << 32),
        1 => Just(1usize << 40),
        1 => Just(1usize << 62),
        1 => Just(i64::MAX as usize),
        1 => Just(usize::MAX),
        1 => any::<usize>(),
    ]
}

/// An i64 argument (dim, index, size, stride, offset): small, or extreme.
fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => -4i64..6,
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
        1 => Just(1i64 << 62),
        1 => Just(-(1i64 << 62)),
        1 => Just(1i64 << 32),
        1 => any::<i64>(),
    ]
}

fn scalar() -> impl Strategy<Value = Scalar> {
    prop_oneof![
        any::<bool>().prop_map(Scalar::Bool),
        int().prop_map(Scalar::Int),
        prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(1e39),
            Just(-70000.0),
            Just(65504.0),
            Just(2.7),
            Just(-0.5),
            Just(1e300),
            -10.0f64..10.0,
        ]
        .prop_map(Scalar::Float),
    ]
}

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DType::ALL.to_vec())
}

fn device() -> impl Strategy<Value = Device> {
    prop_oneof![8 => Just(Device::Cpu), 1 => Just(Device::Cuda(0)), 1 => Just(Device::Cuda(7))]
}

/// One hostile call.
#[derive(Debug, Clone)]
enum Call {
    Zeros(Vec<usize>, DType, Device),
    Full(Vec<usize>, Scalar, DType),
    Arange(Scalar, Scalar, Scalar, Option<DType>),
    Rand(Vec<usize>, DType, u64, bool),
    FromSlice(usize, Vec<usize>),
    View(Vec<i64>),
    Reshape(Vec<i64>),
    AsStrided(Vec<i64>, Vec<i64>, Option<i64>),
    Expand(Vec<i64>),
    Narrow(i64, i64, i64),
    Select(i64, i64),
    Slice(i64, Option<i64>, Option<i64>, i64),
    Transpose(i64, i64),
    Permute(Vec<i64>),
    Unsqueeze(i64),
    SqueezeDims(Vec<i64>),
    Flatten(i64, i64),
    Fill(Scalar),
    Clamp(Option<Scalar>, Option<Scalar>, bool),
    Binary(u8, Scalar, bool),
    BinaryTensor(u8, DType, bool),
    Sum(Option<Vec<i64>>, bool),
    Mean(Option<Vec<i64>>),
    MaxDim(i64, bool),
    Argmax(Option<i64>),
    Matmul(Vec<usize>, DType),
    ToDtype(DType),
    ToDevice(Device),
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(size(), 0..4)
}

fn ints(max: usize) -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(int(), 0..max)
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (shape(), dtype(), device()).prop_map(|(s, d, v)| Call::Zeros(s, d, v)),
        (shape(), scalar(), dtype()).prop_map(|(s, v, d)| Call::Full(s, v, d)),
        (scalar(), scalar(), scalar(), prop::option::of(dtype()))
            .prop_map(|(a, b, c, d)| Call::Arange(a, b, c, d)),
        (shape(), dtype(), any::<u64>(), any::<bool>())
            .prop_map(|(s, d, seed, n)| Call::Rand(s, d, seed, n)),
        (0usize..7, shape()).prop_map(|(n, s)| Call::FromSlice(n, s)),
        ints(4).prop_map(Call::View),
        ints(4).prop_map(Call::Reshape),
        (ints(4), ints(4), prop::option::of(int())).prop_map(|(a, b, c)| Call::AsStrided(a, b, c)),
        ints(5).prop_map(Call::Expand),
        (int(), int(), int()).prop_map(|(a, b, c)| Call::Narrow(a, b, c)),
        (int(), int()).prop_map(|(a, b)| Call::Select(a, b)),
        (
            int(),
            prop::option::of(int()),
            prop::option::of(int()),
            int()
        )
            .prop_map(|(a, b, c, d)| Call::Slice(a, b, c, d)),
        (int(), int()).prop_map(|(a, b)| Call::Transpose(a, b)),
        ints(4).prop_map(Call::Permute),
        int().prop_map(Call::Unsqueeze),
        ints(3).prop_map(Call::SqueezeDims),
        (int(), int()).prop_map(|(a, b)| Call::Flatten(a, b)),
        scalar().prop_map(Call::Fill),
        (
            prop::option::of(scalar()),
            prop::option::of(scalar()),
            any::<bool>()
        )
            .prop_map(|(a, b, c)| Call::Clamp(a, b, c)),
        (0u8..6, scalar(), any::<bool>()).prop_map(|(o, s, i)| Call::Binary(o, s, i)),
        (0u8..6, dtype(), any::<bool>()).prop_map(|(o, d, i)| Call::BinaryTensor(o, d, i)),
        (prop::option::of(ints(3)), any::<bool>()).prop_map(|(d, k)| Call::Sum(d, k)),
        prop::option::of(ints(3)).prop_map(Call::Mean),
        (int(), any::<bool>()).prop_map(|(d, k)| Call::MaxDim(d, k)),
        prop::option::of(int()).prop_map(Call::Argmax),
        (shape(), dtype()).prop_map(|(s, d)| Call::Matmul(s, d)),
        dtype().prop_map(Call::ToDtype),
        device().prop_map(Call::ToDevice),
    ]
}

/// What the tensors of a case looked like before a call.
fn snapshot(ts: &[&Tensor]) -> Vec<Vec<Scalar>> {
    ts.iter().map(|t| t.to_scalars().unwrap()).collect()
}

fn same(a: &[Vec<Scalar>], b: &[Vec<Scalar>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| match (p, q) {
                    (Scalar::Float(p), Scalar::Float(q)) => {
                        p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())
                    }
                    _ => p == q,
                })
        })
}

/// Layout invariants every tensor must satisfy.
fn check_layout(t: &Tensor) {
    let l = t.layout();
    let n = strata_tensor::shape::checked_numel("check", t.shape());
    assert!(n.is_ok(), "a tensor whose element count overflows: {t:?}");
    let extent = l.checked_extent();
    assert!(extent.is_some(), "a view whose extent overflows: {t:?}");
    assert!(
        extent.unwrap() <= t.storage_len(),
        "a view outside its storage: {t:?}, storage {}",
        t.storage_len()
    );
    if t.numel() <= MAX_WORK {
        assert_eq!(t.to_scalars().unwrap().len(), t.numel());
    }
}

fn binary(
    t: &Tensor,
    op: u8,
    b: strata_tensor::Operand,
    inplace: bool,
) -> Result<Tensor, TensorError> {
    match (op, inplace) {
        (0, false) => t.add(b),
        (1, false) => t.sub(b),
        (2, false) => t.mul(b),
        (3, false) => t.div(b),
        (4, false) => t.div_mode(b, RoundingMode::Floor),
        (5, false) => t.eq(b),
        (0, true) => t.add_(b),
        (1, true) => t.sub_(b),
        (2, true) => t.mul_(b),
        (3, true) => t.div_(b),
        (4, true) => t.div_mode_(b, RoundingMode::Trunc),
        _ => t.ge(b),
    }
}

/// Runs `call` on `x`; `Ok(Some(t))` is a new tensor to continue from.
fn run(x: &Tensor, call: &Call) -> Result<Option<Tensor>, TensorError> {
    let small = |t: &Tensor| t.numel() <= MAX_WORK;
    Ok(Some(match call {
        Call::Zeros(s, d, v) => {
            let t = Tensor::zeros(s, *d, *v)?;
            if small(&t) {
                assert!(t.to_scalars()?.iter().all(|v| v.to_f64() == 0.0));
            }
            t
        }
        Call::Full(s, v, d) => {
            let t = Tensor::full(s, *v, *d, Device::Cpu)?;
            assert!(v.fits(*d), "full accepted {v} for {d}");
            if small(&t) {
                let want = v.cast_to(*d);
                assert!(same(&[t.to_scalars()?], &[vec![want; t.numel()]]));
            }
            t
        }
        Call::Arange(a, b, c, d) => {
            let t = Tensor::arange(*a, *b, *c, *d, Device::Cpu)?;
            let (s, e, st) = (a.to_f64(), b.to_f64(), c.to_f64());
            assert!(s.is_finite() && e.is_finite() && st != 0.0);
            if small(&t)
                && t.dtype().is_float()
                && t.dtype() != DType::F16
                && t.dtype() != DType::BF16
            {
                let v = t.to_scalars()?;
                for (i, got) in v.iter().enumerate().take(64) {
                    let want = Scalar::Float(s + i as f64 * st).cast_to(t.dtype());
                    assert!(same(&[vec![*got]], &[vec![want]]), "arange[{i}]");
                }
            }
            t
        }
        Call::Rand(s, d, seed, normal) => {
            let t = if *normal {
                Tensor::randn(s, *d, *seed, Device::Cpu)?
            } else {
                Tensor::rand(s, *d, *seed, Device::Cpu)?
            };
            assert!(d.is_float());
            if small(&t) && !*normal {
                assert!(t
                    .to_scalars()?
                    .iter()
                    .all(|v| (0.0..1.0).contains(&v.to_f64())));
            }
            t
        }
        Call::FromSlice(n, s) => {
            let data: Vec<f32> = (0..*n).map(|i| i as f32).collect();
            let t = Tensor::from_slice(&data, s, Device::Cpu)?;
            assert_eq!(t.to_vec::<f32>()?, data);
            t
        }
        Call::View(s) => x.view(s)?,
        Call::Reshape(s) => x.reshape(s)?,
        Call::AsStrided(s, st, o) => {
            let t = x.as_strided(s, st, *o)?;
            // Reference: every element at offset + sum(i_d * stride_d) of the storage.
            if small(&t) && x.is_contiguous() && x.offset() == 0 && x.numel() == x.storage_len() {
                let base = x.to_scalars()?;
                let got = t.to_scalars()?;
                let l = t.layout();
                let idx: Vec<usize> = l.indices().collect();
                let want: Vec<Scalar> = idx.iter().map(|&i| base[i]).collect();
                assert!(same(&[got], &[want]));
            }
            t
        }
        Call::Expand(s) => x.expand(s)?,
        Call::Narrow(d, s, l) => x.narrow(*d, *s, *l)?,
        Call::Select(d, i) => x.select(*d, *i)?,
        Call::Slice(d, s, e, st) => x.slice(*d, *s, *e, *st)?,
        Call::Transpose(a, b) => x.transpose(*a, *b)?,
        Call::Permute(p) => x.permute(p)?,
        Call::Unsqueeze(d) => x.unsqueeze(*d)?,
        Call::SqueezeDims(d) => x.squeeze_dims(d)?,
        Call::Flatten(a, b) => x.flatten(*a, *b)?,
        Call::Fill(v) => {
            x.fill_(*v)?;
            assert!(v.fits(x.dtype()), "fill_ accepted {v} for {}", x.dtype());
            if small(x) {
                let want = v.cast_to(x.dtype());
                assert!(same(&[x.to_scalars()?], &[vec![want; x.numel()]]));
            }
            return Ok(None);
        }
        Call::Clamp(lo, hi, inplace) => {
            if !small(x) {
                return Ok(None);
            }
            if *inplace {
                x.clamp_(*lo, *hi)?;
                return Ok(None);
            }
            x.clamp(*lo, *hi)?
        }
        Call::Binary(op, s, inplace) => {
            if !small(x) {
                return Ok(None);
            }
            let r = binary(x, *op, (*s).into(), *inplace)?;
            if *inplace {
                return Ok(None);
            }
            r
        }
        Call::BinaryTensor(op, d, inplace) => {
            if !small(x) {
                return Ok(None);
            }
            let other = Tensor::ones(&[1], *d, Device::Cpu)?;
            let r = binary(x, *op, (&other).into(), *inplace)?;
            if *inplace {
                return Ok(None);
            }
            r
        }
        Call::Sum(d, k) => {
            if !small(x) {
                return Ok(None);
            }
            x.sum(d.as_deref(), *k)?
        }
        Call::Mean(d) => {
            if !small(x) {
                return Ok(None);
            }
            x.mean(d.as_deref(), false)?
        }
        Call::MaxDim(d, k) => {
            if !small(x) {
                return Ok(None);
            }
            x.max_dim(*d, *k)?.0
        }
        Call::Argmax(d) => {
            if !small(x) {
                return Ok(None);
            }
            x.argmax(*d, false)?
        }
        Call::Matmul(s, d) => {
            let b = Tensor::zeros(s, *d, Device::Cpu)?;
            if !small(x) || !small(&b) {
                return Ok(None);
            }
            x.matmul(&b)?
        }
        Call::ToDtype(d) => {
            if !small(x) {
                return Ok(None);
            }
            x.to_dtype(*d)?
        }
        Call::ToDevice(d) => {
            if !small(x) {
                return Ok(None);
            }
            x.to(*d)?
        }
    }))
}

/// Errors a hostile call may give: every typed error.
fn typed(e: &TensorError) -> bool {
    !e.to_string().is_empty()
}

fn check_case(base_shape: &[usize], dt: DType, calls: &[Call]) {
    let alloc = cpu_allocator();
    let before = alloc.memory_allocated();
    {
        let n: usize = base_shape.iter().product();
        let base = Tensor::arange(0, n as i64, 1, None, Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        let base = base
            .view(&base_shape.iter().map(|&s| s as i64).collect::<Vec<_>>())
            .unwrap();
        let mut cur = base.clone();
        for c in calls {
            let watched: Vec<&Tensor> = if cur.numel() <= MAX_WORK {
                vec![&base, &cur]
            } else {
                vec![&base]
            };
            let snap = snapshot(&watched);
            let r = catch_unwind(AssertUnwindSafe(|| run(&cur, c)));
            match r {
                Err(p) => {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    panic!("{c:?} on {cur:?} panicked: {msg}");
                }
                Ok(Err(e)) => {
                    assert!(typed(&e));
                    assert!(
                        same(&snapshot(&watched), &snap),
                        "{c:?} failed ({e}) but changed the tensor"
                    );
                }
                Ok(Ok(Some(t))) => {
                    check_layout(&t);
                    cur = t;
                }
                Ok(Ok(None)) => {}
            }
            check_layout(&cur);
            alloc.check_consistency().unwrap();
        }
    }
    alloc.check_consistency().unwrap();
    assert_eq!(
        alloc.memory_allocated(),
        before,
        "memory left allocated after {calls:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn hostile_calls_give_typed_errors_or_correct_results(
        base_shape in prop::collection::vec(0usize..4, 0..4),
        dt in dtype(),
        calls in prop::collection::vec(call(), 1..5),
    ) {
        let _g = setup();
        check_case(&base_shape, dt, &calls);
    }
}

/// The examples of the issue, one by one.
#[test]
fn the_issue_examples_are_typed_errors() {
    let _g = setup();
    let alloc = cpu_allocator();
    let before = alloc.memory_allocated();
    let cpu = Device::Cpu;
    let overflow = |r: Result<Tensor, TensorError>| {
        assert!(matches!(r, Err(TensorError::SizeOverflow { .. })), "{r:?}")
    };
    overflow(Tensor::zeros(&[1 << 62], DType::F32, cpu));
    overflow(Tensor::zeros(&[1 << 32, 1 << 32], DType::F32, cpu));
    overflow(Tensor::from_slice::<f32>(&[], &[1 << 32, 1 << 32], cpu));
    let a = Tensor::ones(&[1, 1], DType::F32, cpu).unwrap();
    overflow(a.expand(&[1 << 40, 1 << 40]));
    let s = Tensor::zeros(&[16], DType::F32, cpu).unwrap();
    overflow(s.as_strided(&[3], &[1 << 62], Some(0)));
    overflow(s.as_strided(&[2, 2], &[i64::MAX, 1], Some(0)));
    assert!(matches!(
        s.as_strided(&[2], &[1 << 40], Some(0)),
        Err(TensorError::OutOfBounds { .. })
    ));
    // Sizes within the limits that the (capped) allocator cannot hold: its
    // typed out-of-memory error, before any host buffer is built.
    for r in [
        Tensor::zeros(&[1_000_000_000_000_000], DType::F64, cpu),
        Tensor::rand(&[1_000_000_000_000_000], DType::F64, 0, cpu),
        Tensor::randn(&[1_000_000_000_000_000], DType::F32, 0, cpu),
        Tensor::arange(0, 1_000_000_000_000_000i64, 1, None, cpu),
    ] {
        assert!(matches!(r, Err(TensorError::Alloc(_))), "{r:?}");
    }
    for (s, e, st) in [
        (0.0, f64::INFINITY, 1.0),
        (f64::NAN, 1.0, 1.0),
        (0.0, f64::NAN, 1.0),
        (0.0, 1.0, f64::NAN),
    ] {
        let r = Tensor::arange(s, e, st, None, cpu);
        assert!(matches!(r, Err(TensorError::Value { .. })), "{r:?}");
    }
    let r = Tensor::arange(i64::MIN, i64::MAX, 1, None, cpu);
    assert!(matches!(r, Err(TensorError::Value { .. })), "{r:?}");
    drop((a, s));
    alloc.check_consistency().unwrap();
    assert_eq!(alloc.memory_allocated(), before);
}

/// rand/randn/arange fill in place and agree with the documented streams.
#[test]
fn generated_tensors_follow_the_documented_streams() {
    let _g = setup();
    let cpu = Device::Cpu;
    let u = Tensor::rand(&[3, 5], DType::F64, 11, cpu)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let prefix = Tensor::rand(&[4], DType::F64, 11, cpu)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_eq!(&u[..4], &prefix[..]);
    assert!(u.iter().all(|v| (0.0..1.0).contains(v)));
    let other = Tensor::rand(&[4], DType::F64, 12, cpu)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    assert_ne!(prefix, other);
    // f32 values are exactly the f64 values at 24 bits.
    let f = Tensor::rand(&[1000], DType::F32, 5, cpu)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(f
        .iter()
        .all(|&v| (v * (1 << 24) as f32).fract() == 0.0 && (0.0..1.0).contains(&v)));
    // Statistics of a large normal sample.
    let n = Tensor::randn(&[200_000], DType::F64, 3, cpu)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let mean = n.iter().sum::<f64>() / n.len() as f64;
    let var = n.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n.len() as f64;
    assert!(mean.abs() < 0.01, "{mean}");
    assert!((var - 1.0).abs() < 0.02, "{var}");
    // Large enough to be filled in parallel chunks: the same as element by element.
    let big = Tensor::arange(0, 300_000, 1, Some(DType::F32), cpu).unwrap();
    let v = big.to_vec::<f32>().unwrap();
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as f32));
}
