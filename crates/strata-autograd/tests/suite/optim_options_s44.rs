//! The optimizer options of session 44 against PyTorch 2.15's answers in
//! `tests/data/optim_options_s44.json.gz` (made by
//! `benches/anchors/gen_optim_options_s44.py`): Adam's and AdamW's
//! `amsgrad` and `maximize`, SGD's `dampening`, `nesterov` and `maximize`,
//! `clip_grad_norm_`'s `norm_type` and `error_if_nonfinite`, and
//! `clip_grad_value_`; and the options' rules (PyTorch's `ValueError`s as
//! typed errors that change nothing), their state dictionaries and the
//! loading of states saved with other options.

use crate::pytorch_fixture::{
    check_sgd_result, dtype, fixture, flag, gunzip, host, num, nums, same, tensor,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::LazyLock;
use strata_autograd::{
    clip_grad_value_, Adam, AdamW, AutogradError, ClipGradNorm, Optimizer, Sgd, Var,
};
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/optim_options_s44.json.gz")));

/// The largest difference in units of `tol` relative to the magnitude (NaN
/// and infinities must agree exactly).
fn within(a: &[f64], b: &[f64], rel: f64) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(&x, &y)| {
            if x.is_nan() || y.is_nan() || x.is_infinite() || y.is_infinite() {
                x.is_nan() && y.is_nan() || x == y
            } else {
                (x - y).abs() <= rel * x.abs().max(y.abs()).max(1e-30)
            }
        })
}

/// The fixture's parameter and gradients for `dt`.
fn inputs(doc: &Value, dt: &str) -> (Vec<f64>, Vec<Vec<f64>>) {
    let i = &doc["inputs"][dt];
    let grads = i["grads"].as_array().unwrap().iter().map(nums).collect();
    (nums(&i["p0"]), grads)
}

/// Runs `opt` over the fixture's gradients for `p`.
fn train(opt: &mut dyn Optimizer, p: &Var, grads: &[Vec<f64>], dt: DType) {
    for g in grads {
        p.set_grad(Some(tensor(g, dt))).unwrap();
        opt.step().unwrap();
    }
}

/// Adam and AdamW with every combination of amsgrad and maximize, in f32,
/// f64, f16 and bf16, after 4 steps: the parameter and every state tensor
/// bit for bit as PyTorch's fused CPU step (`fused=True`), the state under
/// PyTorch's names (`max_exp_avg_sq` exactly when amsgrad), and the flags
/// in the state's `param_groups`.
#[test]
fn adam_and_adamw_options_are_pytorchs_fused_cpu_steps_bit_for_bit() {
    let doc = fixture(&FIXTURE);
    let mut failures = Vec::new();
    for case in doc["adam"].as_array().unwrap() {
        let dn = case["dtype"].as_str().unwrap();
        let dt = dtype(dn);
        let kw = &case["kw"];
        let (p0, grads) = inputs(&doc, dn);
        let p = Var::parameter(tensor(&p0, dt)).unwrap();
        let betas = nums(&kw["betas"]);
        let (amsgrad, maximize) = (flag(kw, "amsgrad"), flag(kw, "maximize"));
        let name = case["optimizer"].as_str().unwrap();
        let mut opt: Box<dyn Optimizer> = if name == "Adam" {
            Box::new(
                Adam::new(vec![p.clone()], num(&kw["lr"]))
                    .and_then(|o| o.with_betas(betas[0], betas[1]))
                    .and_then(|o| o.with_eps(num(&kw["eps"])))
                    .and_then(|o| o.with_amsgrad(amsgrad))
                    .unwrap()
                    .with_maximize(maximize),
            )
        } else {
            Box::new(
                AdamW::new(vec![p.clone()])
                    .with_lr(num(&kw["lr"]))
                    .and_then(|o| o.with_betas(betas[0], betas[1]))
                    .and_then(|o| o.with_eps(num(&kw["eps"])))
                    .and_then(|o| o.with_weight_decay(num(&kw["weight_decay"])))
                    .and_then(|o| o.with_amsgrad(amsgrad))
                    .unwrap()
                    .with_maximize(maximize),
            )
        };
        train(opt.as_mut(), &p, &grads, dt);
        let what = format!("{name} {dn} amsgrad={amsgrad} maximize={maximize}");
        if !same(&host(p.data()), &nums(&case["p"])) {
            failures.push(format!("{what}: parameter"));
        }
        let d = opt.state_dict().unwrap();
        let mut keys: Vec<String> = d
            .keys()
            .filter_map(|k| k.strip_prefix("state.0.").map(str::to_string))
            .collect();
        keys.sort();
        let want_keys: Vec<String> = (case["state_keys"].as_array().unwrap().iter())
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        assert_eq!(keys, want_keys, "{what}: state keys");
        for (k, want) in case["state"].as_object().unwrap() {
            let got = host(&d[&format!("state.0.{k}")]);
            let want = if want.is_array() {
                nums(want)
            } else {
                vec![num(want)]
            };
            if !same(&got, &want) {
                failures.push(format!("{what}: {k}"));
            }
        }
        for f in ["amsgrad", "maximize"] {
            let got = d
                .get(&format!("param_groups.0.{f}"))
                .map(|t| host(t)[0] == 1.0);
            let want = case["flags"][f].as_bool().unwrap();
            // Written only when set (see `optim::state`).
            assert_eq!(got, want.then_some(true), "{what}: flag {f}");
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}

/// SGD with momentum, dampening, Nesterov momentum, maximize and weight
/// decay (every combination PyTorch accepts), in f32, f64, f16 and bf16,
/// after 4 steps, against PyTorch's single-tensor step, bit for bit: strata
/// rounds each `a + alpha * b` once with `alpha` in the parameter's dtype,
/// as PyTorch's `add(b, alpha)` (in f32 for f16 and bf16; the fixture's 32
/// elements all take PyTorch's vectorized loop, which f16 and bf16 need).
/// f32 and f64 were compared within 4 units of epsilon before session 45,
/// when strata rounded `alpha * b` first (`sgd_fused_add_s45.rs`).
#[test]
fn sgd_options_match_pytorchs_single_tensor_step() {
    let doc = fixture(&FIXTURE);
    let mut failures = Vec::new();
    for case in doc["sgd"].as_array().unwrap() {
        let dn = case["dtype"].as_str().unwrap();
        let dt = dtype(dn);
        let kw = &case["kw"];
        let (p0, grads) = inputs(&doc, dn);
        let p = Var::parameter(tensor(&p0, dt)).unwrap();
        let dampening = kw.get("dampening").map_or(0.0, num);
        let mut opt = Sgd::new(vec![p.clone()], num(&kw["lr"]), num(&kw["momentum"]))
            .and_then(|o| o.with_weight_decay(num(&kw["weight_decay"])))
            .and_then(|o| o.with_dampening(dampening))
            .and_then(|o| o.with_nesterov(flag(kw, "nesterov")))
            .unwrap()
            .with_maximize(flag(kw, "maximize"));
        train(&mut opt, &p, &grads, dt);
        let what = format!("SGD {dn} {kw}");
        check_sgd_result(&opt, &p, case, &what, &mut failures);
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}

/// clip_grad_norm_ with norm types 2, 1, inf, -inf, 0, 3, 0.5 and -1 over
/// gradients of one dtype or mixed, finite or with an inf or NaN element,
/// error_if_nonfinite on and off: the total norm's dtype exactly, NaN,
/// infinities, the inf, -inf and 0 norms (a maximum, a minimum, a count)
/// exactly; other norms and the clipped gradients within 8 units of the
/// lowest precision among the gradients (f16: 2^-10, bf16: 2^-7; f32
/// 2^-23): strata sums the powers in another order than PyTorch's
/// vectorized reduction, and the per-gradient norms are rounded to the
/// gradient's dtype, so a sum an ulp apart can round to a neighbouring f16
/// or bf16 value, and the coefficient and the gradients follow it. An error
/// must be an error in both, leaving the gradients as they were.
#[test]
fn clip_grad_norm_norm_types_and_nonfinite_match_pytorch() {
    let doc = fixture(&FIXTURE);
    let mut failures = Vec::new();
    for entry in doc["clip_norm"].as_array().unwrap() {
        let dts: Vec<DType> = (entry["dtypes"].as_array().unwrap().iter())
            .map(|d| dtype(d.as_str().unwrap()))
            .collect();
        let base: Vec<Vec<f64>> = entry["grads"]
            .as_array()
            .unwrap()
            .iter()
            .map(nums)
            .collect();
        let eps = dts
            .iter()
            .map(|d| match d {
                DType::F16 => 2f64.powi(-10),
                DType::BF16 => 2f64.powi(-7),
                DType::F32 => f64::from(f32::EPSILON),
                _ => f64::EPSILON,
            })
            .fold(0.0, f64::max);
        for case in entry["cases"].as_array().unwrap() {
            let special = case["special"].as_str();
            let grads: Vec<Vec<f64>> = (base.iter().enumerate())
                .map(|(i, g)| {
                    let mut g = g.clone();
                    if i == 0 {
                        match special {
                            Some("inf") => g[3] = f64::INFINITY,
                            Some("nan") => g[3] = f64::NAN,
                            _ => {}
                        }
                    }
                    g
                })
                .collect();
            let ps: Vec<Var> = (grads.iter().zip(&dts))
                .map(|(g, &dt)| {
                    let p = Var::parameter(Tensor::zeros(&[g.len()], dt, Device::Cpu).unwrap())
                        .unwrap();
                    p.set_grad(Some(tensor(g, dt))).unwrap();
                    p
                })
                .collect();
            let nt = num(&case["norm_type"]);
            let err = case["error_if_nonfinite"].as_bool().unwrap();
            let what = format!("{dts:?} special={special:?} norm_type={nt} error={err}");
            // max_norm 1, as the generator.
            let clip = ClipGradNorm::new(1.0)
                .and_then(|c| c.with_norm_type(nt))
                .unwrap()
                .with_error_if_nonfinite(err);
            let got = clip.clip(&ps);
            if case.get("error").is_some() {
                match got {
                    Err(AutogradError::NonFiniteNorm { norm_type, total }) => {
                        assert!(!total.is_finite() && norm_type.to_bits() == nt.to_bits());
                    }
                    other => failures.push(format!("{what}: expected an error, got {other:?}")),
                }
                for (p, g) in ps.iter().zip(&grads) {
                    assert!(same(&host(&p.grad().unwrap()), &tensor_round(g, p.dtype())));
                }
                continue;
            }
            let total = match got {
                Ok(t) => t,
                Err(e) => {
                    failures.push(format!("{what}: {e}"));
                    continue;
                }
            };
            assert_eq!(
                total.dtype(),
                dtype(case["total_dtype"].as_str().unwrap()),
                "{what}"
            );
            let (got_total, want_total) = (host(&total)[0], num(&case["total"]));
            let exact = nt.is_infinite() || nt == 0.0;
            let ok = if exact {
                same(&[got_total], &[want_total])
            } else {
                within(&[got_total], &[want_total], 8.0 * eps)
            };
            if !ok {
                failures.push(format!("{what}: total {got_total} vs {want_total}"));
            }
            for (k, p) in ps.iter().enumerate() {
                let want = nums(&case["after"][k]);
                if !within(&host(&p.grad().unwrap()), &want, 8.0 * eps) {
                    failures.push(format!("{what}: gradient {k} after"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}

/// `g` as `dt` holds it, as f64.
fn tensor_round(g: &[f64], dt: DType) -> Vec<f64> {
    host(&tensor(g, dt))
}

/// clip_grad_value_ in every float dtype, clip values 0.1, 1, 0 and inf,
/// NaN and -inf elements: bit for bit as PyTorch's (the bound converted to
/// the gradient's dtype, NaN kept).
#[test]
fn clip_grad_value_matches_pytorch_bit_for_bit() {
    let doc = fixture(&FIXTURE);
    for case in doc["clip_value"].as_array().unwrap() {
        let dt = dtype(case["dtype"].as_str().unwrap());
        let g = nums(&case["grad"]);
        let p = Var::parameter(Tensor::zeros(&[g.len()], dt, Device::Cpu).unwrap()).unwrap();
        p.set_grad(Some(tensor(&g, dt))).unwrap();
        let cv = num(&case["clip_value"]);
        clip_grad_value_(std::slice::from_ref(&p), cv).unwrap();
        let got = host(&p.grad().unwrap());
        assert!(
            same(&got, &nums(&case["after"])),
            "{dt} clip_value={cv}: {got:?}"
        );
    }
}

// ----- the options' rules, refused steps and states -----

fn param(v: &[f32]) -> Var {
    Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap()
}

fn set_grad(p: &Var, g: &[f32]) {
    p.set_grad(Some(
        Tensor::from_slice(g, &[g.len()], Device::Cpu).unwrap(),
    ))
    .unwrap();
}

/// PyTorch's `ValueError("Nesterov momentum requires a momentum and zero
/// dampening")` in every order the builder allows, and in a loaded state:
/// an `OptimizerOptions` error saying what to do; a NaN dampening is a
/// `Hyperparameter` error. A refused load changes nothing.
#[test]
fn nesterov_needs_momentum_and_no_dampening() {
    let p = || vec![param(&[1.0, 2.0])];
    let nesterov = |e: Result<Sgd, AutogradError>| match e {
        Err(AutogradError::OptimizerOptions { optimizer, msg }) => {
            assert_eq!(optimizer, "SGD");
            assert!(msg.contains("Nesterov momentum requires a momentum and zero dampening"));
            assert!(msg.contains("turn nesterov off"), "{msg}");
        }
        other => panic!("expected OptimizerOptions, got {:?}", other.err()),
    };
    nesterov(Sgd::new(p(), 0.1, 0.0).unwrap().with_nesterov(true));
    nesterov(
        Sgd::new(p(), 0.1, 0.9)
            .and_then(|o| o.with_dampening(0.1))
            .unwrap()
            .with_nesterov(true),
    );
    nesterov(
        Sgd::new(p(), 0.1, 0.9)
            .and_then(|o| o.with_nesterov(true))
            .unwrap()
            .with_dampening(0.1),
    );
    assert!(Sgd::new(p(), 0.1, 0.9).unwrap().with_nesterov(true).is_ok());
    // Dampening with Nesterov off takes any number but NaN, as PyTorch
    // (which takes NaN too).
    for d in [-1.0, 0.5, 2.0, f64::INFINITY] {
        assert!(
            Sgd::new(p(), 0.1, 0.9).unwrap().with_dampening(d).is_ok(),
            "{d}"
        );
    }
    assert!(matches!(
        Sgd::new(p(), 0.1, 0.9).unwrap().with_dampening(f64::NAN),
        Err(AutogradError::Hyperparameter {
            name: "dampening",
            ..
        })
    ));
    // A loaded state with nesterov and dampening is refused whole.
    let ps = p();
    let mut opt = Sgd::new(ps.clone(), 0.1, 0.9).unwrap().with_maximize(true);
    set_grad(&ps[0], &[0.5, -0.5]);
    opt.step().unwrap();
    let before = opt.state_dict().unwrap();
    let mut bad = before.clone();
    bad.insert(
        "param_groups.0.nesterov".into(),
        Tensor::scalar(true, DType::Bool, Device::Cpu).unwrap(),
    );
    bad.insert(
        "param_groups.0.dampening".into(),
        Tensor::scalar(0.5, DType::F64, Device::Cpu).unwrap(),
    );
    assert!(matches!(
        opt.load_state_dict(&bad),
        Err(AutogradError::OptimizerOptions { .. })
    ));
    assert!(dicts_equal(&opt.state_dict().unwrap(), &before));
}

fn dicts_equal(a: &HashMap<String, Tensor>, b: &HashMap<String, Tensor>) -> bool {
    a.len() == b.len()
        && a.iter().all(|(k, t)| {
            b.get(k)
                .is_some_and(|u| t.dtype() == u.dtype() && same(&host(t), &host(u)))
        })
}

/// A refused step with AMSGrad and maximize (a gradient that shares the
/// parameter's memory, which the fused step cannot read while it writes)
/// leaves every parameter and every state tensor, the maxima included, as
/// they were; AMSGrad cannot be switched once parameters have state.
#[test]
fn refused_steps_and_switches_change_nothing() {
    type Make = fn(Vec<Var>) -> Box<dyn Optimizer>;
    let makes: [(&str, Make); 2] = [
        ("Adam", |ps| {
            Box::new(
                Adam::new(ps, 0.1)
                    .unwrap()
                    .with_amsgrad(true)
                    .unwrap()
                    .with_maximize(true),
            )
        }),
        ("AdamW", |ps| {
            Box::new(
                AdamW::new(ps)
                    .with_amsgrad(true)
                    .unwrap()
                    .with_maximize(true),
            )
        }),
    ];
    for (name, make) in makes {
        let ps = vec![param(&[1.0, 2.0]), param(&[3.0])];
        let mut opt = make(ps.clone());
        set_grad(&ps[0], &[0.5, -0.5]);
        set_grad(&ps[1], &[4.0]);
        opt.step().unwrap();
        let before = opt.state_dict().unwrap();
        assert!(before.contains_key("state.0.max_exp_avg_sq"), "{name}");
        let values: Vec<Vec<f64>> = ps.iter().map(|p| host(p.data())).collect();
        // Parameter 1's gradient is the parameter itself.
        ps[1].set_grad(Some(ps[1].data().clone())).unwrap();
        assert!(
            matches!(opt.step(), Err(AutogradError::Optimizer { .. })),
            "{name}"
        );
        assert!(
            dicts_equal(&opt.state_dict().unwrap(), &before),
            "{name}: state changed"
        );
        let now: Vec<Vec<f64>> = ps.iter().map(|p| host(p.data())).collect();
        assert_eq!(now, values, "{name}: parameters changed");
    }
    // Switching AMSGrad after a step.
    let p = param(&[1.0]);
    let mut adam = Adam::new(vec![p.clone()], 0.1).unwrap();
    set_grad(&p, &[1.0]);
    adam.step().unwrap();
    assert!(matches!(
        adam.with_amsgrad(true),
        Err(AutogradError::Optimizer { .. })
    ));
    let p = param(&[1.0]);
    let mut adamw = AdamW::new(vec![p.clone()]).with_amsgrad(true).unwrap();
    set_grad(&p, &[1.0]);
    adamw.step().unwrap();
    assert!(matches!(
        adamw.with_amsgrad(false),
        Err(AutogradError::Optimizer { .. })
    ));
    // Before any step it may change back and forth.
    let adam = Adam::new(vec![param(&[1.0])], 0.1).unwrap();
    assert!(adam
        .with_amsgrad(true)
        .and_then(|a| a.with_amsgrad(false))
        .is_ok());
}

/// Saving with the options and loading into an optimizer made without them
/// continues exactly as uninterrupted training (the state's options win, as
/// PyTorch's `load_state_dict` restores a group's options); the options are
/// in the state under PyTorch's names.
#[test]
fn states_with_options_resume_exactly() {
    type Make = fn(Vec<Var>, bool) -> Box<dyn Optimizer>;
    let makes: [(&str, Make); 3] = [
        ("Adam", |ps, on| {
            Box::new(
                Adam::new(ps, 0.05)
                    .unwrap()
                    .with_amsgrad(on)
                    .unwrap()
                    .with_maximize(on),
            )
        }),
        ("AdamW", |ps, on| {
            Box::new(
                AdamW::new(ps)
                    .with_lr(0.05)
                    .unwrap()
                    .with_amsgrad(on)
                    .unwrap()
                    .with_maximize(on),
            )
        }),
        ("SGD", |ps, on| {
            let o = Sgd::new(ps, 0.05, 0.9).unwrap();
            Box::new(if on {
                o.with_nesterov(true).unwrap().with_maximize(true)
            } else {
                o.with_dampening(0.25).unwrap()
            })
        }),
    ];
    let grads = [
        [0.5f32, -1.0, 2.0],
        [3.0, 0.1, -0.2],
        [0.01, 0.02, 0.5],
        [-1.0, 1.0, 0.0],
    ];
    for (name, make) in makes {
        for on in [true, false] {
            let p = param(&[1.0, -2.0, 0.5]);
            let mut whole = make(vec![p.clone()], on);
            for g in &grads {
                set_grad(&p, g);
                whole.step().unwrap();
            }
            let q = param(&[1.0, -2.0, 0.5]);
            let mut first = make(vec![q.clone()], on);
            for g in &grads[..2] {
                set_grad(&q, g);
                first.step().unwrap();
            }
            let saved = first.state_dict().unwrap();
            let r = Var::parameter(q.data().deep_clone().unwrap()).unwrap();
            // Made with the other options: loading takes the state's.
            let mut resumed = make(vec![r.clone()], !on);
            resumed.load_state_dict(&saved).unwrap();
            assert!(
                dicts_equal(&resumed.state_dict().unwrap(), &saved),
                "{name} on={on}"
            );
            for g in &grads[2..] {
                set_grad(&r, g);
                resumed.step().unwrap();
            }
            assert!(same(&host(r.data()), &host(p.data())), "{name} on={on}");
            let keys = |d: &HashMap<String, Tensor>, k: &str| d.contains_key(k);
            let want: &[(&str, bool)] = match name {
                "SGD" => &[
                    ("param_groups.0.nesterov", on),
                    ("param_groups.0.maximize", on),
                    ("param_groups.0.dampening", !on),
                ],
                _ => &[
                    ("param_groups.0.amsgrad", on),
                    ("param_groups.0.maximize", on),
                    ("state.0.max_exp_avg_sq", on),
                ],
            };
            for &(k, present) in want {
                assert_eq!(keys(&saved, k), present, "{name} on={on}: {k}");
            }
        }
    }
}

/// Loading with AMSGrad as PyTorch: a state saved without the flag (or
/// with it off) turns AMSGrad off, as PyTorch's saved `amsgrad: False`
/// (and its default for a group without the key) does; a state with the
/// flag on but a parameter's `max_exp_avg_sq` missing is refused here
/// (PyTorch loads it and fails at the next step with `KeyError:
/// 'max_exp_avg_sq'`), and so is a `max_exp_avg_sq` without the flag, a
/// flag that is not 0 or 1; each refusal changes nothing.
#[test]
fn loading_states_with_and_without_amsgrad() {
    for name in ["Adam", "AdamW"] {
        let make = |ps: Vec<Var>, amsgrad: bool| -> Box<dyn Optimizer> {
            if name == "Adam" {
                Box::new(Adam::new(ps, 0.1).unwrap().with_amsgrad(amsgrad).unwrap())
            } else {
                Box::new(AdamW::new(ps).with_amsgrad(amsgrad).unwrap())
            }
        };
        let p = param(&[1.0, 2.0]);
        let mut plain = make(vec![p.clone()], false);
        set_grad(&p, &[0.5, -0.5]);
        plain.step().unwrap();
        let plain_state = plain.state_dict().unwrap();
        let q = param(&[1.0, 2.0]);
        let mut ams = make(vec![q.clone()], true);
        set_grad(&q, &[0.5, -0.5]);
        ams.step().unwrap();
        let ams_state = ams.state_dict().unwrap();
        // A state without the flag: AMSGrad off, as PyTorch.
        let mut target = make(vec![param(&[1.0, 2.0])], true);
        target.load_state_dict(&plain_state).unwrap();
        assert!(
            dicts_equal(&target.state_dict().unwrap(), &plain_state),
            "{name}"
        );
        // Refused, changing nothing.
        let before = ams.state_dict().unwrap();
        let mut missing = ams_state.clone();
        missing.remove("state.0.max_exp_avg_sq");
        let mut stray = plain_state.clone();
        stray.insert(
            "state.0.max_exp_avg_sq".into(),
            ams_state["state.0.max_exp_avg_sq"].clone(),
        );
        let mut two = ams_state.clone();
        two.insert(
            "param_groups.0.amsgrad".into(),
            Tensor::scalar(2.0, DType::F64, Device::Cpu).unwrap(),
        );
        for (why, bad, needle) in [
            ("missing", &missing, "max_exp_avg_sq"),
            ("stray", &stray, "amsgrad"),
            ("flag 2", &two, "a flag is true or false"),
        ] {
            match ams.load_state_dict(bad) {
                Err(AutogradError::Optimizer { msg, .. }) => {
                    assert!(
                        msg.contains(needle) && msg.contains("nothing was loaded"),
                        "{name} {why}: {msg}"
                    );
                }
                other => panic!("{name} {why}: {other:?}"),
            }
            assert!(
                dicts_equal(&ams.state_dict().unwrap(), &before),
                "{name} {why}"
            );
        }
    }
}

/// clip_grad_norm_'s and clip_grad_value_'s refusals change no gradient: an
/// infinite or negative order over an empty gradient (PyTorch: "cannot compute the inf norm on
/// an empty tensor"), a non-finite total with error_if_nonfinite. (A NaN
/// or negative clip value, refused until session 45, now gives PyTorch's
/// gradients: every element NaN, or every element the negative clip_value.)
#[test]
fn clip_refusals_change_nothing() {
    let p = param(&[3.0, -4.0]);
    let e = Var::parameter(Tensor::zeros(&[0], DType::F32, Device::Cpu).unwrap()).unwrap();
    e.set_grad(Some(Tensor::zeros(&[0], DType::F32, Device::Cpu).unwrap()))
        .unwrap();
    set_grad(&p, &[3.0, -4.0]);
    for nt in [f64::INFINITY, f64::NEG_INFINITY, -1.0] {
        let c = ClipGradNorm::new(1.0).unwrap().with_norm_type(nt).unwrap();
        match c.clip(&[p.clone(), e.clone()]) {
            Err(AutogradError::Optimizer { msg, .. }) => assert!(msg.contains("empty"), "{msg}"),
            other => panic!("{nt}: {other:?}"),
        }
        assert_eq!(host(&p.grad().unwrap()), vec![3.0, -4.0]);
    }
    // Orders >= 0 that are finite have an identity: the empty gradient adds
    // 0. (Order 0 counts the nonzero per-gradient norms, as PyTorch's total
    // does: 1 here, not the 2 nonzero elements.)
    for nt in [0.0, 1.0, 2.0, 3.0] {
        let q = param(&[3.0, -4.0]);
        set_grad(&q, &[3.0, -4.0]);
        let c = ClipGradNorm::new(f64::INFINITY)
            .unwrap()
            .with_norm_type(nt)
            .unwrap();
        let total = c.clip(&[q, e.clone()]).unwrap();
        let want = [1.0, 7.0, 5.0, 91f64.cbrt()][nt as usize];
        assert!((host(&total)[0] - want).abs() < 1e-6, "{nt}");
    }
    set_grad(&p, &[f32::INFINITY, 1.0]);
    let c = ClipGradNorm::new(1.0)
        .unwrap()
        .with_error_if_nonfinite(true);
    let err = c.clip(std::slice::from_ref(&p)).unwrap_err();
    assert!(matches!(err, AutogradError::NonFiniteNorm { .. }));
    assert!(err.to_string().contains("error_if_nonfinite"), "{err}");
    assert_eq!(host(&p.grad().unwrap()), vec![f64::INFINITY, 1.0]);
    // torch.nn.utils.clip_grad_value_([p], cv) with grad [3, -4]:
    // [-1, -1] for -1, [nan, nan] for nan.
    set_grad(&p, &[3.0, -4.0]);
    clip_grad_value_(std::slice::from_ref(&p), -1.0).unwrap();
    assert_eq!(host(&p.grad().unwrap()), vec![-1.0, -1.0]);
    set_grad(&p, &[3.0, -4.0]);
    clip_grad_value_(std::slice::from_ref(&p), f64::NAN).unwrap();
    assert!(host(&p.grad().unwrap()).iter().all(|g| g.is_nan()));
}

/// A NaN norm_type (refused until session 46) and single-element gradients,
/// against PyTorch 2.15 (`torch.nn.utils.clip_grad_norm_(ps, 1.0,
/// norm_type=nt)` on f32 gradients, `.item()`s printed by `repr`):
///
/// ```python
/// nan = float("nan")
/// # grads [[3, -4]]       -> total nan, grads [[nan, nan]]
/// # grads [[2.0]]         -> total 2.0, grads [[0.9999995231628418]]
/// # grads [[-2.5]]        -> total 2.5, grads [[-0.9999996423721313]]
/// # grads [[0.5], [1.0]]  -> total nan, grads [[nan], [nan]]
/// # grads [[]]            -> total 0.0, grads [[]]
/// # grads [[1.0], []]     -> total nan, grads [[nan], []]
/// # grads [[3, -4]], error_if_nonfinite=True -> RuntimeError, grads unchanged
/// # norm_type=3.0: grads [[7.576315879821777]]      -> total 7.576315879821777,
/// #                                                   grads [[0.9999998807907104]]
/// #                grads [[7.576315879821777, 0.0]] -> total 7.5763163566589355
/// ```
///
/// `vector_norm` of one element is `|x|` whatever the order (a NaN order
/// too), and the total of one gradient is its norm: `(x^3)^(1/3)` rounds
/// 7.576315879821777 up an ulp, as the two-element gradient shows.
#[test]
fn clip_grad_norm_nan_order_and_single_elements_match_pytorch() {
    let clip = |gs: &[&[f32]], nt: f64| -> (f64, Vec<Vec<f64>>) {
        let ps: Vec<Var> = gs
            .iter()
            .map(|g| {
                let p = param(&vec![0.0; g.len()]);
                set_grad(&p, g);
                p
            })
            .collect();
        let c = ClipGradNorm::new(1.0).unwrap().with_norm_type(nt).unwrap();
        let total = host(&c.clip(&ps).unwrap())[0];
        (total, ps.iter().map(|p| host(&p.grad().unwrap())).collect())
    };
    let nan = f64::NAN;
    let all_nan = |gs: &[Vec<f64>]| gs.iter().flatten().all(|g| g.is_nan());
    let (t, g) = clip(&[&[3.0, -4.0]], nan);
    assert!(t.is_nan() && all_nan(&g), "{t} {g:?}");
    let (t, g) = clip(&[&[2.0]], nan);
    assert_eq!((t, g), (2.0, vec![vec![0.999_999_523_162_841_8]]));
    let (t, g) = clip(&[&[-2.5]], nan);
    assert_eq!((t, g), (2.5, vec![vec![-0.999_999_642_372_131_3]]));
    let (t, g) = clip(&[&[0.5], &[1.0]], nan);
    assert!(t.is_nan() && all_nan(&g), "{t} {g:?}");
    let (t, g) = clip(&[&[]], nan);
    assert_eq!((t, g), (0.0, vec![vec![]]));
    let (t, g) = clip(&[&[1.0], &[]], nan);
    assert!(
        t.is_nan() && all_nan(&g[..1]) && g[1].is_empty(),
        "{t} {g:?}"
    );
    let p = param(&[0.0, 0.0]);
    set_grad(&p, &[3.0, -4.0]);
    let c = ClipGradNorm::new(1.0)
        .unwrap()
        .with_norm_type(nan)
        .unwrap()
        .with_error_if_nonfinite(true);
    let err = c.clip(std::slice::from_ref(&p)).unwrap_err();
    assert!(matches!(err, AutogradError::NonFiniteNorm { .. }), "{err}");
    assert_eq!(host(&p.grad().unwrap()), vec![3.0, -4.0]);
    let x = 7.576_316_f32; // 7.576315879821777 exactly
    let (t, g) = clip(&[&[x]], 3.0);
    assert_eq!((t, g), (f64::from(x), vec![vec![0.999_999_880_790_710_4]]));
    let (t, _) = clip(&[&[x, 0.0]], 3.0);
    assert_eq!(t, 7.576_316_356_658_935_5);
}
