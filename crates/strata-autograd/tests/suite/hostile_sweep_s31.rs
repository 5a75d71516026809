//! Session 31's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s30.rs`). Each test asserts PyTorch's values (PyTorch
//! 2.15 on the CPU), or the typed error and the state left behind.
//!
//! Defects these tests found (fixed with them):
//!
//! * a parameter made in inference mode (and made to require grad there)
//!   was updated in place by an optimizer step after the region; the step
//!   is now `InferenceTensorInPlace` before any parameter or state is
//!   touched (PyTorch raises "Inplace update to inference tensor outside
//!   InferenceMode is not allowed" too, though only after its kernel wrote
//!   the update: its check is the version bump that follows the write);
//! * the optimizers refused `lr = inf` (and momentum, weight decay and eps
//!   of +inf), which PyTorch's `0.0 <= x` checks accept; the steps now give
//!   PyTorch's values (±inf, NaN where the update is inf * 0);
//! * `clip_grad_norm_` refused `max_norm = inf` (PyTorch's usual way to
//!   read the norm without clipping) and `max_norm = 0`; both now give
//!   PyTorch's gradients;
//! * `layer_norm` with `eps = inf` gave -0.0 (output and input gradient)
//!   where PyTorch's CPU kernels give +0.0 (see strata-tensor's
//!   `hostile_sweep_s31.rs`); `hostile_sweep_s30.rs` now checks the sign.

use strata_autograd::{
    clip_grad_norm_, inference_mode, Adam, AdamW, AutogradError, Optimizer, Sgd, Var,
};
use strata_tensor::{DType, Device, Tensor};

use crate::common;
use common::param;

const CPU: Device = Device::Cpu;
const INF: f32 = f32::INFINITY;
const NAN: f32 = f32::NAN;

fn values(v: &Var) -> Vec<f32> {
    v.data().to_vec::<f32>().unwrap()
}

/// PyTorch's values: NaN where NaN, infinities and the sign of zero exact,
/// finite values to 1e-6 (relative).
fn same(got: &[f32], want: &[f32]) {
    let ok = got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| {
            if b.is_nan() {
                a.is_nan()
            } else if b.is_infinite() || *b == 0.0 {
                a == b && a.is_sign_negative() == b.is_sign_negative()
            } else {
                ((a - b) / b).abs() <= 1e-6
            }
        });
    assert!(ok, "{got:?} vs {want:?}");
}

// --------------------------------------------------------- inference mode

/// A parameter made in inference mode and made to require grad there
/// (PyTorch: `with torch.inference_mode(): p = torch.ones(3) * 2;
/// p.requires_grad_(True)`), with a gradient from `(q + p).sum()` outside
/// the region (an add saves nothing, so the backward runs).
fn inference_parameter() -> Var {
    let p = inference_mode(|| {
        let p = Var::new(Tensor::ones(&[3], DType::F32, CPU).unwrap())
            .mul(2.0)
            .unwrap();
        p.requires_grad_(true).unwrap();
        p
    });
    assert!(p.is_inference() && p.requires_grad() && p.is_leaf());
    let q = param(&[1.0; 3]);
    q.add(&p)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(p.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0; 3]);
    p
}

type MakeOpt = fn(Vec<Var>) -> Box<dyn Optimizer>;

fn optimizers() -> Vec<(&'static str, MakeOpt)> {
    vec![
        ("SGD", |ps| Box::new(Sgd::new(ps, 0.1, 0.0).unwrap())),
        ("SGD momentum", |ps| {
            Box::new(Sgd::new(ps, 0.1, 0.9).unwrap())
        }),
        ("Adam", |ps| Box::new(Adam::new(ps, 0.1).unwrap())),
        ("AdamW", |ps| Box::new(AdamW::new(ps).with_lr(0.1).unwrap())),
    ]
}

#[test]
fn optimizers_refuse_inference_parameters_outside_inference_mode() {
    for (name, make) in optimizers() {
        // A normal parameter first, so that a step failing at the second
        // would already have updated the first.
        let n = param(&[1.0; 3]);
        n.set_grad(Some(Tensor::ones(&[3], DType::F32, CPU).unwrap()))
            .unwrap();
        let p = inference_parameter();
        let mut opt = make(vec![n.clone(), p.clone()]);
        let (vn, vp) = (n.version(), p.version());
        for _ in 0..2 {
            let e = opt.step().unwrap_err();
            assert!(
                matches!(e, AutogradError::InferenceTensorInPlace { .. }),
                "{name}: {e}"
            );
            assert!(e.to_string().contains("inference mode"), "{name}: {e}");
        }
        // Nothing written, no version bumped.
        assert_eq!(values(&n), vec![1.0; 3], "{name}");
        assert_eq!(values(&p), vec![2.0; 3], "{name}");
        assert_eq!((n.version(), p.version()), (vn, vp), "{name}");
        // Inside inference mode the step runs (PyTorch too), as a first
        // step: the failed ones advanced no state. PyTorch's first steps
        // from 1.0 and 2.0 with gradient 1: SGD (momentum or not) 0.9 and
        // 1.9; Adam 0.9 and 1.9 (lr * g / (|g| + eps)); AdamW
        // (1 - 0.1 * 0.01) p - 0.1: 0.899 and 1.898.
        inference_mode(|| opt.step()).unwrap();
        let want: [f32; 2] = if name == "AdamW" {
            [0.899, 1.898]
        } else {
            [0.9, 1.9]
        };
        same(&values(&n), &[want[0]; 3]);
        same(&values(&p), &[want[1]; 3]);
    }
}

#[test]
fn zero_grad_still_works_on_inference_parameters() {
    // Only the parameter itself is protected: its gradient is a normal
    // tensor (PyTorch: p.grad.is_inference() is False here), which
    // zero_grad may clear.
    let p = inference_parameter();
    let mut opt = Sgd::new(vec![p.clone()], 0.1, 0.0).unwrap();
    opt.zero_grad(false).unwrap();
    assert_eq!(p.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.0; 3]);
    opt.zero_grad(true).unwrap();
    assert!(p.grad().is_none());
    // Without a gradient the parameter is skipped, so the step is fine.
    opt.step().unwrap();
    assert_eq!(values(&p), vec![2.0; 3]);
}

// ----------------------------------------------------- infinite hyper-parameters

/// One parameter `p0` stepped by `opt` once per gradient; the values after
/// each step.
fn run(
    make: impl FnOnce(Vec<Var>) -> Box<dyn Optimizer>,
    p0: &[f32],
    grads: &[&[f32]],
) -> Vec<Vec<f32>> {
    let p = param(p0);
    let mut opt = make(vec![p.clone()]);
    grads
        .iter()
        .map(|g| {
            p.set_grad(Some(Tensor::from_slice(g, &[g.len()], CPU).unwrap()))
                .unwrap();
            opt.step().unwrap();
            values(&p)
        })
        .collect()
}

const P: [f32; 4] = [1.0, 2.0, -3.0, 4.0];
const G: [f32; 4] = [0.5, -0.25, 0.0, -0.0];

#[test]
fn sgd_with_infinite_hyperparameters_is_pytorchs() {
    // PyTorch: p.add_(g, alpha=-lr): -inf * 0.5 = -inf, -inf * -0.25 =
    // inf, -inf * ±0 = NaN.
    let r = run(
        |ps| Box::new(Sgd::new(ps, f64::INFINITY, 0.0).unwrap()),
        &P,
        &[&G],
    );
    same(&r[0], &[-INF, INF, NAN, NAN]);
    // With momentum 0.9 (buf = g, then 0.9 buf + g): the same twice.
    let r = run(
        |ps| Box::new(Sgd::new(ps, f64::INFINITY, 0.9).unwrap()),
        &P,
        &[&G, &G],
    );
    same(&r[0], &[-INF, INF, NAN, NAN]);
    same(&r[1], &[-INF, INF, NAN, NAN]);
    // Momentum inf: buf = g at the first step, inf * buf + g at the second.
    let r = run(
        |ps| Box::new(Sgd::new(ps, 0.1, f64::INFINITY).unwrap()),
        &P,
        &[&G, &G],
    );
    same(&r[0], &[0.95, 2.025, -3.0, 4.0]);
    same(&r[1], &[-INF, INF, NAN, NAN]);
    // Weight decay inf: g + inf * p (NaN where p is 0).
    let r = run(
        |ps| {
            Box::new(
                Sgd::new(ps, 0.1, 0.0)
                    .unwrap()
                    .with_weight_decay(f64::INFINITY)
                    .unwrap(),
            )
        },
        &[1.0, -2.0, 0.0, 4.0],
        &[&G],
    );
    same(&r[0], &[-INF, INF, NAN, -INF]);
    // f64 parameters alike.
    let p =
        Var::parameter(Tensor::from_slice(&[1.0f64, 2.0, -3.0, 4.0], &[4], CPU).unwrap()).unwrap();
    p.set_grad(Some(
        Tensor::from_slice(&[0.5f64, -0.25, 0.0, -0.0], &[4], CPU).unwrap(),
    ))
    .unwrap();
    Sgd::new(vec![p.clone()], f64::INFINITY, 0.0)
        .unwrap()
        .step()
        .unwrap();
    let got = p.data().to_vec::<f64>().unwrap();
    assert_eq!(got[..2], [f64::NEG_INFINITY, f64::INFINITY]);
    assert!(got[2].is_nan() && got[3].is_nan(), "{got:?}");
}

#[test]
fn adam_and_adamw_with_infinite_hyperparameters_are_pytorchs() {
    // lr inf: step_size inf times m / denom (m = 0 where g = 0: NaN).
    let r = run(
        |ps| Box::new(Adam::new(ps, f64::INFINITY).unwrap()),
        &P,
        &[&G],
    );
    same(&r[0], &[-INF, INF, NAN, NAN]);
    let adamw = |lr: f64, wd: f64| -> MakeOpt2 {
        Box::new(move |ps| {
            Box::new(
                AdamW::new(ps)
                    .with_lr(lr)
                    .unwrap()
                    .with_weight_decay(wd)
                    .unwrap(),
            )
        })
    };
    let r = run(adamw(f64::INFINITY, 0.0), &P, &[&G]);
    same(&r[0], &[-INF, INF, NAN, NAN]);
    // With weight decay 0.01: p *= 1 - inf = -inf first; -inf + inf = NaN.
    let r = run(adamw(f64::INFINITY, 0.01), &P, &[&G]);
    same(&r[0], &[-INF, NAN, NAN, NAN]);
    // Weight decay inf: p *= 1 - 0.1 inf (NaN where p is 0).
    let r = run(adamw(0.1, f64::INFINITY), &[1.0, -2.0, 0.0, -0.0], &[&G]);
    same(&r[0], &[-INF, INF, NAN, NAN]);
    // lr 0 and weight decay inf: 1 - 0 * inf is NaN, every weight NaN.
    let r = run(adamw(0.0, f64::INFINITY), &[1.0, -2.0, 0.0, -0.0], &[&G]);
    same(&r[0], &[NAN; 4]);
    // eps inf: every update is a zero and the weights stay (-0.0 - -0.0
    // and 0.0 - 0.0 are 0.0, PyTorch's -0.0 + 0.0 and 0.0 + -0.0).
    let r = run(
        |ps| Box::new(Adam::new(ps, 0.1).unwrap().with_eps(f64::INFINITY).unwrap()),
        &[1.0, -0.0, 0.0, 4.0],
        &[&G],
    );
    same(&r[0], &[1.0, 0.0, 0.0, 4.0]);
}

type MakeOpt2 = Box<dyn FnOnce(Vec<Var>) -> Box<dyn Optimizer>>;

#[test]
fn hyperparameter_checks_are_pytorchs() {
    // PyTorch 2.x: Adam/AdamW `0.0 <= lr`, `0.0 <= eps`,
    // `0.0 <= betas[i] < 1.0`, `0.0 <= weight_decay`; SGD `lr < 0.0`,
    // `momentum < 0.0`, `weight_decay < 0.0` are errors. +inf passes all
    // but the betas; NaN fails Adam's (strata refuses it for SGD too).
    let p = || vec![param(&[1.0])];
    let inf = f64::INFINITY;
    assert!(Sgd::new(p(), inf, inf).is_ok());
    assert!(Sgd::new(p(), 0.1, 0.0)
        .unwrap()
        .with_weight_decay(inf)
        .is_ok());
    assert!(Adam::new(p(), inf).unwrap().with_eps(inf).is_ok());
    assert!(AdamW::new(p())
        .with_lr(inf)
        .unwrap()
        .with_eps(inf)
        .unwrap()
        .with_weight_decay(inf)
        .is_ok());
    let mut w = AdamW::new(p());
    w.set_lr(inf).unwrap();
    assert_eq!(w.lr(), inf);
    let refused: Vec<(&str, strata_autograd::Result<()>)> = vec![
        ("SGD lr NaN", Sgd::new(p(), f64::NAN, 0.0).map(drop)),
        ("SGD lr -inf", Sgd::new(p(), -inf, 0.0).map(drop)),
        ("SGD lr -0.5", Sgd::new(p(), -0.5, 0.0).map(drop)),
        ("SGD momentum -0.5", Sgd::new(p(), 0.1, -0.5).map(drop)),
        ("SGD momentum NaN", Sgd::new(p(), 0.1, f64::NAN).map(drop)),
        (
            "SGD wd -1",
            Sgd::new(p(), 0.1, 0.0)
                .unwrap()
                .with_weight_decay(-1.0)
                .map(drop),
        ),
        ("Adam lr NaN", Adam::new(p(), f64::NAN).map(drop)),
        ("Adam lr -inf", Adam::new(p(), -inf).map(drop)),
        (
            "Adam eps NaN",
            Adam::new(p(), 0.1).unwrap().with_eps(f64::NAN).map(drop),
        ),
        (
            "Adam beta1 inf",
            Adam::new(p(), 0.1).unwrap().with_betas(inf, 0.9).map(drop),
        ),
        (
            "Adam beta2 1",
            Adam::new(p(), 0.1).unwrap().with_betas(0.9, 1.0).map(drop),
        ),
        ("AdamW lr NaN", AdamW::new(p()).with_lr(f64::NAN).map(drop)),
        (
            "AdamW wd NaN",
            AdamW::new(p()).with_weight_decay(f64::NAN).map(drop),
        ),
        ("AdamW eps -inf", AdamW::new(p()).with_eps(-inf).map(drop)),
    ];
    for (what, r) in refused {
        assert!(
            matches!(r, Err(AutogradError::Hyperparameter { .. })),
            "{what}: {r:?}"
        );
    }
}

#[test]
fn clip_grad_norm_takes_pytorchs_max_norms() {
    // PyTorch 2.15: clip_grad_norm_([p], inf) with grad [3, 4] returns 5
    // and leaves the gradient (coefficient min(inf / 5, 1) = 1); with 0 it
    // returns 5 and zeroes it; an inf gradient with max_norm inf gives
    // norm inf and NaN gradients (inf / inf).
    let with_grad = |g: &[f32]| {
        let p = param(&[0.0, 0.0]);
        p.set_grad(Some(Tensor::from_slice(g, &[2], CPU).unwrap()))
            .unwrap();
        p
    };
    let grad = |p: &Var| p.grad().unwrap().to_vec::<f32>().unwrap();
    let p = with_grad(&[3.0, 4.0]);
    let n = clip_grad_norm_(std::slice::from_ref(&p), f64::INFINITY).unwrap();
    assert_eq!(n.item::<f32>().unwrap(), 5.0);
    assert_eq!(grad(&p), vec![3.0, 4.0]);
    let p = with_grad(&[3.0, 4.0]);
    let n = clip_grad_norm_(std::slice::from_ref(&p), 0.0).unwrap();
    assert_eq!(n.item::<f32>().unwrap(), 5.0);
    same(&grad(&p), &[0.0, 0.0]);
    let p = with_grad(&[INF, 4.0]);
    let n = clip_grad_norm_(std::slice::from_ref(&p), f64::INFINITY).unwrap();
    assert_eq!(n.item::<f32>().unwrap(), INF);
    same(&grad(&p), &[NAN, NAN]);
    // Session 45: NaN and negative max_norm give PyTorch's gradients too
    // (they were refused): clip_grad_norm_([p], m) with grad [3, 4] returns
    // 5 and leaves [-0.5999999, -0.7999998] for -1, [nan, nan] for nan and
    // [-inf, -inf] for -inf (the coefficient m / (5 + 1e-6)).
    for (m, want) in [
        (-1.0, [-0.599_999_9, -0.799_999_8]),
        (f64::NAN, [NAN, NAN]),
        (f64::NEG_INFINITY, [-INF, -INF]),
    ] {
        let p = with_grad(&[3.0, 4.0]);
        let n = clip_grad_norm_(std::slice::from_ref(&p), m).unwrap();
        assert_eq!(n.item::<f32>().unwrap(), 5.0, "{m}");
        same(&grad(&p), &want);
    }
}
