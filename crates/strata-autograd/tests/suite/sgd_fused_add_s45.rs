//! SGD on f32 and f64 parameters against PyTorch 2.15's answers in
//! `tests/data/sgd_fused_add_s45.json` (made by
//! `benches/anchors/gen_sgd_fused_add_s45.py`), bit for bit. PyTorch's
//! single-tensor step rounds each `a.add(b, alpha=c)` once (a fused
//! multiply-add with `alpha` in the tensor's dtype) on every element, the
//! scalar tail included; strata formed `alpha * b` first for f32 and f64,
//! an ulp away now and then, which broke a tie of `minimum` between an f32
//! parameter and an f64 one read as f32 (gradient-oracle program
//! 196:1272, reduced in `minimum_tie_after_sgd_steps_matches_pytorch`).

use crate::pytorch_fixture::{
    check_sgd_result, dtype, fixture, host, nums, same, sgd_of, tensor_of,
};
use strata_autograd::{Optimizer, Sgd, Var};
use strata_tensor::DType;

const FIXTURE: &str = include_str!("../data/sgd_fused_add_s45.json");

/// Every option PyTorch accepts (momentum, dampening, Nesterov, maximize,
/// weight decay), f32 and f64, 1 to 33 elements, 4 steps: the parameter
/// and the momentum buffer bit for bit.
#[test]
fn sgd_f32_f64_steps_match_pytorch_bit_for_bit() {
    let doc = fixture(FIXTURE);
    let mut failures = Vec::new();
    let cases = doc["steps"].as_array().unwrap();
    assert_eq!(cases.len(), 160);
    for case in cases {
        let dt = dtype(case["dtype"].as_str().unwrap());
        let inp = &doc["inputs"][case["inputs"].as_str().unwrap()];
        let p0 = nums(&inp["p0"]);
        let n = p0.len();
        let kw = &case["kw"];
        let p = Var::parameter(tensor_of(&p0, &[n], dt)).unwrap();
        let mut opt = sgd_of(&p, kw);
        for g in inp["grads"].as_array().unwrap() {
            p.set_grad(Some(tensor_of(&nums(g), &[n], dt))).unwrap();
            opt.step().unwrap();
        }
        let what = format!("SGD {} {kw}", case["inputs"]);
        check_sgd_result(&opt, &p, case, &what, &mut failures);
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}

/// Gradient-oracle program 196:1272 reduced: `std(minimum(x0 as f32, x1))`
/// with x0 an f64 and x1 an f32 parameter, equal at first, SGD with
/// momentum and weight decay, gradients kept between iterations. PyTorch's
/// f32 step leaves x1[0] one ulp below x0 read as f32 before the third
/// iteration, so `minimum` sends all of its gradient to x1 there; the
/// outputs, parameters and gradients bit for bit.
#[test]
fn minimum_tie_after_sgd_steps_matches_pytorch() {
    let doc = fixture(FIXTURE);
    let c = &doc["tie"];
    let init = nums(&c["init"]);
    let kw = &c["kw"];
    let x0 = Var::parameter(tensor_of(&init, &[3, 1], DType::F64)).unwrap();
    let x1 = Var::parameter(tensor_of(&init, &[3, 1], DType::F32)).unwrap();
    let mut opt = Sgd::new(
        vec![x0.clone(), x1.clone()],
        kw["lr"].as_f64().unwrap(),
        kw["momentum"].as_f64().unwrap(),
    )
    .and_then(|o| o.with_weight_decay(kw["weight_decay"].as_f64().unwrap()))
    .unwrap();
    for (it, want) in c["outs"].as_array().unwrap().iter().enumerate() {
        let y = x0
            .to_dtype(DType::F32)
            .unwrap()
            .minimum(&x1)
            .unwrap()
            .std(Some(&[0]), 1.0, false)
            .unwrap();
        assert!(same(&host(y.data()), &nums(want)), "iteration {it}: output");
        y.sum(None, false).unwrap().backward().unwrap();
        opt.step().unwrap();
    }
    assert!(same(&host(x0.data()), &nums(&c["x0"])), "x0");
    assert!(same(&host(x1.data()), &nums(&c["x1"])), "x1");
    assert!(same(&host(&x0.grad().unwrap()), &nums(&c["g0"])), "x0.grad");
    assert!(same(&host(&x1.grad().unwrap()), &nums(&c["g1"])), "x1.grad");
}
