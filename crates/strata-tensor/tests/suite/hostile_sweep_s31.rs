//! Session 31's sweep of hostile inputs to strata-tensor (after
//! `hostile_sweep_s30.rs`). Each test asserts PyTorch's answer (worked out
//! by hand from PyTorch 2.x's kernels, step by step in IEEE arithmetic, and
//! checked against PyTorch 2.15 on the CPU), or the typed error and the
//! state left behind.
//!
//! Defects these tests found (fixed with them):
//!
//! * `layer_norm` without a bias wrote -0.0 where PyTorch's CPU kernel
//!   writes +0.0: PyTorch ends with `* gamma + beta`, beta 0 when absent,
//!   and `-0.0 + 0.0` is `+0.0`; its backward's zeros (PyTorch's CPU formula
//!   `rstd g + b x + c`) likewise;
//! * `layer_norm` on the CPU gave a row of -0.0 the mean -0.0 (Rust's
//!   float `sum` starts from -0.0), PyTorch +0.0: with a bias of -0.0 its
//!   output was +0.0 where PyTorch's is -0.0;
//! * `layer_norm` on the CPU added eps in f64 for f32/f16/bf16 inputs;
//!   PyTorch adds it in f32, where an eps beyond f32's range is inf (rstd 0,
//!   every output 0).

use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

/// The f32 values of `t` as bit patterns, so that -0.0 and +0.0 differ.
fn bits32(t: &Tensor) -> Vec<u32> {
    t.to_dtype(DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

const P0: u32 = 0x0000_0000; // +0.0
const N0: u32 = 0x8000_0000; // -0.0

// ------------------------------------------------------------- layer_norm

#[test]
fn layer_norm_without_bias_writes_pytorchs_positive_zeros() {
    // eps = inf: rstd = 1 / sqrt(var + inf) = 0, so (x - mean) * rstd is
    // -0.0 where x < mean and +0.0 elsewhere. PyTorch's CPU kernel then
    // computes `* gamma + beta` with gamma 1 and beta 0 when absent:
    // -0.0 * 1 + 0.0 = +0.0 everywhere.
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let x = Tensor::from_slice(&[1.0f64, 2., 4., 0., -1., 3.], &[2, 3], CPU)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let y = x.layer_norm(&[3], None, None, f64::INFINITY).unwrap();
        assert_eq!(bits32(&y), vec![P0; 6], "{dtype} no weight, no bias");
        // A weight alone: (-0.0 * w) + 0.0 = +0.0 whatever w's sign.
        let w = Tensor::from_slice(&[1.0f64, -2.0, 0.5], &[3], CPU)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let y = x.layer_norm(&[3], Some(&w), None, f64::INFINITY).unwrap();
        assert_eq!(bits32(&y), vec![P0; 6], "{dtype} weight only");
    }
}

#[test]
fn layer_norm_with_a_negative_zero_bias_keeps_the_products_sign() {
    // beta = -0.0 given: -0.0 + -0.0 = -0.0 where x < mean, +0.0 + -0.0 =
    // +0.0 where x >= mean (PyTorch: [-0., -0., 0.], [-0., -0., 0.]).
    let x = Tensor::from_slice(&[1.0f32, 2., 4., 0., -1., 3.], &[2, 3], CPU).unwrap();
    let b = Tensor::from_slice(&[-0.0f32; 3], &[3], CPU).unwrap();
    let y = x.layer_norm(&[3], None, Some(&b), f64::INFINITY).unwrap();
    assert_eq!(bits32(&y), vec![N0, N0, P0, N0, N0, P0]);
    // And a bias of +0.0: all +0.0.
    let b = Tensor::zeros(&[3], DType::F32, CPU).unwrap();
    let y = x.layer_norm(&[3], None, Some(&b), f64::INFINITY).unwrap();
    assert_eq!(bits32(&y), vec![P0; 6]);
}

#[test]
fn layer_norm_adds_eps_in_f32_for_f32_inputs() {
    // PyTorch casts eps to the input's computation type: 1e39 is inf in
    // f32, so rstd is 0 and F.layer_norm(x, [3], eps=1e39) is all 0.0 for
    // f32, f16 and bf16 inputs. In f64 it is finite: rstd = 1/sqrt(var +
    // 1e39), and (1 - 7/3) * rstd < 0.
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let x = Tensor::from_slice(&[1.0f32, 2., 4.], &[1, 3], CPU)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let (y, mean, rstd) = x.layer_norm_forward(&[3], None, None, 1e39).unwrap();
        assert_eq!(bits32(&y), vec![P0; 3], "{dtype}");
        assert_eq!(rstd.to_vec::<f32>().unwrap(), vec![0.0], "{dtype}");
        if dtype == DType::F32 {
            assert_eq!(mean.to_vec::<f32>().unwrap(), vec![7.0f32 / 3.0]);
        }
    }
    let x = Tensor::from_slice(&[1.0f64, 2., 4.], &[1, 3], CPU).unwrap();
    let (y, _, rstd) = x.layer_norm_forward(&[3], None, None, 1e39).unwrap();
    let var = (16.0 / 9.0 + 1.0 / 9.0 + 25.0 / 9.0) / 3.0;
    let want_rstd = 1.0 / (var + 1e39f64).sqrt();
    let r = rstd.to_vec::<f64>().unwrap()[0];
    assert!(
        (r - want_rstd).abs() <= 1e-15 * want_rstd,
        "{r} vs {want_rstd}"
    );
    let y = y.to_vec::<f64>().unwrap();
    assert!((y[0] - (-4.0 / 3.0) * want_rstd).abs() <= 1e-14 * want_rstd);
}

#[test]
fn layer_norm_backward_zeros_have_pytorchs_signs() {
    // x = [-1, 2, 5] (mean 2), rstd 0 (eps = inf), dy = [-1, 4, -2], no
    // weight. PyTorch's CPU backward: ds = Σ dy x = -1, db = Σ dy = 1,
    // b = (db mean - ds) rstd³ / 3 = 3 * 0 = +0.0,
    // c = -b mean - db rstd / 3 = -0.0 - 0.0 = -0.0, and
    // dx = rstd dy + b x + c = [-0.0 + -0.0 + -0.0, 0.0 + 0.0 + -0.0,
    // -0.0 + 0.0 + -0.0] = [-0.0, +0.0, +0.0].
    for dtype in [DType::F32, DType::F64] {
        let x = Tensor::from_slice(&[-1.0f64, 2., 5.], &[1, 3], CPU)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let dy = Tensor::from_slice(&[-1.0f64, 4., -2.], &[1, 3], CPU)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let (y, mean, rstd) = x
            .layer_norm_forward(&[3], None, None, f64::INFINITY)
            .unwrap();
        assert_eq!(bits32(&y), vec![P0; 3]);
        let [dx, _, _] =
            Tensor::layer_norm_backward(&dy, &x, &mean, &rstd, None, &[3], [true, false, false])
                .unwrap();
        assert_eq!(bits32(&dx.unwrap()), vec![N0, P0, P0], "{dtype}");
        // With a weight of ones the same (gamma multiplies dy first).
        let w = Tensor::ones(&[3], dtype, CPU).unwrap();
        let [dx, dw, db] =
            Tensor::layer_norm_backward(&dy, &x, &mean, &rstd, Some(&w), &[3], [true; 3]).unwrap();
        assert_eq!(bits32(&dx.unwrap()), vec![N0, P0, P0], "{dtype}");
        // dgamma = Σ dy (rstd x - rstd mean) from a zeroed buffer: +0.0.
        assert_eq!(bits32(&dw.unwrap()), vec![P0; 3], "{dtype}");
        assert_eq!(
            db.unwrap()
                .to_dtype(DType::F64)
                .unwrap()
                .to_vec::<f64>()
                .unwrap(),
            vec![-1.0, 4.0, -2.0]
        );
    }
}

#[test]
fn layer_norm_of_a_row_of_negative_zeros_is_pytorchs() {
    // PyTorch: mean +0.0 (its sums start from +0.0), x - mean = -0.0,
    // times rstd, plus a bias of -0.0: -0.0 everywhere, for any eps.
    for eps in [1e-5, f64::INFINITY] {
        let x = Tensor::from_slice(&[-0.0f32; 3], &[1, 3], CPU).unwrap();
        let b = Tensor::from_slice(&[-0.0f32; 3], &[3], CPU).unwrap();
        let (y, mean, _) = x.layer_norm_forward(&[3], None, Some(&b), eps).unwrap();
        assert_eq!(bits32(&y), vec![N0; 3], "eps {eps}");
        assert_eq!(bits32(&mean), vec![P0], "eps {eps}");
    }
}
