//! Adversarial property suite at the autograd level: the recorded ops
//! (softmax/log_softmax, cumsum, var/std, logsumexp, layer_norm,
//! cross_entropy, nll_loss, mse_loss, dropout, index_select, gather,
//! scatter_add, embedding, masked_fill, where, triu/tril, cat, stack, split,
//! chunk, pow with hostile exponents) and the `nn` modules (`Linear`,
//! `Embedding`, `LayerNorm`) with hostile arguments, each asserting:
//!
//! * a typed error, or a result whose backward (of its sum) is a typed error
//!   or gives every input a gradient of the input's shape and dtype
//!   (checked against a counted reference for `index_select`, whose
//!   gradient is the number of times each row was picked);
//! * no panic in the forward or the backward (`catch_unwind`);
//! * the input unchanged after an error;
//! * the allocator consistent and nothing left allocated once the case's
//!   tensors and graph are dropped.
//!
//! The CPU allocator of this binary is capped at 256 MiB (hostile sizes hit
//! its typed out-of-memory error, never the machine's memory).
//!
//! `cargo test -p strata-autograd --release --test adversarial` runs 300
//! cases; `PROPTEST_CASES=2000 cargo test -p strata-autograd --release
//! --test adversarial` is the longer run (seconds); a debug build also
//! reports arithmetic overflow.

use proptest::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use strata_alloc::driver::host::HostDriver;
use strata_alloc::{AllocatorConfig, CachingAllocator};
use strata_autograd::nn::{Embedding, LayerNorm, Linear};
use strata_autograd::{AutogradError, Var};
use strata_tensor::{CrossEntropyArgs, DType, Device, Reduction, Scalar, Tensor};

const CAP: u64 = 256 << 20;
const CPU: Device = Device::Cpu;

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

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// An i64 argument: small, or extreme.
fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => -3i64..4,
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
        1 => Just(1i64 << 40),
        1 => any::<i64>(),
    ]
}

fn real() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.0f64..1.0,
        1 => Just(1.0),
        1 => Just(-0.5),
        1 => Just(2.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(-1e300),
    ]
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![8 => 0usize..4, 1 => Just(1usize << 40), 1 => Just(usize::MAX)]
}

fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![
        6 => Just(DType::F32),
        3 => Just(DType::F64),
        1 => prop::sample::select(DType::ALL.to_vec()),
    ]
}

fn index_dtype() -> impl Strategy<Value = DType> {
    prop_oneof![6 => Just(DType::I64), 1 => Just(DType::I32), 1 => prop::sample::select(DType::ALL.to_vec())]
}

fn idxs() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(prop_oneof![8 => 0i64..3, 1 => int()], 0..5)
}

#[derive(Debug, Clone)]
enum Op {
    Softmax(i64, bool),
    Cumsum(i64),
    VarStd(Option<Vec<i64>>, f64, bool),
    Logsumexp(Vec<i64>, bool),
    LayerNorm(Option<Vec<usize>>, f64),
    CrossEntropy(Vec<i64>, i64, f64, u8, bool),
    NllLoss(Vec<i64>, i64, u8),
    MseLoss(u8, bool),
    Dropout(f64, bool),
    IndexSelect(i64, Vec<i64>, DType),
    Gather(i64, Vec<i64>, DType),
    ScatterAdd(i64, Vec<i64>, DType),
    Embedding(Vec<i64>, DType, Option<i64>),
    MaskedFill(u64, f64),
    Where(u64),
    Tri(i64, bool),
    Cat(i64, usize),
    Stack(i64, usize),
    Split(i64, i64),
    Chunk(i64, i64),
    PowScalar(f64),
    Pow,
    LinearModule(usize, usize, bool),
    EmbeddingModule(usize, usize, Vec<i64>),
    LayerNormModule(Vec<usize>, f64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (int(), any::<bool>()).prop_map(|(d, l)| Op::Softmax(d, l)),
        int().prop_map(Op::Cumsum),
        (
            prop::option::of(prop::collection::vec(int(), 0..3)),
            real(),
            any::<bool>()
        )
            .prop_map(|(d, c, s)| Op::VarStd(d, c, s)),
        (prop::collection::vec(int(), 0..3), any::<bool>()).prop_map(|(d, k)| Op::Logsumexp(d, k)),
        (
            prop::option::of(prop::collection::vec(size(), 0..3)),
            prop_oneof![2 => Just(1e-5), 1 => real()]
        )
            .prop_map(|(s, e)| Op::LayerNorm(s, e)),
        (
            idxs(),
            prop_oneof![2 => Just(-100i64), 1 => int()],
            prop_oneof![1 => Just(0.0), 1 => real()],
            0u8..3,
            any::<bool>()
        )
            .prop_map(|(t, i, l, r, w)| Op::CrossEntropy(t, i, l, r, w)),
        (idxs(), prop_oneof![2 => Just(-100i64), 1 => int()], 0u8..3)
            .prop_map(|(t, i, r)| Op::NllLoss(t, i, r)),
        (0u8..3, any::<bool>()).prop_map(|(r, b)| Op::MseLoss(r, b)),
        (real(), any::<bool>()).prop_map(|(p, t)| Op::Dropout(p, t)),
        (int(), idxs(), index_dtype()).prop_map(|(d, i, t)| Op::IndexSelect(d, i, t)),
        (int(), idxs(), index_dtype()).prop_map(|(d, i, t)| Op::Gather(d, i, t)),
        (int(), idxs(), index_dtype()).prop_map(|(d, i, t)| Op::ScatterAdd(d, i, t)),
        (idxs(), index_dtype(), prop::option::of(int()))
            .prop_map(|(i, t, p)| Op::Embedding(i, t, p)),
        (any::<u64>(), real()).prop_map(|(m, v)| Op::MaskedFill(m, v)),
        any::<u64>().prop_map(Op::Where),
        (int(), any::<bool>()).prop_map(|(d, u)| Op::Tri(d, u)),
        (int(), 1usize..4).prop_map(|(d, n)| Op::Cat(d, n)),
        (int(), 1usize..4).prop_map(|(d, n)| Op::Stack(d, n)),
        (int(), int()).prop_map(|(s, d)| Op::Split(s, d)),
        (int(), int()).prop_map(|(c, d)| Op::Chunk(c, d)),
        real().prop_map(Op::PowScalar),
        Just(Op::Pow),
        (size(), size(), any::<bool>()).prop_map(|(i, o, b)| Op::LinearModule(i, o, b)),
        (size(), size(), idxs()).prop_map(|(n, d, i)| Op::EmbeddingModule(n, d, i)),
        (prop::collection::vec(size(), 0..3), real()).prop_map(|(s, e)| Op::LayerNormModule(s, e)),
    ]
}

fn sat(shape: &[usize]) -> usize {
    strata_tensor::shape::numel(shape)
}

/// An index tensor of `shape` holding `vals` cycled, cast to `dtype`.
fn index(vals: &[i64], shape: &[usize], dtype: DType) -> Result<Tensor, AutogradError> {
    let n = sat(shape);
    if n > 1 << 20 {
        return Ok(Tensor::zeros(shape, dtype, CPU)?);
    }
    let s: Vec<Scalar> = (0..n)
        .map(|i| Scalar::Int(vals.get(i % vals.len().max(1)).copied().unwrap_or(0)).cast_to(dtype))
        .collect();
    Ok(Tensor::from_scalars(&s, shape, dtype, CPU)?)
}

fn mask(bits: u64, shape: &[usize]) -> Result<Tensor, AutogradError> {
    let s: Vec<Scalar> = (0..sat(shape))
        .map(|i| Scalar::Bool(bits >> (i % 64) & 1 == 1))
        .collect();
    Ok(Tensor::from_scalars(&s, shape, DType::Bool, CPU)?)
}

fn reduction(k: u8) -> Reduction {
    match k {
        0 => Reduction::None,
        1 => Reduction::Mean,
        _ => Reduction::Sum,
    }
}

fn class_rows(x: &Var) -> (usize, Vec<usize>) {
    match x.ndim() {
        0 => (0, vec![]),
        1 => (x.shape()[0], vec![]),
        _ => (
            x.shape()[1],
            std::iter::once(x.shape()[0])
                .chain(x.shape()[2..].iter().copied())
                .collect(),
        ),
    }
}

/// Runs `op` on `x`; the outputs to differentiate (their sum's backward).
fn forward(x: &Var, op: &Op) -> Result<Vec<Var>, AutogradError> {
    Ok(match op {
        Op::Softmax(d, log) => vec![if *log {
            x.log_softmax(*d, None)?
        } else {
            x.softmax(*d, None)?
        }],
        Op::Cumsum(d) => vec![x.cumsum(*d, None)?],
        Op::VarStd(d, c, s) => vec![if *s {
            x.std(d.as_deref(), *c, false)?
        } else {
            x.var(d.as_deref(), *c, true)?
        }],
        Op::Logsumexp(d, k) => vec![x.logsumexp(d, *k)?],
        Op::LayerNorm(ns, eps) => {
            let ns = ns
                .clone()
                .unwrap_or_else(|| x.shape()[x.ndim().min(1)..].to_vec());
            let w = Var::parameter(Tensor::ones(&ns, x.dtype(), CPU)?)?;
            let b = Var::parameter(Tensor::zeros(&ns, x.dtype(), CPU)?)?;
            vec![x.layer_norm(&ns, Some(&w), Some(&b), *eps)?]
        }
        Op::CrossEntropy(t, ignore, ls, r, w) => {
            let (c, rows) = class_rows(x);
            let target = index(t, &rows, DType::I64)?;
            let weight = if *w {
                Some(Tensor::ones(&[c], x.dtype(), CPU)?)
            } else {
                None
            };
            let args = CrossEntropyArgs {
                weight: weight.as_ref(),
                ignore_index: *ignore,
                reduction: reduction(*r),
                label_smoothing: *ls,
            };
            vec![x.cross_entropy(&target, args)?]
        }
        Op::NllLoss(t, ignore, r) => {
            let (_, rows) = class_rows(x);
            let target = index(t, &rows, DType::I64)?;
            vec![x.nll_loss(&target, None, *ignore, reduction(*r))?]
        }
        Op::MseLoss(r, b) => {
            let shape: Vec<usize> = if *b { vec![1] } else { x.shape().to_vec() };
            let target = Var::new(Tensor::ones(&shape, x.dtype(), CPU)?);
            vec![x.mse_loss(&target, reduction(*r), None)?]
        }
        Op::Dropout(p, train) => vec![x.dropout(*p, *train)?],
        Op::IndexSelect(d, i, t) => {
            let idx = index(i, &[i.len()], *t)?;
            vec![x.index_select(*d, &idx)?]
        }
        Op::Gather(d, i, t) => {
            let idx = index(i, x.shape(), *t)?;
            vec![x.gather(*d, &idx)?]
        }
        Op::ScatterAdd(d, i, t) => {
            let idx = index(i, x.shape(), *t)?;
            let src = Var::parameter(Tensor::ones(x.shape(), x.dtype(), CPU)?)?;
            vec![x.scatter_add(*d, &idx, &src)?]
        }
        Op::Embedding(i, t, p) => {
            let idx = index(i, &[i.len()], *t)?;
            vec![x.embedding(&idx, *p)?]
        }
        Op::MaskedFill(bits, v) => vec![x.masked_fill(&mask(*bits, x.shape())?, *v)?],
        Op::Where(bits) => {
            let other = Var::parameter(Tensor::zeros(&[1], x.dtype(), CPU)?)?;
            vec![Var::where_cond(&mask(*bits, x.shape())?, x, &other)?]
        }
        Op::Tri(d, u) => vec![if *u { x.triu(*d)? } else { x.tril(*d)? }],
        Op::Cat(d, n) => vec![Var::cat(&vec![x; *n], *d)?],
        Op::Stack(d, n) => vec![Var::stack(&vec![x; *n], *d)?],
        Op::Split(s, d) => x.split(*s, *d)?,
        Op::Chunk(c, d) => x.chunk(*c, *d)?,
        Op::PowScalar(e) => vec![x.pow_scalar(*e)?],
        Op::Pow => vec![x.pow(x)?],
        Op::LinearModule(i, o, b) => {
            let l = Linear::new(*i, *o, *b, CPU)?;
            vec![l.forward(x)?]
        }
        Op::EmbeddingModule(n, d, i) => {
            let e = Embedding::new(*n, *d, CPU)?;
            vec![e.forward(&index(i, &[i.len()], DType::I64)?)?]
        }
        Op::LayerNormModule(s, eps) => {
            let l = LayerNorm::new(s, *eps, CPU)?;
            vec![l.forward(x)?]
        }
    })
}

/// The gradient of `sum(index_select(x, d, idx))`: each slice of x along
/// `d` gets the number of times it was picked.
/// The gradient `index_select` gives `x`: each element counts the times
/// its index along `d` was selected. The indices are those of an index
/// tensor of dtype `idt`: an i32 index holds each value wrapped to 32 bits
/// (`torch.tensor([1, 1, 2**40, 1]).to(torch.int32)` is `[1, 1, 0, 1]`).
fn index_select_grad(x: &Var, d: i64, vals: &[i64], idt: DType) -> Vec<f64> {
    let vals: Vec<i64> = vals
        .iter()
        .map(|&v| {
            if idt == DType::I32 {
                v as i32 as i64
            } else {
                v
            }
        })
        .collect();
    let n = x.ndim().max(1);
    let d = if d < 0 { d + n as i64 } else { d } as usize;
    let shape = if x.ndim() == 0 {
        vec![1]
    } else {
        x.shape().to_vec()
    };
    let inner: usize = shape[d + 1..].iter().product();
    let len = shape[d];
    (0..sat(&shape))
        .map(|i| {
            let k = (i / inner) % len;
            vals.iter().filter(|&&v| v == k as i64).count() as f64
        })
        .collect()
}

fn check(shape: &[usize], dt: DType, transpose: bool, op: &Op) {
    let before = strata_alloc::memory_allocated(CPU).unwrap();
    {
        let n = sat(shape) as i64;
        let base = Tensor::arange(0, n, 1, None, CPU)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
            .reshape(&shape.iter().map(|&s| s as i64).collect::<Vec<_>>())
            .unwrap();
        let base = if transpose && base.ndim() >= 2 {
            base.transpose(0, -1).unwrap()
        } else {
            base
        };
        let x = Var::new(base.clone());
        let float = dt.is_float();
        if float {
            x.requires_grad_(true).unwrap();
        }
        let snap = base.to_scalars().unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| -> Result<(), AutogradError> {
            let outs = forward(&x, op)?;
            let diff: Vec<&Var> = outs.iter().filter(|o| o.requires_grad()).collect();
            if diff.is_empty() {
                return Ok(());
            }
            let mut total: Option<Var> = None;
            for o in &diff {
                let s = o.sum(None, false)?.to_dtype(DType::F64)?;
                total = Some(match total {
                    None => s,
                    Some(t) => t.add(&s)?,
                });
            }
            total.unwrap().backward()?;
            if let Some(g) = x.grad() {
                assert_eq!(g.shape(), x.shape(), "grad shape after {op:?}");
                assert_eq!(g.dtype(), x.dtype(), "grad dtype after {op:?}");
                if let (Op::IndexSelect(d, vals, idt), 1) = (op, outs.len()) {
                    let got: Vec<f64> = g.to_scalars()?.iter().map(|s| s.to_f64()).collect();
                    assert_eq!(
                        got,
                        index_select_grad(&x, *d, vals, *idt),
                        "index_select grad"
                    );
                }
            }
            Ok(())
        }));
        match r {
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("{op:?} on {shape:?} {dt} panicked: {msg}");
            }
            Ok(Err(e)) => {
                if std::env::var_os("ADVERSARIAL_ERRORS").is_some() {
                    eprintln!("ERR {op:?}: {e}");
                }
                assert!(!e.to_string().is_empty());
                let now = base.to_scalars().unwrap();
                let same = now.len() == snap.len()
                    && now
                        .iter()
                        .zip(&snap)
                        .all(|(a, b)| a == b || (a.to_f64().is_nan() && b.to_f64().is_nan()));
                assert!(same, "{op:?} failed ({e}) but changed its input");
            }
            Ok(Ok(())) => {
                if std::env::var_os("ADVERSARIAL_ERRORS").is_some() {
                    eprintln!("OK {op:?}");
                }
            }
        }
    }
    let a = strata_alloc::allocator(CPU).unwrap();
    a.check_consistency().unwrap();
    assert_eq!(
        strata_alloc::memory_allocated(CPU).unwrap(),
        before,
        "memory left allocated after {op:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn hostile_recorded_ops_and_modules_give_typed_errors_or_gradients(
        shape in prop::collection::vec(0usize..4, 0..4),
        dt in dtype(),
        transpose in any::<bool>(),
        op in op(),
    ) {
        let _g = setup();
        check(&shape, dt, transpose, &op);
    }
}
