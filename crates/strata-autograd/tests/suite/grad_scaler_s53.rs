//! Session 53: `GradScaler` against PyTorch 2.15's `torch.amp.GradScaler`
//! (CPU) where they differed.
//!
//! * `update` with no gradient checked since the last update did nothing;
//!   PyTorch raises "No inf checks were recorded prior to update." (an
//!   `AssertionError`) and keeps its per-optimizer states. It is now a
//!   `GradScaler` error that changes nothing, raised exactly where
//!   PyTorch's is: never by a disabled scaler, nor by `update(new_scale)`
//!   (`update_to`), nor after an `unscale_` alone of an optimizer with
//!   gradients, nor after a step whose optimizer failed (PyTorch counts its
//!   check).
//! * The non-finite check followed the division by the scale, so with a
//!   scale below 1 a finite gradient that the division made infinite
//!   skipped the step. PyTorch's `_amp_foreach_non_finite_check_and_unscale_`
//!   checks each value before multiplying it by `inv_scale`
//!   (`AmpGradScalerKernels.cpp`: `if (!std::isfinite(val_in)) *found_inf
//!   = 1.f; return val_in * inv_scale;`), so it steps with the infinite
//!   gradient; so does strata now.
//!
//! The expected values are PyTorch's, from the snippets above each test
//! (run with `/tmp/tv/bin/python`, one thread).

use strata_autograd::{AutogradError, GradScaler, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

/// A leaf of `dtype` that requires grad.
fn param(v: &[f64], dtype: DType) -> Var {
    let t = Tensor::from_slice(v, &[v.len()], CPU)
        .unwrap()
        .to_dtype(dtype)
        .unwrap();
    Var::parameter(t).unwrap()
}

/// `p` with its gradient set to `g` (of `p`'s dtype), and an SGD (lr 0.1)
/// over it.
fn with_grad(p: &Var, g: &[f64]) -> Sgd {
    let t = Tensor::from_slice(g, &[g.len()], CPU)
        .unwrap()
        .to_dtype(p.dtype())
        .unwrap();
    p.set_grad(Some(t)).unwrap();
    Sgd::new(vec![p.clone()], 0.1, 0.0).unwrap()
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

/// The error `update` gives when no check was recorded, with the scale and
/// growth count unchanged.
fn assert_update_refused(s: &mut GradScaler) {
    let before = (s.get_scale(), s.growth_tracker());
    let e = s.update().unwrap_err();
    assert!(matches!(e, AutogradError::GradScaler { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("No inf checks were recorded"), "{msg}");
    assert!(msg.contains("update_to"), "says what to do: {msg}");
    assert_eq!((s.get_scale(), s.growth_tracker()), before);
}

/// ```python
/// s = torch.amp.GradScaler("cpu"); s.scale(torch.ones(()))
/// s.update()   # AssertionError: No inf checks were recorded prior to update.
/// s.get_scale(), s._growth_tracker   # 65536.0, 0
/// p.grad = torch.full((2,), 65536.); s.step(o); s.update()   # growth tracker 1
/// s.update()   # AssertionError again (a second update in a row)
/// s.get_scale(), s._growth_tracker   # 65536.0, 1
/// s.update(1024.)   # fine without checks: scale 1024.0
/// torch.amp.GradScaler("cpu", enabled=False).update()   # fine
/// ```
#[test]
fn update_without_an_inf_check_is_refused_as_pytorch() {
    let mut s = GradScaler::new();
    assert_update_refused(&mut s);
    // The refusal changed nothing: an iteration then runs as usual.
    let p = param(&[1.0, 1.0], DType::F32);
    let mut o = with_grad(&p, &[65536.0, 65536.0]);
    assert!(s.step(&mut o).unwrap());
    s.update().unwrap();
    assert_eq!((s.get_scale(), s.growth_tracker()), (65536.0, 1));
    assert_eq!(vals(p.data()), [0.8999999761581421; 2]);
    // A second update in a row has nothing recorded.
    assert_update_refused(&mut s);
    assert_eq!((s.get_scale(), s.growth_tracker()), (65536.0, 1));
    // `update_to` (PyTorch's `update(new_scale)`) needs no check.
    s.update_to(1024.0).unwrap();
    assert_eq!(s.get_scale(), 1024.0);
    // A disabled scaler's update never fails.
    GradScaler::disabled().update().unwrap();
}

/// ```python
/// s = torch.amp.GradScaler("cpu"); s.scale(torch.ones(()))
/// p, o = <SGD over a parameter without .grad>
/// s.step(o)      # AssertionError: No inf checks were recorded for this optimizer.
/// s.update()     # AssertionError: No inf checks were recorded prior to update.
/// s.step(o)      # AssertionError again
/// p2.grad = torch.full((2,), 65536.); s.step(o2); s.update()   # fine: scale 65536.0, tracker 1
///
/// s.unscale_(o)  # o without gradients: records no check
/// s.update()     # AssertionError: No inf checks were recorded prior to update.
/// s.unscale_(o)  # RuntimeError: unscale_() has already been called ... (the state was kept)
/// ```
#[test]
fn update_after_optimizers_without_gradients_is_refused_and_keeps_the_iteration() {
    let mut s = GradScaler::new();
    let p = param(&[1.0, 1.0], DType::F32);
    let mut o = Sgd::new(vec![p.clone()], 0.1, 0.0).unwrap();
    assert!(matches!(
        s.step(&mut o),
        Err(AutogradError::GradScaler { .. })
    ));
    assert_update_refused(&mut s);
    assert!(s.step(&mut o).is_err());
    // Another optimizer's clean step makes the iteration count.
    let p2 = param(&[1.0, 1.0], DType::F32);
    let mut o2 = with_grad(&p2, &[65536.0, 65536.0]);
    assert!(s.step(&mut o2).unwrap());
    s.update().unwrap();
    assert_eq!((s.get_scale(), s.growth_tracker()), (65536.0, 1));

    // unscale_ of an optimizer without gradients: refused at update, and
    // the iteration's state is kept (a second unscale_ is refused, as
    // PyTorch's).
    s.unscale_(&o).unwrap();
    assert_update_refused(&mut s);
    let e = s.unscale_(&o).unwrap_err();
    assert!(e.to_string().contains("already called"), "{e}");
    // update_to ends the iteration; then unscale_ runs again.
    s.update_to(s.get_scale()).unwrap();
    assert_eq!((s.get_scale(), s.growth_tracker()), (65536.0, 1));
    s.unscale_(&o).unwrap();
}

/// ```python
/// s = torch.amp.GradScaler("cpu"); s.scale(torch.ones(()))
/// p.grad = torch.full((2,), 65536.); s.unscale_(o); s.update()   # fine: tracker 1
/// h = torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16))
/// h.grad = torch.full((2,), 65536., dtype=torch.bfloat16); bad = torch.optim.SGD([h], lr=1e39)
/// s.step(bad)   # RuntimeError: value cannot be converted to type c10::BFloat16 without overflow
/// h, h.grad     # [1., 1.], [1., 1.] (unscaled once)
/// s.update()    # fine: the check counts (scale 65536.0, tracker 2)
/// ```
/// An optimizer whose step fails after its gradients were checked: its
/// check is recorded, so `update` does not raise, and counts it as
/// PyTorch's does (tracker 2; until session 54b strata counted no step for
/// it and kept 1).
#[test]
fn update_after_unscale_alone_or_a_failed_step_is_not_refused() {
    let mut s = GradScaler::new();
    let p = param(&[1.0, 1.0], DType::F32);
    let o = with_grad(&p, &[65536.0, 65536.0]);
    s.unscale_(&o).unwrap();
    s.update().unwrap();
    assert_eq!((s.get_scale(), s.growth_tracker()), (65536.0, 1));

    // An lr of 1e39 does not fit a bf16 parameter: the step fails after
    // the scaler checked and unscaled the gradients.
    let h = param(&[1.0, 1.0], DType::BF16);
    let mut bad = with_grad(&h, &[65536.0, 65536.0]);
    bad.set_lr(1e39).unwrap();
    let r = s.step(&mut bad);
    assert!(r.is_err(), "the step fails");
    assert!(!matches!(r, Err(AutogradError::GradScaler { .. })));
    // The gradients were checked (and unscaled, once): update does not
    // raise, and counts the clean check.
    s.update().unwrap();
    assert_eq!((s.get_scale(), s.growth_tracker()), (65536.0, 2));
    assert_eq!(vals(&h.grad().unwrap()), [1.0, 1.0]);
    assert_eq!(vals(h.data()), [1.0, 1.0]);
}

/// ```python
/// s = torch.amp.GradScaler("cpu", init_scale=0.25, growth_interval=1); s.scale(torch.ones(()))
/// p = torch.nn.Parameter(torch.tensor([1., 1.], dtype=dt)); o = torch.optim.SGD([p], lr=0.1)
/// p.grad = torch.tensor([big, 1.], dtype=dt)   # big = 1e38 (f32), 1e308 (f64)
/// s.step(o)      # found_inf 0.0: the step runs
/// p              # [-inf, 0.6000000238418579] (f32), [-inf, 0.6] (f64)
/// p.grad         # [inf, 4.0]
/// s.update()     # scale 0.5 (grown), tracker 0
/// ```
#[test]
fn a_gradient_made_infinite_by_unscaling_is_stepped_with_as_pytorch() {
    for (dtype, big, p1) in [
        (DType::F32, 1e38, 0.6000000238418579),
        (DType::F64, 1e308, 0.6),
    ] {
        let mut s = GradScaler::with_settings(0.25, 2.0, 0.5, 1).unwrap();
        let p = param(&[1.0, 1.0], dtype);
        let mut o = with_grad(&p, &[big, 1.0]);
        assert!(s.step(&mut o).unwrap(), "{dtype}: the step runs");
        assert_eq!(vals(p.data()), [f64::NEG_INFINITY, p1], "{dtype}");
        assert_eq!(vals(&p.grad().unwrap()), [f64::INFINITY, 4.0], "{dtype}");
        s.update().unwrap();
        assert_eq!((s.get_scale(), s.growth_tracker()), (0.5, 0), "{dtype}");
    }
}

/// ```python
/// s = torch.amp.GradScaler("cpu", init_scale=0.5); s.scale(torch.ones(()))
/// p.grad = torch.tensor([3e38, -2e38]); s.unscale_(o)
/// p.grad      # [inf, -inf]; found_inf 0.0
/// s.update()  # scale 0.5, tracker 1
/// p.grad = torch.tensor([inf, 1.]); s.step(o)   # skipped: p [1., 2.], grad [inf, 2.]
/// s.update()  # scale 0.25
/// ```
#[test]
fn unscale_checks_each_gradient_before_dividing_it() {
    let mut s = GradScaler::with_settings(0.5, 2.0, 0.5, 2000).unwrap();
    let p = param(&[1.0, 2.0], DType::F32);
    let o = with_grad(&p, &[3e38, -2e38]);
    s.unscale_(&o).unwrap();
    assert_eq!(vals(&p.grad().unwrap()), [f64::INFINITY, f64::NEG_INFINITY]);
    s.update().unwrap();
    assert_eq!((s.get_scale(), s.growth_tracker()), (0.5, 1));
    // A gradient that is infinite before the division still skips.
    let q = param(&[1.0, 2.0], DType::F32);
    let mut oq = with_grad(&q, &[f64::INFINITY, 1.0]);
    assert!(!s.step(&mut oq).unwrap());
    assert_eq!(vals(q.data()), [1.0, 2.0]);
    assert_eq!(vals(&q.grad().unwrap()), [f64::INFINITY, 2.0]);
    s.update().unwrap();
    assert_eq!(s.get_scale(), 0.25);
}
