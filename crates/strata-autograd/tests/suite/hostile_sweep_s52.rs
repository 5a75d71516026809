//! Session 52's sweep of hostile inputs to strata-autograd (CPU), with
//! PyTorch 2.15 (CPU, one thread) as the oracle. About 150 hand-written
//! probes, each run on both sides: graph semantics (backward twice with and
//! without `retain_graph`, `backward`/`grad` of leaves, of repeated outputs
//! and inputs, of outputs used as inputs, implicit and explicit output
//! gradients of other dtypes, shapes and kinds, `requires_grad_` on
//! non-leaves and integers, `detach` sharing the version counter, hooks and
//! `retain_grad` on roots, on twice-used values and across two passes,
//! post-accumulate-grad hooks of leaves outside the graph), in-place ops
//! mixing dtypes and broadcasting into a constant, an integer or a smaller
//! output, the gradients of the element-wise math, softmax, layer norm,
//! the losses and the reductions at ±inf, NaN and 0 (cross-entropy with
//! label smoothing and -inf logits, probability targets of 0 against -inf,
//! `var` with the correction equal to the count), dropout at p = 0 and 1
//! over inf and NaN, checkpoints under `no_grad` and inference mode, and
//! the `GradScaler` with one and several optimizers.
//!
//! Defects found, fixed in the same session (their tests below failed
//! before):
//!
//! * `GradScaler` kept one iteration state for all optimizers: a second
//!   optimizer's `step` (or `unscale_`) in the same iteration was refused
//!   ("step was already called since the last update()"), where PyTorch's
//!   scaler keeps a state per optimizer (its AMP recipe for several models
//!   and optimizers: `scaler.step(opt0); scaler.step(opt1);
//!   scaler.update()`), each optimizer skipping only on its own
//!   non-finite gradients and `update` backing off if any had one.
//! * `GradScaler::update` after `unscale_` without a `step` (the caller
//!   skipped the step) changed nothing; PyTorch's `update` reads the flag
//!   that `unscale_` recorded, so a non-finite gradient still halves the
//!   scale and a clean one counts towards growth.
//! * `GradScaler::step` over an optimizer none of whose parameters had a
//!   gradient took an empty step and counted it as clean (growing the
//!   scale); PyTorch refuses it ("No inf checks were recorded for this
//!   optimizer"). It is now a `GradScaler` error that records nothing.
//!
//! Examined and left as they are:
//!
//! * `GradScaler::update` with nothing recorded (no `step`, or an
//!   `unscale_` of an optimizer without gradients) changed nothing; PyTorch
//!   raises an `AssertionError` ("No inf checks were recorded prior to
//!   update"). Session 53 made it a `GradScaler` error that changes
//!   nothing (`grad_scaler_s53.rs`).
//! * PyTorch's unscale checks each gradient for inf/NaN before dividing it
//!   by the scale, so with a scale below 1 a finite gradient that the
//!   division turns into inf is stepped with (its parameter becomes inf or
//!   NaN); strata checked after dividing and skipped that step. Session 53
//!   follows PyTorch (`grad_scaler_s53.rs`).
//! * `GradScaler` has no `enabled` flag, no `update(new_scale)` and no
//!   state dictionary (PyTorch's `state_dict`/`load_state_dict` of the
//!   scale and growth tracker); features, not differences of behaviour.
//! * `backward(&[], &[], _)` of no outputs is an error; PyTorch's
//!   `torch.autograd.backward([])` does nothing. Kept (an empty list is
//!   almost surely a mistake, and `grad` refuses it in both).
//! * Exact `gelu` of -30 is -0.0 in strata, 0.0 in PyTorch (the sign of a
//!   zero, strata-tensor's forward kernel); layer-norm gradients of a row
//!   whose exact gradient is 0 come out about 1e-16 instead of PyTorch's
//!   1e-7 (rounding noise of either side, known).

use strata_autograd::{AutogradError, GradScaler, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;
const INF: f64 = f64::INFINITY;

// ----- helpers -----

/// An f32 leaf that requires grad.
fn param(v: &[f64]) -> Var {
    let t = Tensor::from_slice(v, &[v.len()], CPU)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    Var::parameter(t).unwrap()
}

/// A variable's values as f64.
fn vals(v: &Var) -> Vec<f64> {
    v.data().to_vec_as::<f64>().unwrap()
}

/// A variable's gradient as f64.
fn grad(v: &Var) -> Vec<f64> {
    v.grad().expect("a gradient").to_vec_as::<f64>().unwrap()
}

/// f32 values as PyTorch prints them (`0.699999988079071` is f32 0.7).
fn f32s(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x as f32)).collect()
}

/// `w0 = [1, 1]` and `w1 = [2, 2]`, each with its own SGD (lr 0.1), and a
/// scaler at scale 4 growing after every clean iteration.
fn two_optimizers() -> (Var, Var, Sgd, Sgd, GradScaler) {
    let w0 = param(&[1.0, 1.0]);
    let w1 = param(&[2.0, 2.0]);
    let o0 = Sgd::new(vec![w0.clone()], 0.1, 0.0).unwrap();
    let o1 = Sgd::new(vec![w1.clone()], 0.1, 0.0).unwrap();
    let scaler = GradScaler::with_settings(4.0, 2.0, 0.5, 1).unwrap();
    (w0, w1, o0, o1, scaler)
}

/// Backward of the scaled `3 sum(w0) + sum(w1 * k)` (`k = w1`, or inf).
fn backward_scaled(s: &GradScaler, w0: &Var, w1: &Var, w1_inf: bool) {
    let a = w0.sum(None, false).unwrap().mul(3.0).unwrap();
    let b = if w1_inf {
        w1.mul(INF).unwrap()
    } else {
        w1.mul(w1).unwrap()
    };
    let loss = a.add(&b.sum(None, false).unwrap()).unwrap();
    s.scale(&loss).unwrap().backward().unwrap();
}

fn is_scaler_error<T>(r: Result<T, AutogradError>) -> bool {
    matches!(r, Err(AutogradError::GradScaler { .. }))
}

// ----- GradScaler with several optimizers (fixed) -----

/// PyTorch:
/// ```python
/// w0 = nn.Parameter(torch.tensor([1., 1.])); w1 = nn.Parameter(torch.tensor([2., 2.]))
/// o0 = torch.optim.SGD([w0], lr=0.1); o1 = torch.optim.SGD([w1], lr=0.1)
/// s = GradScaler("cpu", init_scale=4.0, growth_interval=1)
/// s.scale(w0.sum() * 3 + (w1 * w1).sum()).backward()
/// s.step(o0); s.step(o1); s.update()
/// # w0 [0.699999988079071] * 2, w1 [1.600000023841858] * 2, scale 8.0
/// ```
/// Before the fix the second `step` was refused and `w1` did not move.
#[test]
fn one_scaler_steps_two_optimizers_as_pytorch() {
    let (w0, w1, mut o0, mut o1, mut s) = two_optimizers();
    backward_scaled(&s, &w0, &w1, false);
    assert!(s.step(&mut o0).unwrap());
    assert!(s.step(&mut o1).unwrap());
    s.update().unwrap();
    assert_eq!(vals(&w0), f32s(&[0.7, 0.7]));
    assert_eq!(vals(&w1), f32s(&[1.6, 1.6]));
    assert_eq!(s.get_scale(), 8.0);
}

/// PyTorch (as above, `w1 * inf` instead of `w1 * w1`):
/// ```python
/// s.step(o0); s.step(o1)   # o0 steps, o1 is skipped: w1.grad [inf, inf]
/// s.update()               # w0 [0.7] * 2, w1 [2., 2.], scale 2.0, growth tracker 0
/// ```
#[test]
fn each_optimizer_skips_on_its_own_gradients_and_update_backs_off() {
    let (w0, w1, mut o0, mut o1, mut s) = two_optimizers();
    backward_scaled(&s, &w0, &w1, true);
    assert!(s.step(&mut o0).unwrap());
    assert!(!s.step(&mut o1).unwrap());
    assert_eq!(grad(&w1), [INF, INF]);
    s.update().unwrap();
    assert_eq!(vals(&w0), f32s(&[0.7, 0.7]));
    assert_eq!(vals(&w1), [2.0, 2.0]);
    assert_eq!(s.get_scale(), 2.0);
    assert_eq!(s.growth_tracker(), 0);
}

/// PyTorch:
/// ```python
/// s.unscale_(o0)   # w0.grad [3., 3.]; w1.grad still scaled, [16., 16.]
/// s.step(o0); s.step(o1)
/// s.step(o0)       # RuntimeError: step() has already been called since the last update().
/// s.unscale_(o1)   # RuntimeError: unscale_() is being called after step().
/// s.update()       # w0 [0.7] * 2, w1 [1.6] * 2, scale 8.0
/// ```
#[test]
fn unscale_and_step_are_once_per_optimizer_per_iteration() {
    let (w0, w1, mut o0, mut o1, mut s) = two_optimizers();
    backward_scaled(&s, &w0, &w1, false);
    s.unscale_(&o0).unwrap();
    assert_eq!(grad(&w0), [3.0, 3.0]);
    assert_eq!(grad(&w1), [16.0, 16.0]);
    assert!(matches!(
        s.unscale_(&o0),
        Err(AutogradError::GradScaler { .. })
    ));
    assert!(s.step(&mut o0).unwrap());
    assert!(s.step(&mut o1).unwrap());
    assert!(is_scaler_error(s.step(&mut o0)));
    let e = s.unscale_(&o1).unwrap_err();
    assert!(e.to_string().contains("after step"), "{e}");
    // The refused calls changed nothing.
    assert_eq!(grad(&w1), [4.0, 4.0]);
    s.update().unwrap();
    assert_eq!(vals(&w0), f32s(&[0.7, 0.7]));
    assert_eq!(vals(&w1), f32s(&[1.6, 1.6]));
    assert_eq!(s.get_scale(), 8.0);
    // A new iteration may step both again.
    backward_scaled(&s, &w0, &w1, false);
    assert!(s.step(&mut o0).unwrap());
    assert!(s.step(&mut o1).unwrap());
}

// ----- update after unscale_ without a step (fixed) -----

/// PyTorch:
/// ```python
/// w = nn.Parameter(torch.ones(2)); opt = torch.optim.SGD([w], lr=0.1)
/// s = GradScaler("cpu", init_scale=4.0, growth_interval=1)
/// s.scale((w * float('inf')).sum()).backward()
/// s.unscale_(opt); s.update()     # scale 2.0, growth tracker 0
/// w.grad = None
/// s.scale((w * 2).sum()).backward()
/// s.unscale_(opt); s.update()     # scale 4.0 (grown), growth tracker 0
/// ```
/// and, with two optimizers, `s.unscale_(o1)` (w1's gradient inf) then
/// `s.step(o0); s.update()` steps w0 to [0.7, 0.7] and halves the scale to
/// 2.0. Before the fix `update` ignored what `unscale_` found.
#[test]
fn update_after_unscale_without_step_counts_the_check() {
    let w = param(&[1.0, 1.0]);
    let opt = Sgd::new(vec![w.clone()], 0.1, 0.0).unwrap();
    let mut s = GradScaler::with_settings(4.0, 2.0, 0.5, 1).unwrap();
    let loss = w.mul(INF).unwrap().sum(None, false).unwrap();
    s.scale(&loss).unwrap().backward().unwrap();
    s.unscale_(&opt).unwrap();
    s.update().unwrap();
    assert_eq!(s.get_scale(), 2.0);
    assert_eq!(s.growth_tracker(), 0);
    w.zero_grad(true).unwrap();
    let loss = w.mul(2.0).unwrap().sum(None, false).unwrap();
    s.scale(&loss).unwrap().backward().unwrap();
    s.unscale_(&opt).unwrap();
    s.update().unwrap();
    assert_eq!(s.get_scale(), 4.0);
    assert_eq!(s.growth_tracker(), 0);
    assert_eq!(vals(&w), [1.0, 1.0]);

    let (w0, w1, mut o0, o1, mut s) = two_optimizers();
    backward_scaled(&s, &w0, &w1, true);
    s.unscale_(&o1).unwrap();
    assert!(s.step(&mut o0).unwrap());
    s.update().unwrap();
    assert_eq!(vals(&w0), f32s(&[0.7, 0.7]));
    assert_eq!(s.get_scale(), 2.0);
}

// ----- a step without gradients (fixed) -----

/// PyTorch (the loss uses only `w0`):
/// ```python
/// s.scale(w0.sum() * 3).backward()
/// s.step(o0)    # steps w0
/// s.step(o1)    # AssertionError: No inf checks were recorded for this optimizer.
/// s.update()    # scale 8.0 (o0's clean step)
/// ```
/// A lone optimizer without gradients, stepped through a scaler, is the
/// same error, and `update` then refuses to run, changing nothing, as
/// PyTorch raises "No inf checks were recorded prior to update" (session
/// 53; until then strata's `update` did nothing). Before the fix the empty
/// step counted as clean and the scale grew.
#[test]
fn a_scaler_step_over_no_gradient_is_refused() {
    let (w0, w1, mut o0, mut o1, mut s) = two_optimizers();
    let loss = w0.sum(None, false).unwrap().mul(3.0).unwrap();
    s.scale(&loss).unwrap().backward().unwrap();
    assert!(s.step(&mut o0).unwrap());
    let e = s.step(&mut o1).unwrap_err();
    assert!(matches!(e, AutogradError::GradScaler { .. }), "{e}");
    assert!(e.to_string().contains("gradient"), "{e}");
    // Refused again the same way: the failed call recorded nothing.
    let e2 = s.step(&mut o1).unwrap_err();
    assert_eq!(e.to_string(), e2.to_string());
    s.update().unwrap();
    assert_eq!(s.get_scale(), 8.0);
    assert_eq!(vals(&w1), [2.0, 2.0]);

    // unscale_ of an optimizer without gradients records no check, and
    // its step is refused too.
    let mut s = GradScaler::with_settings(4.0, 2.0, 0.5, 1).unwrap();
    s.unscale_(&o1).unwrap();
    assert!(is_scaler_error(s.step(&mut o1)));
    assert!(is_scaler_error(s.update()));
    assert_eq!(s.get_scale(), 4.0);
    assert_eq!(s.growth_tracker(), 0);
}
