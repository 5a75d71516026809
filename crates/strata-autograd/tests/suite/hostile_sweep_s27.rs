//! Session 27's sweep of hostile inputs to autograd (after
//! `hostile_inputs*.rs` and `adversarial.rs`). Each test asserts the typed
//! error or PyTorch's values.
//!
//! Defects these tests found (fixed with them):
//!
//! * a view taken before its base was modified by a recorded in-place op
//!   (`v = y.narrow(..); y.mul_(2)`) back-propagated through the base's old
//!   history: the gradient silently left out the in-place op (`mul_(2)` did
//!   not double it, `add_(&w)` gave `w` nothing). Reaching such a view in
//!   backward was then [`AutogradError::ViewOfModifiedBase`] (a view used
//!   before the in-place op still back-propagates, correctly); since
//!   session 42 its history is regenerated from the base's, as PyTorch's;
//! * `nll_loss` with reduction `Mean` and every target equal to
//!   `ignore_index` gave NaN gradients (`0 * (g / 0)` in the ignored rows'
//!   class-0 entries); PyTorch gives zeros;
//! * the class weight of `nll_loss` and `cross_entropy` and the weight of
//!   `mse_loss` were not version-checked: changed in place between forward
//!   and backward, they silently changed the gradient (PyTorch refuses);
//! * a parameter captured by a checkpointed function had its
//!   post-accumulate-grad hooks run twice per backward, the first time
//!   inside the recomputation with a gradient still missing what ops outside
//!   the checkpoint contribute: `DistributedDataParallel` over checkpointed
//!   blocks failed with "got its gradient twice";
//! * an f16 autocast region nested in a bf16 one (or the reverse) was handed
//!   the outer region's cached copy of a parameter, so its ops failed on
//!   mixed dtypes;
//! * `linear` with `in_features` 0 (for inputs of 1 or 3+ dims),
//!   `gelu_linear` with 0 features in or out, and the backward of an
//!   embedding of width 0 were Shape errors (`reshape([-1, 0])` is
//!   ambiguous); they now give PyTorch's results;
//! * `clip_grad_norm_` squared f16 gradients in f16: an element above 256
//!   made the norm inf and every gradient was scaled to 0;
//! * `maximum`/`minimum` gave 0 gradient to both operands where one was NaN
//!   (PyTorch passes g to both there);
//! * a view made in `no_grad` of a variable that requires grad, then
//!   modified in place with grad mode on, changed a parameter (or a recorded
//!   variable) behind autograd's back; PyTorch forbids it, and strata now
//!   refuses it with [`AutogradError::InPlaceOnNoGradView`], views of such a
//!   view included.

use std::sync::{Arc, Mutex};
use strata_autograd::autocast::{AutocastGuard, DeviceType};
use strata_autograd::distributed::{DdpConfig, DistributedDataParallel, LocalGroup};
use strata_autograd::{checkpoint, AutogradError, Var};
use strata_tensor::{CrossEntropyArgs, DType, Device, Reduction, Tensor};

use crate::common;
use common::{grad, param};

const CPU: Device = Device::Cpu;

fn param2(v: &[f32], shape: &[usize]) -> Var {
    Var::parameter(Tensor::from_slice(v, shape, CPU).unwrap()).unwrap()
}

fn sum(v: &Var) -> Var {
    v.sum(None, false).unwrap()
}

// ------------------------------------------------ views of modified bases

#[test]
fn a_view_of_a_base_modified_in_place_afterwards_gets_pytorchs_gradient() {
    // v = y[:2]; y *= 2; v.sum().backward(): PyTorch gives x.grad = [2, 2, 0]
    // (the view's history is regenerated onto mul_); strata gave [1, 1, 0],
    // then (this session to session 41) refused it with ViewOfModifiedBase;
    // since session 42 it regenerates the history as PyTorch does
    // (benches/anchors/gen_inplace_views_s42.py: s27_*).
    let x = param(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0f32).unwrap();
    let v = y.narrow(0, 0, 2).unwrap();
    y.mul_(2.0f32).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    assert_eq!(v.grad_fn_name(), Some("AsStridedBackward"));
    sum(&v).backward_with(None, true).unwrap();
    assert_eq!(grad(&x), vec![2.0, 2.0, 0.0]);
    // The view itself as the root of backward.
    x.zero_grad(true).unwrap();
    let g = Tensor::ones(&[2], DType::F32, CPU).unwrap();
    v.backward_with(Some(&g), false).unwrap();
    assert_eq!(grad(&x), vec![2.0, 2.0, 0.0]);

    // add_ of a variable that requires grad: w gets its gradient through v.
    let x = param(&[1.0, 2.0, 3.0]);
    let w = param(&[10.0, 20.0, 30.0]);
    let y = x.mul(1.0f32).unwrap();
    let v = y.t().unwrap();
    y.add_(&w).unwrap();
    sum(&v).backward().unwrap();
    assert_eq!(grad(&x), vec![1.0, 1.0, 1.0]);
    assert_eq!(grad(&w), vec![1.0, 1.0, 1.0]);

    // A view of a view: the modified variable is two views up.
    let x = param(&[1.0, 2.0, 3.0, 4.0]);
    let y = x.mul(1.0f32).unwrap();
    let v = y.view(&[2, 2]).unwrap();
    let vv = v.transpose(0, 1).unwrap();
    y.zero_().unwrap();
    sum(&vv).backward().unwrap();
    assert_eq!(grad(&x), vec![0.0; 4]);
}

#[test]
fn views_used_before_the_in_place_op_or_taken_after_it_get_pytorchs_gradients() {
    // Used before: v.sum() read the old values, its gradient goes to the old
    // history; y.sum() after mul_ gets 2 per element.
    let x = param(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0f32).unwrap();
    let v = y.narrow(0, 0, 2).unwrap();
    let s = sum(&v);
    y.mul_(2.0f32).unwrap();
    let loss = s.add(&sum(&y)).unwrap();
    loss.backward().unwrap();
    assert_eq!(grad(&x), vec![3.0, 3.0, 2.0]);

    // Taken after: the view's history includes the in-place op.
    let x = param(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0f32).unwrap();
    y.mul_(2.0f32).unwrap();
    let v = y.narrow(0, 1, 2).unwrap();
    sum(&v).backward().unwrap();
    assert_eq!(grad(&x), vec![0.0, 2.0, 2.0]);

    // Another variable's in-place op does not make a view stale.
    let x = param(&[1.0, 2.0]);
    let y = x.mul(1.0f32).unwrap();
    let v = y.unsqueeze(0).unwrap();
    let other = x.mul(3.0f32).unwrap();
    other.mul_(2.0f32).unwrap();
    sum(&v).add(&sum(&other)).unwrap().backward().unwrap();
    assert_eq!(grad(&x), vec![7.0, 7.0]);

    // Changes under no_grad are not recorded, as in PyTorch: the view's
    // gradient is that of its recorded history.
    let x = param(&[1.0, 2.0]);
    let y = x.mul(1.0f32).unwrap();
    let v = y.narrow(0, 0, 1).unwrap();
    strata_autograd::no_grad(|| y.mul_(5.0f32).map(|_| ())).unwrap();
    sum(&v).backward().unwrap();
    assert_eq!(grad(&x), vec![1.0, 0.0]);
}

// ------------------------------------------------------------- losses

#[test]
fn nll_loss_mean_with_every_target_ignored_has_zero_gradients() {
    let logits = [0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6];
    let all_ignored = Tensor::from_slice(&[-100i64, -100], &[2], CPU).unwrap();
    let x = param2(&logits, &[2, 3]);
    let loss = x
        .nll_loss(&all_ignored, None, -100, Reduction::Mean)
        .unwrap();
    assert!(loss.item::<f32>().unwrap().is_nan(), "0 / 0, as PyTorch");
    loss.backward().unwrap();
    assert_eq!(grad(&x), vec![0.0; 6], "PyTorch's nll_loss_backward");
    // With a class weight, and cross_entropy (which was right) agreeing.
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], CPU).unwrap();
    let x = param2(&logits, &[2, 3]);
    x.nll_loss(&all_ignored, Some(&w), -100, Reduction::Mean)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![0.0; 6]);
    let x = param2(&logits, &[2, 3]);
    x.cross_entropy(&all_ignored, CrossEntropyArgs::default())
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![0.0; 6]);
    // One row ignored: the other gets -w[t] / Σw.
    let t = Tensor::from_slice(&[2i64, -100], &[2], CPU).unwrap();
    let x = param2(&logits, &[2, 3]);
    x.nll_loss(&t, Some(&w), -100, Reduction::Mean)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![0.0, 0.0, -1.0, 0.0, 0.0, 0.0]);
}

fn assert_modified(r: strata_autograd::Result<()>, what: &str) {
    assert!(
        matches!(r, Err(AutogradError::SavedTensorModified { .. })),
        "{what}: {r:?}"
    );
}

#[test]
fn loss_weights_changed_in_place_after_the_forward_are_refused_at_backward() {
    let logits = [0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6];
    let t = Tensor::from_slice(&[0i64, 2], &[2], CPU).unwrap();
    let w = || Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], CPU).unwrap();

    // nll_loss: the gradient was -100 where PyTorch refuses.
    let (x, wt) = (param2(&logits, &[2, 3]), w());
    let loss = x.nll_loss(&t, Some(&wt), -100, Reduction::Sum).unwrap();
    wt.fill_(100.0).unwrap();
    assert_modified(loss.backward(), "nll_loss");
    assert!(x.grad().is_none());

    // cross_entropy with class targets.
    let (x, wt) = (param2(&logits, &[2, 3]), w());
    let args = CrossEntropyArgs {
        weight: Some(&wt),
        ..Default::default()
    };
    let loss = x.cross_entropy(&t, args).unwrap();
    wt.fill_(100.0).unwrap();
    assert_modified(loss.backward(), "cross_entropy");

    // mse_loss.
    let x = param(&[1.0, 2.0]);
    let y = Var::new(Tensor::zeros(&[2], DType::F32, CPU).unwrap());
    let mw = Tensor::from_slice(&[1.0f32, 1.0], &[2], CPU).unwrap();
    let loss = x.mse_loss(&y, Reduction::Sum, Some(&mw)).unwrap();
    mw.fill_(7.0).unwrap();
    assert_modified(loss.backward(), "mse_loss");

    // Unmodified weights still give the weighted gradients.
    let (x, wt) = (param2(&logits, &[2, 3]), w());
    x.nll_loss(&t, Some(&wt), -100, Reduction::Sum)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![-1.0, 0.0, 0.0, 0.0, 0.0, -3.0]);
    let x = param(&[1.0, 2.0]);
    let mw = Tensor::from_slice(&[1.0f32, 3.0], &[2], CPU).unwrap();
    x.mse_loss(&y, Reduction::Sum, Some(&mw))
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(grad(&x), vec![2.0, 12.0]);
}

// ------------------------------------------------------------ checkpoint

#[test]
fn a_captured_parameters_hook_runs_once_with_its_final_gradient() {
    let w = param(&[1.0, 2.0]);
    let x = param(&[3.0, 4.0]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let _h = w
        .register_post_accumulate_grad_hook(move |p| {
            s2.lock()
                .unwrap()
                .push(p.grad().unwrap().to_vec::<f32>().unwrap());
            Ok(())
        })
        .unwrap();
    // w is also used outside the checkpoint, recorded before it (so the
    // checkpoint's backward runs first).
    let outside = w.mul(10.0f32).unwrap();
    let w2 = w.clone();
    let y = checkpoint(move |xs| xs[0].mul(&w2), std::slice::from_ref(&x)).unwrap();
    sum(&y.add(&outside).unwrap()).backward().unwrap();
    // x + 10 = [13, 14]; the hook ran once, after both contributions
    // (it ran twice, first with [3, 4]).
    assert_eq!(*seen.lock().unwrap(), vec![vec![13.0f32, 14.0]]);
    assert_eq!(grad(&w), vec![13.0, 14.0]);
    assert_eq!(grad(&x), vec![1.0, 2.0]);
}

#[test]
fn data_parallel_training_over_checkpointed_blocks() {
    let (_g, mut ranks) = LocalGroup::new(1, CPU).unwrap();
    let comm: Arc<dyn strata_autograd::distributed::Collective> = Arc::new(ranks.remove(0));
    let w = param(&[0.5, -1.0, 2.0]);
    let b = param(&[0.1, 0.2, 0.3]);
    let ddp =
        DistributedDataParallel::new(&[w.clone(), b.clone()], comm, DdpConfig::default()).unwrap();
    let x = Var::new(Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], CPU).unwrap());
    for _ in 0..2 {
        ddp.zero_grad().unwrap();
        let (w2, b2) = (w.clone(), b.clone());
        let h = checkpoint(
            move |xs| xs[0].mul(&w2)?.add(&b2)?.tanh(),
            std::slice::from_ref(&x),
        )
        .unwrap();
        // Failed with "parameter 0 got its gradient twice in one iteration".
        sum(&h).backward().unwrap();
        ddp.finish().unwrap();
        // One rank: the reduced gradient is the gradient itself.
        let hv: Vec<f32> = [1.0f32, 2.0, 3.0]
            .iter()
            .zip([0.5f32, -1.0, 2.0].iter().zip([0.1f32, 0.2, 0.3]))
            .map(|(x, (w, b))| 1.0 - (x * w + b).tanh().powi(2))
            .collect();
        let gb = grad(&b);
        for (g, want) in gb.iter().zip(&hv) {
            assert!((g - want).abs() < 1e-6, "{gb:?} vs {hv:?}");
        }
        let gw = grad(&w);
        for ((g, d), x) in gw.iter().zip(&hv).zip([1.0f32, 2.0, 3.0]) {
            assert!((g - d * x).abs() < 1e-6, "{gw:?}");
        }
    }
}

// -------------------------------------------------------------- autocast

#[test]
fn nested_autocast_regions_of_two_dtypes_cast_to_their_own() {
    let w = Var::parameter(Tensor::ones(&[2, 2], DType::F32, CPU).unwrap()).unwrap();
    let x = Var::new(Tensor::ones(&[1, 2], DType::F32, CPU).unwrap());
    let _outer = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
    let a = x.matmul(&w).unwrap();
    assert_eq!(a.dtype(), DType::BF16);
    {
        let _inner = AutocastGuard::new(DeviceType::Cpu, DType::F16).unwrap();
        // Was a DType error: the bf16 copy of w from the outer region.
        let b = x.matmul(&w).unwrap();
        assert_eq!(b.dtype(), DType::F16);
        assert_eq!(b.data().to_vec_as::<f32>().unwrap(), vec![2.0, 2.0]);
        sum(&b).backward().unwrap();
    }
    // Back in the outer region the bf16 copy is still the cached one.
    let c = x.matmul(&w).unwrap();
    assert_eq!(c.dtype(), DType::BF16);
    sum(&c).backward().unwrap();
    assert_eq!(grad(&w), vec![2.0; 4]);
}

// ------------------------------------------------ zero-width layers

fn zeros_param(shape: &[usize]) -> Var {
    Var::parameter(Tensor::zeros(shape, DType::F32, CPU).unwrap()).unwrap()
}

#[test]
fn linear_layers_with_zero_features_give_pytorchs_results() {
    // in_features 0: x @ w^T is zeros, the result the bias (was a Shape
    // error from `reshape([-1, 0])` for inputs of 1 or 3+ dims).
    let b = param(&[1.0, 2.0, 3.0, 4.0]);
    for x_shape in [vec![2usize, 3, 0], vec![0], vec![2, 0]] {
        let x = zeros_param(&x_shape);
        let w = zeros_param(&[4, 0]);
        let y = x.linear(&w, Some(&b)).unwrap();
        let mut want_shape = x_shape[..x_shape.len() - 1].to_vec();
        want_shape.push(4);
        assert_eq!(y.shape(), &want_shape[..]);
        let rows: usize = want_shape[..want_shape.len() - 1].iter().product();
        assert_eq!(
            y.to_vec::<f32>().unwrap(),
            [1.0, 2.0, 3.0, 4.0].repeat(rows)
        );
        b.zero_grad(true).unwrap();
        sum(&y).backward().unwrap();
        assert_eq!(grad(&b), vec![rows as f32; 4]);
        assert_eq!(w.grad().unwrap().shape(), &[4, 0]);
        assert_eq!(x.grad().unwrap().shape(), &x_shape[..]);

        let x = zeros_param(&x_shape);
        let y = x
            .gelu_linear(strata_tensor::GeluApprox::None, &w, Some(&b))
            .unwrap();
        assert_eq!(
            y.to_vec::<f32>().unwrap(),
            [1.0, 2.0, 3.0, 4.0].repeat(rows)
        );
        sum(&y).backward().unwrap();
        assert_eq!(x.grad().unwrap().shape(), &x_shape[..]);
    }
    // out_features 0: an empty result; gelu_linear's backward failed.
    let x = param2(&[0.5; 30], &[2, 3, 5]);
    let w = zeros_param(&[0, 5]);
    let y = x
        .gelu_linear(strata_tensor::GeluApprox::Tanh, &w, None)
        .unwrap();
    assert_eq!(y.shape(), &[2, 3, 0]);
    sum(&y).backward().unwrap();
    assert_eq!(grad(&x), vec![0.0; 30]);
    assert_eq!(w.grad().unwrap().shape(), &[0, 5]);
}

#[test]
fn an_embedding_of_width_zero_back_propagates() {
    let e = zeros_param(&[5, 0]);
    let idx = Tensor::from_slice(&[1i64, 2, 1], &[3], CPU).unwrap();
    for padding in [None, Some(-1)] {
        let y = e.embedding(&idx, padding).unwrap();
        assert_eq!(y.shape(), &[3, 0]);
        // Was a Shape error from `reshape([-1, 0])`.
        sum(&y).backward().unwrap();
        assert_eq!(e.grad().unwrap().shape(), &[5, 0]);
    }
}

// ------------------------------------------------------ clip_grad_norm_

#[test]
fn clip_grad_norm_of_half_gradients_does_not_overflow() {
    for dtype in [DType::F16, DType::BF16] {
        let p = Var::parameter(Tensor::zeros(&[2], dtype, CPU).unwrap()).unwrap();
        let g = Tensor::from_slice(&[300.0f32, 400.0], &[2], CPU)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        p.set_grad(Some(g)).unwrap();
        // Squared in f16, 300^2 and 400^2 were inf: the norm was inf and
        // the gradients were scaled to 0.
        let norm = strata_autograd::clip_grad_norm_(std::slice::from_ref(&p), 1.0).unwrap();
        assert_eq!(norm.item::<f32>().unwrap(), 500.0, "{dtype}");
        let g = p.grad().unwrap().to_vec_as::<f32>().unwrap();
        assert!(
            (g[0] - 0.6).abs() < 4e-3 && (g[1] - 0.8).abs() < 4e-3,
            "{dtype}: {g:?}"
        );
    }
}

// ------------------------------------------------------ maximum/minimum

#[test]
fn maximum_and_minimum_pass_the_gradient_through_nan_as_pytorch() {
    let nan = f32::NAN;
    for max in [true, false] {
        let a = param(&[nan, 1.0, 2.0, 5.0]);
        let b = param(&[1.0, 1.0, 3.0, nan]);
        let y = if max { a.maximum(&b) } else { a.minimum(&b) }.unwrap();
        let v = y.to_vec::<f32>().unwrap();
        assert!(v[0].is_nan() && v[3].is_nan() && v[1] == 1.0);
        sum(&y).backward().unwrap();
        // PyTorch: where(a == b, g / 2, g) with the loser's entries zeroed;
        // NaN compares false everywhere, so both operands get g there.
        let (ga, gb) = if max {
            (vec![1.0, 0.5, 0.0, 1.0], vec![1.0, 0.5, 1.0, 1.0])
        } else {
            (vec![1.0, 0.5, 1.0, 1.0], vec![1.0, 0.5, 0.0, 1.0])
        };
        assert_eq!(grad(&a), ga, "max {max}");
        assert_eq!(grad(&b), gb, "max {max}");
    }
}

// ------------------------------------------------ views made in no_grad

#[test]
fn in_place_on_a_view_made_in_no_grad_is_refused_with_grad_mode_on() {
    // PyTorch 2.15: "A view was created in no_grad mode and is being
    // modified inplace with grad mode enabled."
    let no_grad_view = |e: AutogradError| matches!(e, AutogradError::InPlaceOnNoGradView { .. });
    let x = param(&[1.0, 2.0, 3.0, 4.0]);
    // Of a leaf that requires grad.
    let v = strata_autograd::no_grad(|| x.narrow(0, 0, 2)).unwrap();
    assert!(no_grad_view(v.mul_(2.0f32).unwrap_err()));
    assert!(no_grad_view(v.zero_().unwrap_err()));
    assert_eq!(
        x.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0],
        "x unchanged"
    );
    // Of a recorded (non-leaf) variable.
    let y = x.mul(1.0f32).unwrap();
    let w = strata_autograd::no_grad(|| y.narrow(0, 1, 2)).unwrap();
    assert!(no_grad_view(w.add_(1.0f32).unwrap_err()));
    // A view of such a view, taken with grad mode on.
    let u = strata_autograd::no_grad(|| x.narrow(0, 0, 3)).unwrap();
    let uu = u.narrow(0, 0, 2).unwrap();
    assert!(no_grad_view(uu.zero_().unwrap_err()));
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 4.0],
        "y unchanged"
    );
    // Allowed, as in PyTorch: the view and the in-place op both inside
    // no_grad; a view in no_grad of a variable that does not require grad;
    // a new (non-view) result of such a view; a detached variable.
    strata_autograd::no_grad(|| v.mul_(2.0f32).map(|_| ())).unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 3.0, 4.0]);
    let c = Var::new(Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU).unwrap());
    let cv = strata_autograd::no_grad(|| c.narrow(0, 0, 1)).unwrap();
    cv.mul_(3.0f32).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![3.0, 2.0]);
    let fresh = u.mul(2.0f32).unwrap();
    fresh.zero_().unwrap();
    x.detach().zero_().unwrap();
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![0.0; 4]);
}
