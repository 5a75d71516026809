//! Session 45's sweep of hostile inputs to strata-autograd. Every expected
//! value is PyTorch 2.15's (CPU), with the Python beside each test.
//!
//! Changed with these tests (PyTorch gives an answer, so strata gives it
//! instead of refusing):
//!
//! * `clip_grad_norm_` (and `ClipGradNorm::new`) refused a negative or NaN
//!   `max_norm` with a `Hyperparameter` error. PyTorch takes any
//!   `max_norm`: the coefficient `max_norm / (norm + 1e-6)`, clamped to at
//!   most 1, flips and scales the gradients for a negative one and makes
//!   them NaN for NaN; the returned norm is the gradients' either way.
//! * `clip_grad_value_` refused a negative or NaN `clip_value`. PyTorch's
//!   `clamp_min_(-c)` then `clamp_max_(c)` sets every element that is not
//!   NaN to a negative `c`, and every element to NaN for NaN.
//!
//!
//! Also checked here: `Var::pow_scalar` of f16 and bf16 variables, whose
//! forward and backward (`g * e * x^(e - 1)`) now take the exponent in the
//! variable's dtype as PyTorch does (strata-tensor's `hostile_sweep_s45.rs`
//! has the tensor op's fix).
//!
//! (The checkpoint's generator on failure, also session 45, is tested in
//! `tests/hostile_sweep_s30.rs`, the binary that serialises generator use.)

use crate::pytorch_fixture::{host, tensor};
use strata_autograd::{clip_grad_norm_, clip_grad_value_, ClipGradNorm, Var};
use strata_tensor::{DType, Device, Tensor};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

/// A parameter of `dtype` whose gradient is `g`.
fn with_grad(g: &[f64], dtype: DType) -> Var {
    let p = Var::parameter(Tensor::zeros(&[g.len()], dtype, Device::Cpu).unwrap()).unwrap();
    p.set_grad(Some(tensor(g, dtype))).unwrap();
    p
}

fn grad(p: &Var) -> Vec<f64> {
    host(&p.grad().unwrap())
}

/// Bit for bit, NaN matching NaN (the sign of zero included).
fn same(got: &[f64], want: &[f64], what: &str) {
    let ok = crate::pytorch_fixture::same(got, want);
    assert!(ok, "{what}: got {got:?}, PyTorch {want:?}");
}

#[test]
fn clip_grad_norm_takes_negative_and_nan_max_norms_as_pytorch() {
    // for m in [-1, -0.5, nan, -inf, -0.0]:
    //   p.grad = torch.tensor([3., -4.]); n = clip_grad_norm_([p], m)
    // -> n 5.0 each; grads [-0.5999999046325684, 0.7999998331069946],
    //    [-0.2999999523162842, 0.3999999165534973], [nan, nan],
    //    [-inf, inf], [-0.0, 0.0].
    let f32s = |v: [f64; 2]| v.map(|x| x as f32 as f64);
    for (m, want) in [
        (-1.0, [-0.599_999_904_632_568_4, 0.799_999_833_106_994_6]),
        (-0.5, [-0.299_999_952_316_284_2, 0.399_999_916_553_497_3]),
        (NAN, [NAN, NAN]),
        (-INF, [-INF, INF]),
        (-0.0, [-0.0, 0.0]),
    ] {
        let p = with_grad(&[3.0, -4.0], DType::F32);
        let n = clip_grad_norm_(std::slice::from_ref(&p), m).unwrap();
        assert_eq!((n.dtype(), n.item::<f64>().unwrap()), (DType::F32, 5.0));
        same(&grad(&p), &f32s(want), &format!("max_norm {m}"));
    }
    // The other dtypes, max_norm -1: f16 [-0.599609375, 0.7998046875],
    // bf16 [-0.6015625, 0.80078125], f64 [-0.599999880000024,
    // 0.799999840000032]; NaN in f16: [nan, nan]; the norm 5 in the dtype.
    for (dtype, m, want) in [
        (DType::F16, -1.0, [-0.599_609_375, 0.799_804_687_5]),
        (DType::BF16, -1.0, [-0.601_562_5, 0.800_781_25]),
        (
            DType::F64,
            -1.0,
            [-0.599_999_880_000_024, 0.799_999_840_000_032],
        ),
        (DType::F16, NAN, [NAN, NAN]),
    ] {
        let p = with_grad(&[3.0, -4.0], dtype);
        let n = clip_grad_norm_(std::slice::from_ref(&p), m).unwrap();
        assert_eq!((n.dtype(), n.item::<f64>().unwrap()), (dtype, 5.0));
        same(&grad(&p), &want, &format!("{dtype} max_norm {m}"));
    }
    // An infinite gradient with max_norm -inf: norm inf, grads [nan, nan]
    // (-inf / inf); zero gradients with -1: norm 0, grads [-0.0, -0.0].
    let p = with_grad(&[INF, -4.0], DType::F32);
    let n = clip_grad_norm_(std::slice::from_ref(&p), -INF).unwrap();
    assert_eq!(n.item::<f64>().unwrap(), INF);
    same(&grad(&p), &[NAN, NAN], "inf gradient, max_norm -inf");
    let p = with_grad(&[0.0, 0.0], DType::F32);
    let n = clip_grad_norm_(std::slice::from_ref(&p), -1.0).unwrap();
    assert_eq!(n.item::<f64>().unwrap(), 0.0);
    same(&grad(&p), &[-0.0, -0.0], "zero gradient, max_norm -1");
    // ClipGradNorm takes them too; error_if_nonfinite looks at the norm
    // (finite here), not at max_norm:
    // clip_grad_norm_([p], nan, error_if_nonfinite=True) -> 5.0, [nan, nan].
    let p = with_grad(&[3.0, -4.0], DType::F32);
    let c = ClipGradNorm::new(NAN)
        .unwrap()
        .with_error_if_nonfinite(true);
    assert_eq!(
        c.clip(std::slice::from_ref(&p))
            .unwrap()
            .item::<f32>()
            .unwrap(),
        5.0
    );
    same(&grad(&p), &[NAN, NAN], "error_if_nonfinite, max_norm nan");
}

#[test]
fn clip_grad_value_takes_negative_and_nan_values_as_pytorch() {
    // for c in [-1, nan, -inf, -0.5]:
    //   p.grad = torch.tensor([3., -4., 0.25, nan]); clip_grad_value_([p], c)
    // -> [-1, -1, -1, nan], [nan] * 4, [-inf, -inf, -inf, nan],
    //    [-0.5, -0.5, -0.5, nan]
    for (c, want) in [
        (-1.0, [-1.0, -1.0, -1.0, NAN]),
        (NAN, [NAN; 4]),
        (-INF, [-INF, -INF, -INF, NAN]),
        (-0.5, [-0.5, -0.5, -0.5, NAN]),
    ] {
        let p = with_grad(&[3.0, -4.0, 0.25, NAN], DType::F32);
        clip_grad_value_(std::slice::from_ref(&p), c).unwrap();
        same(&grad(&p), &want, &format!("clip_value {c}"));
    }
    // f16 with -1: [-1, -1, -1]; bf16 with -0.1: the bound rounded to bf16,
    // [-0.10009765625] * 3.
    let p = with_grad(&[3.0, -4.0, 0.25], DType::F16);
    clip_grad_value_(std::slice::from_ref(&p), -1.0).unwrap();
    same(&grad(&p), &[-1.0; 3], "f16 clip_value -1");
    let p = with_grad(&[3.0, -4.0, 0.25], DType::BF16);
    clip_grad_value_(std::slice::from_ref(&p), -0.1).unwrap();
    same(&grad(&p), &[-0.100_097_656_25; 3], "bf16 clip_value -0.1");
}

#[test]
fn half_pow_scalar_forward_and_backward_are_pytorchs() {
    // x = torch.tensor([1.5, 3.0, 0.25, 99.0], dtype=dt, requires_grad=True)
    // y = x.pow(2.2); y.backward(torch.ones_like(y))
    // f16:  y [2.439453125, 11.203125, 0.04742431640625, 24480.0]
    //       grad [3.580078125, 8.2265625, 0.416748046875, 546.5]
    // bf16: y [2.4375, 11.25, 0.047119140625, 24960.0]
    //       grad [3.578125, 8.25, 0.4140625, 556.0]
    for (dtype, y_want, g_want) in [
        (
            DType::F16,
            [2.439_453_125, 11.203_125, 0.047_424_316_406_25, 24480.0],
            [3.580_078_125, 8.226_562_5, 0.416_748_046_875, 546.5],
        ),
        (
            DType::BF16,
            [2.4375, 11.25, 0.047_119_140_625, 24960.0],
            [3.578_125, 8.25, 0.414_062_5, 556.0],
        ),
    ] {
        let x = Var::parameter(
            Tensor::from_slice(&[1.5f64, 3.0, 0.25, 99.0], &[4], Device::Cpu)
                .unwrap()
                .to_dtype(dtype)
                .unwrap(),
        )
        .unwrap();
        let y = x.pow_scalar(2.2).unwrap();
        same(
            &y.data().to_vec_as::<f64>().unwrap(),
            &y_want,
            &format!("{dtype} y"),
        );
        y.backward_with(
            Some(&Tensor::ones(&[4], dtype, Device::Cpu).unwrap()),
            false,
        )
        .unwrap();
        same(&grad(&x), &g_want, &format!("{dtype} grad"));
    }
}
