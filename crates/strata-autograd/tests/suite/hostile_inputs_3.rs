//! The third sweep of hostile inputs to autograd: the optimizers and the
//! gradient scaler (after `hostile_inputs.rs`, `hostile_inputs_2.rs` and
//! `adversarial.rs`). Each test asserts the typed error and the state left
//! behind.
//!
//! Defects these tests found (fixed with them):
//!
//! * a parameter passed twice to an optimizer was updated twice per step
//!   (with two sets of moments or momentum buffers): `Sgd::new` and
//!   `Adam::new` now refuse it, and `AdamW::step` before updating anything;
//! * a step that met an integer parameter (or, for Adam and AdamW, a
//!   gradient sharing its parameter's memory) failed there, after updating
//!   the parameters before it and advancing their state; every parameter is
//!   now checked first;
//! * `GradScaler::update` grew the scale past the f32 range (PyTorch keeps
//!   it where it is) and backed it off to values that round to 0 in f32:
//!   from there every step was skipped and the scale never recovered;
//!   `with_settings` accepted such scales (5e-324, 1e300) to begin with;
//! * `Hyperparameter` errors named the bad value but not what is accepted.

use strata_autograd::{Adam, AdamW, AutogradError, GradScaler, Optimizer, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

use crate::common;
use common::param;

const CPU: Device = Device::Cpu;

fn with_grad(v: &[f32], g: &[f32]) -> Var {
    let p = param(v);
    p.set_grad(Some(Tensor::from_slice(g, &[g.len()], CPU).unwrap()))
        .unwrap();
    p
}

fn values(p: &Var) -> Vec<f64> {
    p.data()
        .to_dtype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

/// The three optimizers over `params`, with defaults that move parameters.
fn optimizers(params: &[Var]) -> Vec<(&'static str, Box<dyn Optimizer>)> {
    vec![
        (
            "SGD",
            Box::new(Sgd::new(params.to_vec(), 0.1, 0.9).unwrap()) as Box<dyn Optimizer>,
        ),
        ("Adam", Box::new(Adam::new(params.to_vec(), 0.1).unwrap())),
        (
            "AdamW",
            Box::new(AdamW::new(params.to_vec()).with_lr(0.1).unwrap()),
        ),
    ]
}

fn pick(name: &str, params: &[Var]) -> Box<dyn Optimizer> {
    optimizers(params)
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a known optimizer")
        .1
}

fn expect_optimizer_error(r: strata_autograd::Result<()>, what: &str, contains: &str) {
    match r {
        Err(e @ AutogradError::Optimizer { .. }) => {
            assert!(e.to_string().contains(contains), "{what}: {e}")
        }
        other => panic!("{what}: expected an Optimizer error, got {other:?}"),
    }
}

// ----- regressions -------------------------------------------------------------

/// One parameter twice: refused at construction where the constructor can
/// fail, at the first step otherwise, before any update.
#[test]
fn a_parameter_passed_twice_is_refused() {
    let p = with_grad(&[1.0, 2.0], &[1.0, 1.0]);
    let q = with_grad(&[3.0], &[1.0]);
    let list = vec![q.clone(), p.clone(), p.clone()];
    for r in [
        Sgd::new(list.clone(), 0.1, 0.0).map(|_| ()),
        Adam::new(list.clone(), 0.1).map(|_| ()),
    ] {
        expect_optimizer_error(r, "constructor", "parameters 1 and 2");
    }
    let mut w = AdamW::new(list);
    expect_optimizer_error(w.step(), "AdamW::step", "pass each parameter once");
    assert_eq!(values(&q), [3.0]);
    assert_eq!(values(&p), [1.0, 2.0]);
    assert_eq!(w.state_bytes(), 0);
    // A detached copy is another parameter (PyTorch's rule is by identity).
    assert!(Sgd::new(vec![p.clone(), p.detach()], 0.1, 0.0).is_ok());
}

/// An integer parameter (with an integer gradient, which `set_grad`
/// accepts) after a float one: the step fails before updating the float one.
#[test]
fn an_integer_parameter_fails_the_step_before_any_update() {
    for name in ["SGD", "Adam", "AdamW"] {
        let f = with_grad(&[1.0, -1.0], &[0.5, 0.5]);
        let i = Var::new(Tensor::from_slice(&[1i64, 2], &[2], CPU).unwrap());
        i.set_grad(Some(Tensor::from_slice(&[1i64, 1], &[2], CPU).unwrap()))
            .unwrap();
        let ps = [f.clone(), i.clone()];
        let mut opt = pick(name, &ps);
        expect_optimizer_error(opt.step(), name, "floating-point parameters");
        assert_eq!(values(&f), [1.0, -1.0], "{name}");
        assert_eq!(i.data().to_vec::<i64>().unwrap(), [1, 2], "{name}");
        // Without the integer parameter's gradient, the step runs.
        i.set_grad(None).unwrap();
        opt.step().unwrap();
        assert!(values(&f)[0] < 1.0, "{name}");
    }
}

/// A gradient that is the parameter's own memory: the fused Adam kernels
/// refuse it; the check now runs before the parameters before it moved.
#[test]
fn a_gradient_sharing_its_parameters_memory_fails_adam_before_any_update() {
    for name in ["Adam", "AdamW"] {
        let a = with_grad(&[1.0], &[1.0]);
        let b = param(&[2.0, 3.0]);
        b.set_grad(Some(b.data().clone())).unwrap();
        let mut opt = pick(name, &[a.clone(), b.clone()]);
        expect_optimizer_error(opt.step(), name, "shares the parameter's memory");
        assert_eq!(values(&a), [1.0], "{name}");
        assert_eq!(values(&b), [2.0, 3.0], "{name}");
    }
    // SGD reads the gradient before writing: p -= lr * p is well defined.
    let b = param(&[2.0]);
    b.set_grad(Some(b.data().clone())).unwrap();
    let mut sgd = Sgd::new(vec![b.clone()], 0.5, 0.0).unwrap();
    sgd.step().unwrap();
    assert_eq!(values(&b), [1.0]);
}

/// Settings that make a scale outside the f32 range: refused.
#[test]
fn grad_scaler_settings_out_of_range_are_refused() {
    let bad = [
        (0.0, 2.0, 0.5, 1),
        (-1.0, 2.0, 0.5, 1),
        (f64::NAN, 2.0, 0.5, 1),
        (f64::INFINITY, 2.0, 0.5, 1),
        (5e-324, 2.0, 0.5, 1),
        (1e-39, 2.0, 0.5, 1),
        (1e39, 2.0, 0.5, 1),
        (1e300, 2.0, 0.5, 1),
        (1.0, 1.0, 0.5, 1),
        (1.0, 0.5, 0.5, 1),
        (1.0, f64::NAN, 0.5, 1),
        (1.0, f64::INFINITY, 0.5, 1),
        (1.0, 2.0, 0.0, 1),
        (1.0, 2.0, 1.0, 1),
        (1.0, 2.0, -0.5, 1),
        (1.0, 2.0, 1.5, 1),
        (1.0, 2.0, f64::NAN, 1),
        (1.0, 2.0, 0.5, 0),
    ];
    for (s, g, b, i) in bad {
        match GradScaler::with_settings(s, g, b, i) {
            Err(e @ AutogradError::GradScaler { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("need"), "{msg}");
                assert!(msg.contains("a positive normal f32"), "{msg}");
            }
            other => panic!("{s} {g} {b} {i}: expected a GradScaler error, got {other:?}"),
        }
    }
    // The edges of the range are accepted.
    for s in [f32::MIN_POSITIVE as f64, f32::MAX as f64, 1.0] {
        assert_eq!(
            GradScaler::with_settings(s, 2.0, 0.5, 1)
                .unwrap()
                .get_scale(),
            s
        );
    }
}

/// One iteration with the scaler: backward of `loss_factor * sum(w)` scaled,
/// a step, an update. Returns whether the step ran.
fn iterate(scaler: &mut GradScaler, w: &Var, opt: &mut Sgd, nan: bool) -> bool {
    opt.zero_grad(true).unwrap();
    if nan {
        w.set_grad(Some(Tensor::from_slice(&[f32::NAN], &[1], CPU).unwrap()))
            .unwrap();
    } else {
        let loss = w.sum(None, false).unwrap();
        scaler.scale(&loss).unwrap().backward().unwrap();
    }
    let ran = scaler.step(opt).unwrap();
    scaler.update().unwrap();
    ran
}

/// The scale stays within the f32 range: growth stops below f32::MAX (as
/// PyTorch's `_amp_update_scale_` keeps it), back-off stops at the smallest
/// normal f32, and clean steps run at either end.
#[test]
fn grad_scaler_scale_stays_within_the_f32_range() {
    let w = param(&[1.0]);
    let mut opt = Sgd::new(vec![w.clone()], 0.0, 0.0).unwrap();
    // Growth by f64::MAX: it would be inf at once.
    let mut s = GradScaler::with_settings(1.0, f64::MAX / 2.0, 0.5, 1).unwrap();
    for _ in 0..3 {
        assert!(iterate(&mut s, &w, &mut opt, false));
        assert_eq!(s.get_scale(), 1.0, "kept: growing would pass f32::MAX");
    }
    let big = f32::MAX as f64 / 1.5;
    let mut s = GradScaler::with_settings(big, 2.0, 0.5, 1).unwrap();
    assert!(iterate(&mut s, &w, &mut opt, false));
    assert_eq!(s.get_scale(), big);
    let g = w.grad().unwrap().to_vec::<f32>().unwrap()[0];
    assert!((g - 1.0).abs() < 1e-6, "{g}");
    // Back-off by the smallest positive f64: it would be 0 in f32.
    let mut s = GradScaler::with_settings(65536.0, 2.0, f64::MIN_POSITIVE, 1000).unwrap();
    assert!(!iterate(&mut s, &w, &mut opt, true));
    assert_eq!(s.get_scale(), f32::MIN_POSITIVE as f64);
    assert!(!iterate(&mut s, &w, &mut opt, true));
    assert_eq!(s.get_scale(), f32::MIN_POSITIVE as f64);
    // A clean step still runs, with the gradient unscaled exactly.
    assert!(iterate(&mut s, &w, &mut opt, false));
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), [1.0]);
}

/// Hyper-parameter errors say what is accepted.
#[test]
fn hyperparameter_errors_say_what_is_accepted() {
    let p = || vec![param(&[1.0])];
    let cases: Vec<(&str, strata_autograd::Result<()>)> = vec![
        ("SGD lr NaN", Sgd::new(p(), f64::NAN, 0.0).map(|_| ())),
        // (An lr of +inf is accepted, as PyTorch's `0.0 <= lr`:
        // hostile_sweep_s31.rs.)
        (
            "SGD lr -inf",
            Sgd::new(p(), f64::NEG_INFINITY, 0.0).map(|_| ()),
        ),
        ("SGD lr -1", Sgd::new(p(), -1.0, 0.0).map(|_| ())),
        ("SGD momentum NaN", Sgd::new(p(), 0.1, f64::NAN).map(|_| ())),
        (
            "SGD wd NaN",
            Sgd::new(p(), 0.1, 0.0)
                .unwrap()
                .with_weight_decay(f64::NAN)
                .map(|_| ()),
        ),
        ("Adam lr -0.1", Adam::new(p(), -0.1).map(|_| ())),
        (
            "Adam beta1 1",
            Adam::new(p(), 0.1)
                .unwrap()
                .with_betas(1.0, 0.9)
                .map(|_| ()),
        ),
        (
            "Adam beta2 -0.1",
            Adam::new(p(), 0.1)
                .unwrap()
                .with_betas(0.9, -0.1)
                .map(|_| ()),
        ),
        (
            "Adam beta NaN",
            Adam::new(p(), 0.1)
                .unwrap()
                .with_betas(f64::NAN, 0.9)
                .map(|_| ()),
        ),
        (
            "Adam eps NaN",
            Adam::new(p(), 0.1).unwrap().with_eps(f64::NAN).map(|_| ()),
        ),
        (
            "Adam eps -1",
            Adam::new(p(), 0.1).unwrap().with_eps(-1.0).map(|_| ()),
        ),
        (
            "AdamW lr -inf",
            AdamW::new(p()).with_lr(f64::NEG_INFINITY).map(|_| ()),
        ),
        (
            "AdamW wd NaN",
            AdamW::new(p()).with_weight_decay(f64::NAN).map(|_| ()),
        ),
        (
            "AdamW wd -inf",
            AdamW::new(p())
                .with_weight_decay(f64::NEG_INFINITY)
                .map(|_| ()),
        ),
        (
            "AdamW betas 1.5",
            AdamW::new(p()).with_betas(0.9, 1.5).map(|_| ()),
        ),
    ];
    for (what, r) in cases {
        match r {
            Err(e @ AutogradError::Hyperparameter { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("expected"), "{what}: {msg}");
            }
            other => panic!("{what}: expected Hyperparameter, got {other:?}"),
        }
    }
    // A refused `set_lr` keeps the rate.
    let mut w = AdamW::new(p()).with_lr(0.01).unwrap();
    for lr in [f64::NAN, -1.0, f64::NEG_INFINITY] {
        assert!(w.set_lr(lr).is_err());
        assert_eq!(w.lr(), 0.01);
    }
}

// ----- guards: inputs that were already handled ---------------------------------

/// `zero_grad` and `step` on parameters without gradients: no error, no
/// update, no state allocated.
#[test]
fn zero_grad_and_step_without_gradients() {
    let ps = [param(&[1.0, 2.0]), param(&[3.0])];
    for (name, mut opt) in optimizers(&ps) {
        for set_to_none in [true, false] {
            opt.zero_grad(set_to_none).unwrap();
            assert!(ps.iter().all(|p| p.grad().is_none()), "{name}");
        }
        opt.step().unwrap();
        opt.step().unwrap();
        assert_eq!(values(&ps[0]), [1.0, 2.0], "{name}");
        assert_eq!(values(&ps[1]), [3.0], "{name}");
    }
    let mut s = Sgd::new(ps.to_vec(), 0.1, 0.9).unwrap();
    s.step().unwrap();
    assert_eq!(s.state_bytes(), 0);
    let mut a = Adam::new(ps.to_vec(), 0.1).unwrap();
    a.step().unwrap();
    assert_eq!(a.state_bytes(), 0);
    let mut w = AdamW::new(ps.to_vec());
    w.step().unwrap();
    assert_eq!(w.state_bytes(), 0);
    // A GradScaler step without gradients is refused, as PyTorch's
    // (`AssertionError: No inf checks were recorded for this optimizer.`;
    // until session 52 it ran the empty step and counted it as clean), and
    // changes nothing: `update` then has no check to count and is refused
    // too (PyTorch's "No inf checks were recorded prior to update.",
    // session 53), keeping the scale.
    let mut scaler = GradScaler::new();
    let e = scaler.step(&mut s).unwrap_err();
    assert!(matches!(e, AutogradError::GradScaler { .. }), "{e}");
    let e = scaler.update().unwrap_err();
    assert!(matches!(e, AutogradError::GradScaler { .. }), "{e}");
    assert_eq!(scaler.get_scale(), 65536.0);
    assert_eq!(scaler.growth_tracker(), 0);
}

/// Parameters of four float dtypes in one optimizer: each is updated in its
/// own dtype.
#[test]
fn parameters_of_different_dtypes_in_one_optimizer() {
    let make = || -> Vec<Var> {
        [DType::F32, DType::F64, DType::F16, DType::BF16]
            .into_iter()
            .map(|d| {
                let p = Var::parameter(Tensor::ones(&[3], d, CPU).unwrap()).unwrap();
                p.set_grad(Some(Tensor::ones(&[3], d, CPU).unwrap()))
                    .unwrap();
                p
            })
            .collect()
    };
    for name in ["SGD", "Adam", "AdamW"] {
        let ps = make();
        let mut opt = pick(name, &ps);
        opt.step().unwrap();
        for p in &ps {
            let v = values(p);
            assert!(
                v.iter().all(|&x| x < 1.0 && x > 0.85),
                "{name} {}: {v:?}",
                p.dtype()
            );
        }
    }
}

/// `eps` 0 is accepted, as in PyTorch; with non-zero gradients the first
/// step is `lr` against the gradient's sign.
#[test]
fn adam_with_zero_eps() {
    let p = with_grad(&[1.0, -1.0], &[2.0, -3.0]);
    let mut a = Adam::new(vec![p.clone()], 0.1)
        .unwrap()
        .with_eps(0.0)
        .unwrap();
    a.step().unwrap();
    let v = values(&p);
    assert!(
        (v[0] - 0.9).abs() < 1e-6 && (v[1] + 0.9).abs() < 1e-6,
        "{v:?}"
    );
}
