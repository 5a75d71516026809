//! Session 27's sweep of hostile inputs to strata-tensor (after
//! `adversarial.rs`, `hostile_inputs*.rs` and `fuzz_ops_fixes.rs`). Each
//! test asserts the typed error or PyTorch's values.
//!
//! Defects these tests found (fixed with them):
//!
//! * `allclose` compared integer tensors in f64: integers beyond 2^53 that
//!   round to the same f64 (2^53 + 1 and 2^53) were "close" even with zero
//!   tolerances; the difference and equality of integers are now exact (and
//!   zero tolerances are an equality check, as PyTorch's `isclose`).

use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], CPU).unwrap()
}

#[test]
fn allclose_of_integers_beyond_2_pow_53_is_exact() {
    let big = 1i64 << 53;
    let (a, b) = (i64s(&[big + 1, 7]), i64s(&[big, 7]));
    assert!(!a.allclose(&b, 0.0, 0.0).unwrap(), "they differ by 1");
    assert!(!a.allclose(&b, 0.0, 0.5).unwrap(), "|diff| = 1 > 0.5");
    assert!(a.allclose(&b, 0.0, 1.0).unwrap(), "|diff| = 1 <= 1");
    assert!(a.allclose(&a, 0.0, 0.0).unwrap());
    // i64::MAX and i64::MAX - 1 round to the same f64 (2^63).
    let (m, m1) = (i64s(&[i64::MAX]), i64s(&[i64::MAX - 1]));
    assert!(!m.allclose(&m1, 0.0, 0.0).unwrap());
    assert!(!m.allclose(&m1, 0.0, 0.25).unwrap());
    // The relative tolerance scales |other| (2^60 * 2^-60 = 1).
    let (p, q) = (i64s(&[(1 << 60) + 1]), i64s(&[1 << 60]));
    assert!(p.allclose(&q, 2f64.powi(-60), 0.0).unwrap());
    assert!(!p.allclose(&q, 2f64.powi(-62), 0.0).unwrap());
    // i32 against i64 promotes to i64; u8 and bool still compare.
    let i = Tensor::from_slice(&[3i32, -4], &[2], CPU).unwrap();
    assert!(i.allclose(&i64s(&[3, -4]), 0.0, 0.0).unwrap());
    assert!(!i.allclose(&i64s(&[3, -5]), 0.0, 0.5).unwrap());
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
    // Broadcasting and its error, and mixed float/int.
    assert!(f(&[2.0, 2.0]).allclose(&f(&[2.0]), 0.0, 0.0).unwrap());
    assert!(f(&[1.0, 2.0])
        .allclose(&f(&[1.0, 2.0, 3.0]), 0.0, 0.0)
        .is_err());
    assert!(f(&[3.0]).allclose(&i64s(&[3]), 0.0, 0.0).unwrap());
    let h = f(&[1.0]).to_dtype(DType::F16).unwrap();
    assert!(h.allclose(&f(&[1.0005]), 1e-3, 0.0).unwrap());
}
