//! Analytic gradients against central finite differences (f64) for the ops of
//! issue 12 (element-wise math, softmax, log-softmax, cumsum), on random
//! shapes, with broadcasting and non-contiguous (transposed, narrowed)
//! inputs. Same harness as `gradcheck.rs`: `sum(f(x) * w)` with random `w`.

use proptest::prelude::*;
use strata_autograd::Var;
use strata_tensor::{DType, Device, GeluApprox, Tensor};

use crate::common;
use common::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn smooth_unary(m in 1usize..4, n in 1usize..5, seed in any::<u64>()) {
        let a = randn(&[m, n], seed);
        // On a transposed view (non-contiguous input to the op).
        gradcheck(vec![a.clone()], seed, |v| v[0].t()?.tanh());
        gradcheck(vec![a.clone()], seed, |v| v[0].sigmoid());
        gradcheck(vec![a.clone()], seed, |v| v[0].t()?.silu());
        gradcheck(vec![a.clone()], seed, |v| v[0].gelu(GeluApprox::None));
        gradcheck(vec![a.clone()], seed, |v| v[0].t()?.gelu(GeluApprox::Tanh));
        gradcheck(vec![a.clone()], seed, |v| v[0].sin());
        gradcheck(vec![a.clone()], seed, |v| v[0].t()?.cos());
        gradcheck(vec![a.clone()], seed, |v| v[0].erf());
        gradcheck(vec![a.clone()], seed, |v| v[0].expm1());
        let p = rand_map(&[m, n], seed.wrapping_add(1), positive);
        gradcheck(vec![p.clone()], seed, |v| v[0].t()?.sqrt());
        gradcheck(vec![p.clone()], seed, |v| v[0].rsqrt());
        gradcheck(vec![p.clone()], seed, |v| v[0].log1p());
        gradcheck(vec![p], seed, |v| v[0].t()?.reciprocal());
        let z = rand_map(&[m, n], seed.wrapping_add(2), away_from_zero);
        gradcheck(vec![z.clone()], seed, |v| v[0].abs());
        // sign has a zero gradient; composed so the output requires grad.
        gradcheck(vec![z], seed, |v| v[0].sign()?.add(&v[0])?.mul(&v[0]));
    }

    #[test]
    fn pow_forms(m in 1usize..4, n in 1usize..4, k in 0usize..6, e in -2.5f64..2.5, seed in any::<u64>()) {
        let base = rand_map(&[m, n], seed, positive);
        gradcheck(vec![base.clone()], seed, move |v| v[0].pow_scalar(e));
        gradcheck(vec![base.clone()], seed, |v| v[0].pow_scalar(2));
        gradcheck(vec![base.clone()], seed, |v| v[0].t()?.pow_scalar(0.5));
        let ex = randn(&partner_shape(m, n, k), seed.wrapping_add(1));
        gradcheck(vec![base.clone(), ex.clone()], seed, |v| v[0].pow(&v[1]));
        gradcheck(vec![ex.clone()], seed, |v| Var::scalar_pow(2.5, &v[0]));
        // Exponent broadcast the other way round: base [k-shape], exponent [m, n].
        let b2 = rand_map(&partner_shape(m, n, k), seed.wrapping_add(2), positive);
        gradcheck(vec![b2, randn(&[m, n], seed.wrapping_add(3))], seed, |v| v[0].pow(&v[1]));
    }

    #[test]
    fn maximum_minimum(m in 1usize..4, n in 1usize..4, k in 0usize..6, seed in any::<u64>()) {
        // Ties are kinks: `a` and `b` take values in different classes
        // modulo 0.1, so every pair differs by 0.05 or more, far beyond the
        // finite differences' step (independent draws came within 4e-7 of
        // each other on seed 17092669781019509508).
        let a = rand_map(&[m, n], seed, |x| on_grid(x, 0.03));
        let b = rand_map(&partner_shape(m, n, k), seed.wrapping_add(1), |x| on_grid(x, 0.08));
        gradcheck(vec![a.clone(), b.clone()], seed, |v| v[0].maximum(&v[1]));
        gradcheck(vec![a.clone(), b.clone()], seed, |v| v[0].minimum(&v[1]));
        // The broadcast operand first, and a transposed (non-contiguous) one.
        gradcheck(vec![b, a.clone()], seed, |v| v[0].minimum(&v[1]));
        let at = rand_map(&[n, m], seed.wrapping_add(2), |x| on_grid(x, 0.08));
        gradcheck(vec![a, at], seed, |v| v[0].maximum(&v[1].t()?));
    }

    #[test]
    fn along_a_dim(m in 1usize..4, n in 1usize..4, p in 1usize..4, dim in -3i64..3, seed in any::<u64>()) {
        let a = randn(&[m, n, p], seed);
        gradcheck(vec![a.clone()], seed, move |v| v[0].softmax(dim, None));
        gradcheck(vec![a.clone()], seed, move |v| v[0].log_softmax(dim, None));
        gradcheck(vec![a.clone()], seed, move |v| v[0].cumsum(dim, None));
        // Non-contiguous inputs: a transposed and a narrowed view.
        gradcheck(vec![a.clone()], seed, move |v| v[0].transpose(0, 2)?.softmax(dim, None));
        gradcheck(vec![a.clone()], seed, move |v| v[0].transpose(1, 2)?.log_softmax(dim, None));
        let len = (n as i64).max(2) - 1;
        gradcheck(vec![a.clone()], seed, move |v| v[0].narrow(1, n as i64 - len, len)?.cumsum(dim, None));
        // Composition: softmax feeding a weighted log (attention-like).
        gradcheck(vec![a], seed, move |v| v[0].softmax(-1, None)?.mul(&v[0])?.log_softmax(0, None));
    }
}

/// `x` moved down to a multiple of 0.1, plus `offset` (in [0, 0.1)).
fn on_grid(x: f64, offset: f64) -> f64 {
    (x * 10.0).floor() / 10.0 + offset
}

#[test]
fn maximum_minimum_keep_apart_draws_that_nearly_tie() {
    // The draws of the seed that tied within the finite differences' step.
    let seed = 17092669781019509508u64;
    let a = rand_map(&[1, 1], seed, |x| on_grid(x, 0.03));
    let b = rand_map(&[1, 1], seed.wrapping_add(1), |x| on_grid(x, 0.08));
    let (a0, b0) = (a.to_vec::<f64>().unwrap()[0], b.to_vec::<f64>().unwrap()[0]);
    assert!((a0 - b0).abs() >= 0.049, "{a0} and {b0} nearly tie");
    gradcheck(vec![a.clone(), b.clone()], seed, |v| v[0].maximum(&v[1]));
    gradcheck(vec![a, b], seed, |v| v[0].minimum(&v[1]));
}

#[test]
fn saved_tensor_modified_in_place_is_an_error() {
    // softmax saves its output: modifying it in place invalidates backward.
    let x = Var::parameter(randn(&[2, 3], 1)).unwrap();
    let y = x.softmax(-1, None).unwrap();
    y.data().mul_(2.0).unwrap();
    let loss = y.sum(None, false).unwrap();
    assert!(
        loss.backward().is_err(),
        "a modified saved output must fail backward"
    );
    // sqrt saves its output too; sin saves its input.
    let x = Var::parameter(rand_map(&[3], 2, positive)).unwrap();
    let y = x.sqrt().unwrap();
    y.data().sqrt_().unwrap();
    assert!(y.sum(None, false).unwrap().backward().is_err());
    let x0 = Var::parameter(randn(&[3], 3)).unwrap();
    let h = x0.mul(1.0).unwrap();
    let y = h.sin().unwrap();
    h.data().cos_().unwrap();
    assert!(y.sum(None, false).unwrap().backward().is_err());
}

#[test]
fn softmax_with_dtype_returns_the_input_dtype_gradient() {
    let x = Var::parameter(Tensor::randn(&[2, 5], DType::F32, 4, Device::Cpu).unwrap()).unwrap();
    let y = x.log_softmax(1, Some(DType::F64)).unwrap();
    assert_eq!(y.dtype(), DType::F64);
    y.sum(None, false).unwrap().backward().unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.dtype(), DType::F32);
    // d/dx sum(log_softmax(x)) = 1 - n * softmax(x)
    let sm = x.data().softmax(1, None).unwrap().to_vec::<f32>().unwrap();
    for (gi, si) in g.to_vec::<f32>().unwrap().iter().zip(sm) {
        assert!((gi - (1.0 - 5.0 * si)).abs() < 1e-5);
    }
}
