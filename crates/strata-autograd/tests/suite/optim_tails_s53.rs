//! CPU optimizer steps on small tensors against PyTorch 2.15's answers in
//! `tests/data/optim_tails_s53.json.gz` (made by
//! `benches/anchors/gen_optim_tails_s53.py`, which says which of PyTorch's
//! code paths runs on the CPU and why): the scalar tails of its kernels,
//! the last `numel % (2 * lanes)` elements that its elementwise loops hand
//! to a scalar functor.
//!
//! * SGD on f16/bf16 parameters (PyTorch's default single-tensor step):
//!   `a.add(b, alpha)`'s scalar functor rounds `alpha * b` to the dtype
//!   before the sum, where strata rounded once everywhere; fixed in session
//!   53 (`optim/sgd.rs`): bit for bit now.
//! * Adam/AdamW on the CPU follow PyTorch's fused kernel, whose scalar tail
//!   (the last `numel % 8` f32, `% 4` f64, `% 16` f16/bf16 elements)
//!   contracts the second moment's other product
//!   (`fma(v, beta2, ((1 - beta2) g) g)` against the vector loop's
//!   `fma((1 - beta2) g, g, v beta2)`) and takes AMSGrad's maximum with
//!   `std::max`; strata-tensor's kernel (`backend/cpu/optim.rs`) does the
//!   same since session 53: bit for bit, the tail included.

use crate::pytorch_fixture::{
    check_sgd_result, dtype, fixture, flag, gunzip, host, nums, sgd_of, tensor_of,
};
use std::sync::LazyLock;
use strata_autograd::{Adam, AdamW, Optimizer, Var};
use strata_tensor::DType;

static FIXTURE: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/optim_tails_s53.json.gz")));

/// Every SGD option, f16 and bf16, 1 to 70 elements, 4 steps: the
/// parameter and the momentum buffer bit for bit.
#[test]
fn sgd_on_f16_and_bf16_matches_pytorchs_scalar_tail_bit_for_bit() {
    let doc = fixture(&FIXTURE);
    let mut failures = Vec::new();
    let cases = doc["sgd"].as_array().unwrap();
    assert_eq!(cases.len(), 288);
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

/// The vector width of PyTorch's fused Adam kernel on AVX2, in elements.
fn lanes(dt: DType) -> usize {
    match dt {
        DType::F64 => 4,
        DType::F32 => 8,
        _ => 16,
    }
}

/// `got` against `want` bit for bit; a differing element is pushed to
/// `failures`, named as the vector loop's or the scalar tail's (from
/// `body`, the number of elements before the tail).
fn compare(got: &[f64], want: &[f64], body: usize, what: &str, failures: &mut Vec<String>) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        if a.to_bits() != b.to_bits() {
            let part = if i < body {
                "vector loop"
            } else {
                "scalar tail"
            };
            failures.push(format!("{what}[{i}]: {a} against PyTorch's {b} ({part})"));
        }
    }
}

/// Adam and AdamW (PyTorch's fused CPU step) on f32, f64, f16 and bf16
/// parameters of 1 to 40 elements, 3 steps: the parameter and both moments
/// bit for bit, the scalar tail's elements included.
#[test]
fn adam_on_small_tensors_matches_pytorchs_fused_step_bit_for_bit() {
    let doc = fixture(&FIXTURE);
    let mut failures = Vec::new();
    let cases = doc["adam"].as_array().unwrap();
    assert_eq!(cases.len(), 240);
    for case in cases {
        let dt = dtype(case["dtype"].as_str().unwrap());
        let inp = &doc["inputs"][case["inputs"].as_str().unwrap()];
        let p0 = nums(&inp["p0"]);
        let n = p0.len();
        let kw = &case["kw"];
        let lr = kw["lr"].as_f64().unwrap();
        let (b1, b2) = match kw.get("betas") {
            Some(b) => (nums(b)[0], nums(b)[1]),
            None => (0.9, 0.999),
        };
        let (amsgrad, maximize) = (flag(kw, "amsgrad"), flag(kw, "maximize"));
        let p = Var::parameter(tensor_of(&p0, &[n], dt)).unwrap();
        let mut opt: Box<dyn Optimizer> = if case["opt"] == "adamw" {
            let wd = kw["weight_decay"].as_f64().unwrap();
            Box::new(
                AdamW::new(vec![p.clone()])
                    .with_lr(lr)
                    .and_then(|o| o.with_betas(b1, b2))
                    .and_then(|o| o.with_weight_decay(wd))
                    .and_then(|o| o.with_amsgrad(amsgrad))
                    .unwrap()
                    .with_maximize(maximize),
            )
        } else {
            Box::new(
                Adam::new(vec![p.clone()], lr)
                    .and_then(|o| o.with_betas(b1, b2))
                    .and_then(|o| o.with_amsgrad(amsgrad))
                    .unwrap()
                    .with_maximize(maximize),
            )
        };
        for g in inp["grads"].as_array().unwrap() {
            p.set_grad(Some(tensor_of(&nums(g), &[n], dt))).unwrap();
            opt.step().unwrap();
        }
        let body = n - n % lanes(dt);
        let what = format!("{} {} {kw}", case["opt"], case["inputs"]);
        let d = opt.state_dict().unwrap();
        compare(
            &host(p.data()),
            &nums(&case["p"]),
            body,
            &format!("{what}: p"),
            &mut failures,
        );
        for k in ["exp_avg", "exp_avg_sq"] {
            compare(
                &host(&d[&format!("state.0.{k}")]),
                &nums(&case[k]),
                body,
                &format!("{what}: {k}"),
                &mut failures,
            );
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}
