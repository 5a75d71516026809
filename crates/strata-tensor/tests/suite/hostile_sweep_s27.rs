//! Session 27's sweep of hostile inputs to strata-tensor (after
//! `adversarial.rs`, `hostile_inputs*.rs` and `fuzz_ops_fixes.rs`). Each
//! test asserts the typed error or PyTorch's values.
//!
//! Defects these tests found (fixed with them):
//!
//! * `allclose` compared integer tensors in f64: integers beyond 2^53 that
//!   round to the same f64 (2^53 + 1 and 2^53) were "close" even with zero
//!   tolerances; zero tolerances are now an equality check, as PyTorch's
//!   `isclose`. (Session 38: with nonzero tolerances PyTorch forms the
//!   inequality in f32, and strata now does too; see the test.)
//! * `x.scatter_add_(d, idx, &x)` (src, or index, the output itself) ran as
//!   if src had been copied first; PyTorch 2.15 refuses it ("some elements of
//!   the input tensor and the written-to tensor refer to a single memory
//!   location"), and so does strata now, with `TensorError::Overlap`, the
//!   output unchanged.
//! * `TorchCpuGenerator::discard(u64::MAX)` stepped MT19937 one draw at a
//!   time for centuries; more than `MAX_DISCARD` (2^36) draws is now a typed
//!   error that leaves the generator as it was.

use strata_tensor::torch_random::TorchCpuGenerator;
use strata_tensor::{DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], CPU).unwrap()
}

/// Session 38 replaced this test's expectations with PyTorch 2.15's: its
/// isclose compares integer tensors exactly only for equality (and with zero
/// tolerances), and forms `|a - b| <= atol + rtol |b|` after converting
/// both to f32 (its default float dtype). Mixed dtypes are an error.
#[test]
fn allclose_of_integers_matches_pytorch() {
    let big = 1i64 << 53;
    let (a, b) = (i64s(&[big + 1, 7]), i64s(&[big, 7]));
    // torch.allclose(a, b, 0, 0) False; atol 0.5: True (equal in f32);
    // atol 1: True; a with a: True.
    assert!(!a.allclose(&b, 0.0, 0.0).unwrap(), "they differ by 1");
    assert!(a.allclose(&b, 0.0, 0.5).unwrap(), "equal in f32");
    assert!(a.allclose(&b, 0.0, 1.0).unwrap());
    assert!(a.allclose(&a, 0.0, 0.0).unwrap());
    // i64::MAX and i64::MAX - 1: unequal; with atol 0.25 close (both 2^63
    // in f32).
    let (m, m1) = (i64s(&[i64::MAX]), i64s(&[i64::MAX - 1]));
    assert!(!m.allclose(&m1, 0.0, 0.0).unwrap());
    assert!(m.allclose(&m1, 0.0, 0.25).unwrap());
    // 2^60 + 1 and 2^60 are one f32: close with rtol 2^-60 and 2^-62.
    let (p, q) = (i64s(&[(1 << 60) + 1]), i64s(&[1 << 60]));
    assert!(p.allclose(&q, 2f64.powi(-60), 0.0).unwrap());
    assert!(p.allclose(&q, 2f64.powi(-62), 0.0).unwrap());
    // 2^30 + 100 rounds to 2^30 + 128 in f32: not close with atol 99 or
    // 127.9, close with 128.
    let (r, s) = (i64s(&[(1 << 30) + 100]), i64s(&[1 << 30]));
    assert!(!r.allclose(&s, 0.0, 99.0).unwrap());
    assert!(!r.allclose(&s, 0.0, 127.9).unwrap());
    assert!(r.allclose(&s, 0.0, 128.0).unwrap());
    // i32 against i64: "Int did not match Long".
    let i = Tensor::from_slice(&[3i32, -4], &[2], CPU).unwrap();
    assert!(matches!(
        i.allclose(&i64s(&[3, -4]), 0.0, 0.0),
        Err(TensorError::DType { .. })
    ));
    let i5 = Tensor::from_slice(&[3i32, -5], &[2], CPU).unwrap();
    assert!(!i.allclose(&i5, 0.0, 0.5).unwrap());
    assert!(i.allclose(&i5, 0.0, 1.0).unwrap());
    let u = Tensor::from_slice(&[1u8, 250], &[2], CPU).unwrap();
    assert!(u.allclose(&u, 0.0, 0.0).unwrap());
    assert!(!u
        .allclose(
            &Tensor::from_slice(&[2u8, 250], &[2], CPU).unwrap(),
            0.0,
            0.5
        )
        .unwrap());
    let t = Tensor::from_slice(&[true, false], &[2], CPU).unwrap();
    assert!(t.allclose(&t, 1e-5, 1e-8).unwrap());
    assert!(!t
        .allclose(
            &Tensor::from_slice(&[true, true], &[2], CPU).unwrap(),
            0.1,
            0.1
        )
        .unwrap());
}

#[test]
fn allclose_of_floats_is_unchanged() {
    let f = |v: &[f32]| Tensor::from_slice(v, &[v.len()], CPU).unwrap();
    let a = f(&[1.0, f32::INFINITY, -0.0, 100.0]);
    let b = f(&[1.0, f32::INFINITY, 0.0, 100.001]);
    assert!(!a.allclose(&b, 0.0, 0.0).unwrap(), "100 != 100.001");
    assert!(a.allclose(&b, 1e-5, 0.0).unwrap());
    assert!(!f(&[f32::NAN]).allclose(&f(&[f32::NAN]), 0.0, 0.0).unwrap());
    assert!(!f(&[f32::INFINITY])
        .allclose(&f(&[f32::NEG_INFINITY]), 1.0, 1.0)
        .unwrap());
    assert!(!f(&[f32::INFINITY]).allclose(&f(&[1e38]), 1.0, 1.0).unwrap());
    // Broadcasting and its error; mixed float/int and f16/f32 are errors
    // (session 38: PyTorch's "Float did not match Long").
    assert!(f(&[2.0, 2.0]).allclose(&f(&[2.0]), 0.0, 0.0).unwrap());
    assert!(f(&[1.0, 2.0])
        .allclose(&f(&[1.0, 2.0, 3.0]), 0.0, 0.0)
        .is_err());
    assert!(f(&[3.0]).allclose(&i64s(&[3]), 0.0, 0.0).is_err());
    let h = f(&[1.0]).to_dtype(DType::F16).unwrap();
    assert!(h.allclose(&f(&[1.0005]), 1e-3, 0.0).is_err());
    let h2 = f(&[1.0005]).to_dtype(DType::F16).unwrap();
    assert!(h.allclose(&h2, 1e-3, 0.0).unwrap());
}

#[test]
fn scatter_add_into_itself_is_refused_as_pytorch_refuses_it() {
    let f32s = |v: &[f32]| Tensor::from_slice(v, &[v.len()], CPU).unwrap();
    // src is the output (full overlap).
    let x = f32s(&[1.0, 2.0, 3.0]);
    let idx = i64s(&[0, 1, 2]);
    let e = x.scatter_add_(0, &idx, &x).unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
    assert_eq!(x.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    // src a part of the output's storage (partial overlap).
    let base = f32s(&[1.0, 2.0, 3.0, 4.0]);
    let out = base.narrow(0, 0, 3).unwrap();
    let src = base.narrow(0, 1, 3).unwrap();
    let e = out.scatter_add_(0, &idx, &src).unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
    assert_eq!(base.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    // index is the output (an i64 tensor scattered into by its own values).
    let i = i64s(&[0, 1, 2]);
    let e = i.scatter_add_(0, &i, &i64s(&[1, 1, 1])).unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
    assert_eq!(i.to_vec::<i64>().unwrap(), [0, 1, 2]);
    // Disjoint parts of one storage are fine: PyTorch's values.
    let base = f32s(&[1.0, 2.0, 3.0, 10.0, 20.0, 30.0]);
    let (out, src) = (base.narrow(0, 0, 3).unwrap(), base.narrow(0, 3, 3).unwrap());
    out.scatter_add_(0, &i64s(&[2, 2, 0]), &src).unwrap();
    assert_eq!(
        base.to_vec::<f32>().unwrap(),
        [31.0, 2.0, 33.0, 10.0, 20.0, 30.0]
    );
    // The out-of-place form reads its own copy: allowed, as in PyTorch.
    let x = f32s(&[1.0, 2.0, 3.0]);
    let y = x.scatter_add(0, &idx, &x).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
}

#[test]
fn discarding_beyond_the_bound_is_refused_and_leaves_the_generator_alone() {
    let mut g = TorchCpuGenerator::new(7);
    let mut reference = TorchCpuGenerator::new(7);
    let e = g.discard(u64::MAX).unwrap_err();
    assert!(matches!(e, TensorError::SizeOverflow { .. }), "{e}");
    let e = g.discard(TorchCpuGenerator::MAX_DISCARD + 1).unwrap_err();
    assert!(matches!(e, TensorError::SizeOverflow { .. }), "{e}");
    assert_eq!(g.random(), reference.random());
    // Within the bound it skips exactly that many draws.
    g.discard(1000).unwrap();
    for _ in 0..1000 {
        reference.random();
    }
    assert_eq!(g.random64(), reference.random64());
}
