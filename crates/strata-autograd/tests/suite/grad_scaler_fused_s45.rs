//! A GradScaler driving Adam and AdamW made with `with_fused(true)`
//! (PyTorch's `fused=True`) against PyTorch 2.15's answers in
//! `tests/data/grad_scaler_fused_s45.json` (made by
//! `benches/anchors/gen_grad_scaler_fused_s45.py`), bit for bit in f32,
//! f64, f16 and bf16 with scales that are not powers of two (3, 4.5, ...).
//! PyTorch's scaler hands a fused optimizer the scale: the kernel divides
//! each gradient by it in f32 (f64 for f64) and steps with the quotient,
//! unrounded for f16/bf16, storing it rounded as `.grad`; a skipped step
//! (an inf gradient) leaves `.grad` scaled. strata unscaled the gradients
//! in their own dtype before the step, an ulp away for f16/bf16
//! (gradient-oracle program 185:1965).

use crate::pytorch_fixture::{dtype, fixture, host, num, nums, same, tensor};
use serde_json::Value;
use strata_autograd::{Adam, AdamW, GradScaler, Optimizer, Var};

const FIXTURE: &str = include_str!("../data/grad_scaler_fused_s45.json");

fn optimizer(name: &str, kw: &Value, p: &Var) -> Box<dyn Optimizer> {
    let f = |k: &str| kw[k].as_f64().unwrap();
    let b = |k: &str| kw.get(k).and_then(Value::as_bool).unwrap_or(false);
    match name {
        "Adam" => Box::new(
            Adam::new(vec![p.clone()], f("lr"))
                .and_then(|o| o.with_amsgrad(b("amsgrad")))
                .unwrap()
                .with_maximize(b("maximize"))
                .with_fused(true),
        ),
        _ => {
            let betas = nums(&kw["betas"]);
            Box::new(
                AdamW::new(vec![p.clone()])
                    .with_lr(f("lr"))
                    .and_then(|o| o.with_betas(betas[0], betas[1]))
                    .and_then(|o| o.with_eps(f("eps")))
                    .and_then(|o| o.with_weight_decay(f("weight_decay")))
                    .unwrap()
                    .with_fused(true),
            )
        }
    }
}

#[test]
fn grad_scaler_hands_its_scale_to_fused_adam_as_pytorch() {
    let doc = fixture(FIXTURE);
    let sc = &doc["scaler"];
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 20);
    let mut failures = Vec::new();
    for case in cases {
        let dn = case["dtype"].as_str().unwrap();
        let dt = dtype(dn);
        let name = case["optimizer"].as_str().unwrap();
        let what = format!("{name} {dn} {}", case["kw"]);
        let inp = &doc["inputs"][dn];
        let p = Var::parameter(tensor(&nums(&inp["p0"]), dt)).unwrap();
        let mut opt = optimizer(name, &case["kw"], &p);
        let mut scaler = GradScaler::with_settings(
            num(&sc["init_scale"]),
            num(&sc["growth_factor"]),
            num(&sc["backoff_factor"]),
            sc["growth_interval"].as_u64().unwrap() as u32,
        )
        .unwrap();
        let grads = inp["grads"].as_array().unwrap();
        for (it, want) in case["log"].as_array().unwrap().iter().enumerate() {
            // The gradient backward would leave: times the scale, rounded.
            let scale = scaler.get_scale();
            let g: Vec<f64> = nums(&grads[it]).iter().map(|x| x * scale).collect();
            p.set_grad(Some(tensor(&g, dt))).unwrap();
            let stepped = scaler.step(opt.as_mut()).unwrap();
            scaler.update().unwrap();
            if stepped != want["stepped"].as_bool().unwrap() {
                failures.push(format!("{what}: iteration {it}: stepped {stepped}"));
            }
            if scaler.get_scale() != num(&want["scale"]) {
                failures.push(format!("{what}: iteration {it}: scale"));
            }
            if !same(&host(p.data()), &nums(&want["p"])) {
                failures.push(format!("{what}: iteration {it}: parameter"));
            }
            if !same(&host(&p.grad().unwrap()), &nums(&want["grad"])) {
                failures.push(format!("{what}: iteration {it}: grad"));
            }
        }
        let d = opt.state_dict().unwrap();
        for (k, v) in case["state"].as_object().unwrap() {
            if !same(&host(&d[&format!("state.0.{k}")]), &nums(v)) {
                failures.push(format!("{what}: {k}"));
            }
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}

/// GradScaler's own arithmetic against PyTorch's: the scale is an f32 value
/// (init_scale 0.1 and 1e30 are rounded; an update rounds its product),
/// and unscale_ multiplies f32, f64 and bf16 gradients by the reciprocal
/// rounded to f32. strata kept the scale in f64 and multiplied f64
/// gradients by the f64 reciprocal, about 3e-8 relative away for a scale
/// of 3 (gradient-oracle program 214:1307, where a tie of `maximum` then
/// went the other way).
#[test]
fn grad_scaler_scale_and_unscale_are_pytorchs_f32_arithmetic() {
    use strata_autograd::Sgd;
    let doc = fixture(FIXTURE);
    let cases = doc["unscale"].as_array().unwrap();
    assert_eq!(cases.len(), 9);
    let mut failures = Vec::new();
    for c in cases {
        let dt = dtype(c["dtype"].as_str().unwrap());
        let what = format!("{dt:?} init_scale {}", c["init_scale"]);
        let p = Var::parameter(tensor(&[0.0; 8], dt)).unwrap();
        let mut opt = Sgd::new(vec![p.clone()], 0.0, 0.0).unwrap();
        let mut scaler = GradScaler::with_settings(num(&c["init_scale"]), 1.1, 0.5, 1).unwrap();
        if scaler.get_scale() != num(&c["scale"]) {
            failures.push(format!("{what}: scale {}", scaler.get_scale()));
        }
        p.set_grad(Some(tensor(&nums(&c["grad"]), dt))).unwrap();
        scaler.unscale_(&opt).unwrap();
        if !same(&host(&p.grad().unwrap()), &nums(&c["unscaled"])) {
            failures.push(format!("{what}: unscaled gradient"));
        }
        assert!(scaler.step(&mut opt).unwrap(), "{what}");
        scaler.update().unwrap();
        if scaler.get_scale() != num(&c["scale_after"]) {
            failures.push(format!("{what}: scale after update {}", scaler.get_scale()));
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}
