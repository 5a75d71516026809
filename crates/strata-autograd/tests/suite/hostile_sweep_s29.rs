//! Session 29's sweep of hostile inputs to autograd (after
//! `hostile_inputs*.rs`, `adversarial.rs` and `hostile_sweep_s27.rs`).
//! Each test asserts PyTorch's values (from PyTorch 2.15 on the CPU, or
//! worked out by hand), or the typed error and the state left behind.
//!
//! Defects these tests found (fixed with them):
//!
//! * inside one autocast region, the second backward through a parameter's
//!   cached low-precision copy failed with `GraphReleased` (the first
//!   backward had released the shared cast node): a training loop inside
//!   one region stopped at its second iteration. The cast node of a cached
//!   copy is now never released (it saves nothing);
//! * an optimizer step over an expanded parameter (elements sharing memory)
//!   failed at it, after updating the parameters before it (SGD) or the
//!   lists before its own (Adam, AdamW); every parameter is now checked
//!   first;
//! * `GradScaler::step` whose optimizer step failed counted the step: a
//!   retry was refused ("step was already called") and `update` counted a
//!   clean step towards growing the scale (session 54b: PyTorch's `update`
//!   does count the check of a step that failed, and so does strata again);
//! * `clip_grad_norm_` summed the squares of f64 gradients into an f32
//!   total: gradients of 1e30 gave an infinite norm and were all zeroed
//!   (PyTorch scales them to the max norm), gradients of 1e-30 a norm of 0
//!   and were not clipped. The norm is now formed (and returned) in f64
//!   when a gradient is f64;
//! * `std`'s gradient was NaN where the std is 0 (a constant row); PyTorch's
//!   is 0;
//! * `cumsum`'s gradient (`sum(g) - cumsum(g) + g`) was NaN everywhere
//!   from one infinite element of the upstream gradient and lost small
//!   elements beside large ones; it is now PyTorch's reversed cumulative
//!   sum;
//! * `relu` gave a NaN input a zero gradient; PyTorch passes the gradient
//!   (it blocks only where the result is `<= 0`);
//! * `checkpoint` handed its function a plain detached copy of each input:
//!   an in-place op on an input that is a parameter silently changed the
//!   parameter (PyTorch refuses it), and an input modified in place was
//!   recomputed from its new value (PyTorch's backward refuses it);
//! * `backward_with` passed a gradient of another dtype than its output's
//!   to the backward formulas, some of which refused it (matmul an f64
//!   gradient of an f32 product, gelu an integer or bool one); PyTorch
//!   converts it to the output's dtype, and so does strata now;
//! * a view of a parameter made in inference mode could be modified in
//!   place after the region with grad mode on, changing the parameter
//!   behind autograd's back; PyTorch forbids it (as for a view made in
//!   `no_grad`), and strata now refuses it with `InPlaceOnNoGradView`;
//! * a backward that reached a node released by an earlier backward, or a
//!   saved tensor modified in place, failed there, after the nodes before
//!   it had added into other leaves' `.grad` and released their saved
//!   tensors (PyTorch does the same); such nodes are now found before the
//!   pass runs anything, and the failed pass changes no gradient.

use strata_autograd::autocast::{AutocastGuard, DeviceType};
use strata_autograd::{
    checkpoint, clip_grad_norm_, inference_mode, no_grad, Adam, AdamW, AutogradError, GradScaler,
    Optimizer, Sgd, Var,
};
use strata_tensor::{DType, Device, GeluApprox, Tensor};

use crate::common;
use common::param;

const CPU: Device = Device::Cpu;

fn grad_f32(v: &Var) -> Vec<f32> {
    v.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

// -------------------------------------------------------------- autocast

#[test]
fn training_iterations_inside_one_autocast_region_back_propagate() {
    // torch.autocast("cpu", bfloat16) around the whole loop: each
    // iteration's (x @ w).sum().backward() adds x^T 1 = 3 to every
    // element of w.grad (3, then 6); two forwards then their two
    // backwards add 6 more (12).
    let w = Var::parameter(Tensor::ones(&[2, 2], DType::F32, CPU).unwrap()).unwrap();
    let x = Var::new(Tensor::ones(&[3, 2], DType::F32, CPU).unwrap());
    let _region = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
    let loss = || x.matmul(&w).unwrap().sum(None, false).unwrap();
    for expected in [3.0f32, 6.0] {
        loss().backward().unwrap();
        assert_eq!(grad_f32(&w), vec![expected; 4]);
    }
    let (l1, l2) = (loss(), loss());
    l1.backward().unwrap();
    l2.backward().unwrap();
    assert_eq!(grad_f32(&w), vec![12.0; 4]);
    // The region's other graphs are still released as usual.
    let l = loss();
    l.backward().unwrap();
    assert!(l.backward().is_err());
}

// ------------------------------------------- optimizers and the scaler

fn ones(n: usize, dtype: DType) -> Tensor {
    Tensor::ones(&[n], dtype, CPU).unwrap()
}

/// A parameter of 3 f64 elements that share one memory location.
fn expanded_param() -> Var {
    let e = Var::parameter(ones(1, DType::F64).expand(&[3]).unwrap()).unwrap();
    e.set_grad(Some(ones(3, DType::F64))).unwrap();
    e
}

fn f64s(v: &Var) -> Vec<f64> {
    v.data()
        .to_dtype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

#[test]
fn a_step_over_an_expanded_parameter_fails_before_updating_any() {
    // After one good step from grad 1 at lr 0.1: SGD (momentum 0.9, first
    // step) 1 - 0.1 = 0.9; Adam 1 - lr = 0.9; AdamW (weight decay 0.01)
    // 1 * (1 - 0.1 * 0.01) - 0.1 = 0.899.
    type Make = fn(Vec<Var>) -> Box<dyn Optimizer>;
    let cases: [(&str, Make, f64); 3] = [
        ("SGD", |p| Box::new(Sgd::new(p, 0.1, 0.9).unwrap()), 0.9),
        ("Adam", |p| Box::new(Adam::new(p, 0.1).unwrap()), 0.9),
        (
            "AdamW",
            |p| Box::new(AdamW::new(p).with_lr(0.1).unwrap()),
            0.899,
        ),
    ];
    for (name, make, after_one) in cases {
        let a = param(&[1.0, 1.0]);
        a.set_grad(Some(ones(2, DType::F32))).unwrap();
        let e = expanded_param();
        let mut opt = make(vec![a.clone(), e.clone()]);
        let err = opt.step().unwrap_err();
        assert!(
            matches!(&err, AutogradError::Optimizer { msg, .. } if msg.contains("parameter 1") && msg.contains("share memory")),
            "{name}: {err}"
        );
        assert_eq!(f64s(&a), vec![1.0, 1.0], "{name}");
        assert_eq!(f64s(&e), vec![1.0; 3], "{name}");
        // Without the expanded parameter's gradient the step runs, as a
        // first step: the failed one advanced no state.
        e.set_grad(None).unwrap();
        opt.step().unwrap();
        for x in f64s(&a) {
            assert!((x - after_one).abs() < 1e-6, "{name}: {x}");
        }
    }
}

#[test]
fn a_scaler_step_whose_optimizer_fails_may_be_retried_and_its_check_counts() {
    let make = || {
        let a = param(&[1.0, 1.0]);
        a.set_grad(Some(Tensor::full(&[2], 65536.0, DType::F32, CPU).unwrap()))
            .unwrap();
        let e = expanded_param();
        e.set_grad(Some(Tensor::full(&[3], 65536.0, DType::F64, CPU).unwrap()))
            .unwrap();
        let opt = Sgd::new(vec![a.clone(), e.clone()], 0.1, 0.0).unwrap();
        (a, e, opt)
    };
    // The failed step, then update: the (finite) check counts, as in
    // PyTorch 2.15 (tracker 1, scale 65536; session 54b: strata counted
    // nothing before). PyTorch's SGD moves `a` to 0.9 before it fails at
    // the expanded parameter; strata checks every parameter first.
    let (a, _e, mut opt) = make();
    let mut scaler = GradScaler::new();
    let err = scaler.step(&mut opt).unwrap_err();
    assert!(matches!(err, AutogradError::Optimizer { .. }), "{err}");
    assert_eq!(f64s(&a), vec![1.0, 1.0]);
    scaler.update().unwrap();
    assert_eq!(scaler.growth_tracker(), 1);
    assert_eq!(scaler.get_scale(), 65536.0);

    // The failed step, then a retry once the cause is removed: the
    // gradients were unscaled once (65536 / 65536 = 1), and the step runs.
    let (a, e, mut opt) = make();
    let mut scaler = GradScaler::new();
    assert!(scaler.step(&mut opt).is_err());
    e.set_grad(None).unwrap();
    assert!(scaler.step(&mut opt).unwrap());
    for x in f64s(&a) {
        assert!((x - 0.9).abs() < 1e-6, "{x}");
    }
    scaler.update().unwrap();
    assert_eq!(scaler.growth_tracker(), 1);
}

#[test]
fn clip_grad_norm_of_f64_gradients_is_formed_in_f64() {
    // PyTorch: clip_grad_norm_ of [1e30, 1e30] (f64) to 1 returns
    // 1.4142e30 (f64) and leaves [0.7071, 0.7071]; of [3e-30, 4e-30] to
    // 1e-31 returns 5e-30 and leaves [3e-55, 4e-55].
    let p = Var::parameter(Tensor::zeros(&[2], DType::F64, CPU).unwrap()).unwrap();
    let set = |v: [f64; 2]| {
        p.set_grad(Some(Tensor::from_slice(&v, &[2], CPU).unwrap()))
            .unwrap()
    };
    let rel = |a: f64, b: f64| ((a - b) / b).abs();
    set([1e30, 1e30]);
    let norm = clip_grad_norm_(std::slice::from_ref(&p), 1.0).unwrap();
    assert_eq!(norm.dtype(), DType::F64);
    assert!(rel(norm.item::<f64>().unwrap(), 2f64.sqrt() * 1e30) < 1e-12);
    for g in p.grad().unwrap().to_vec::<f64>().unwrap() {
        assert!(rel(g, 0.5f64.sqrt()) < 1e-6, "{g}");
    }
    set([3e-30, 4e-30]);
    let norm = clip_grad_norm_(std::slice::from_ref(&p), 1e-31).unwrap();
    assert!(rel(norm.item::<f64>().unwrap(), 5e-30) < 1e-12);
    let g = p.grad().unwrap().to_vec::<f64>().unwrap();
    assert!(rel(g[0], 3e-55) < 1e-6 && rel(g[1], 4e-55) < 1e-6, "{g:?}");
    // f32 gradients keep an f32 norm.
    let q = param(&[0.0, 0.0]);
    q.set_grad(Some(Tensor::from_slice(&[3.0f32, 4.0], &[2], CPU).unwrap()))
        .unwrap();
    let norm = clip_grad_norm_(&[q], 10.0).unwrap();
    assert_eq!(norm.dtype(), DType::F32);
    assert_eq!(norm.item::<f32>().unwrap(), 5.0);
}

// ------------------------------------------------------------ gradients

#[test]
fn std_of_a_constant_row_has_a_zero_gradient() {
    // PyTorch: x = [[1, 1], [1, 3]]; x.std(1).sum().backward() gives
    // [[0, 0], [-0.7071, 0.7071]]; x = [2, 2, 2]: x.std() gives [0, 0, 0].
    let x = Var::parameter(Tensor::from_slice(&[1.0f32, 1.0, 1.0, 3.0], &[2, 2], CPU).unwrap())
        .unwrap();
    x.std(Some(&[1]), 1.0, false)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let g = grad_f32(&x);
    let h = 0.5f32.sqrt();
    assert_eq!(&g[..2], &[0.0, 0.0]);
    assert!((g[2] + h).abs() < 1e-6 && (g[3] - h).abs() < 1e-6, "{g:?}");
    let x = param(&[2.0, 2.0, 2.0]);
    x.std(None, 1.0, false).unwrap().backward().unwrap();
    assert_eq!(grad_f32(&x), vec![0.0; 3]);
}

#[test]
fn cumsum_gradient_is_the_reversed_cumulative_sum() {
    // PyTorch: x.cumsum(0).backward(g) gives x.grad[i] = sum(g[i:]):
    // g = [inf, 1, 1] -> [inf, 2, 1]; [1e8, 1, 1] -> [1e8, 2, 1];
    // [1, nan, 1] -> [nan, nan, 1].
    let cases: [([f32; 3], [f32; 3]); 3] = [
        ([f32::INFINITY, 1.0, 1.0], [f32::INFINITY, 2.0, 1.0]),
        ([1e8, 1.0, 1.0], [1e8, 2.0, 1.0]),
        ([1.0, f32::NAN, 1.0], [f32::NAN, f32::NAN, 1.0]),
    ];
    for (g, expected) in cases {
        let x = param(&[1.0, 2.0, 3.0]);
        let g = Tensor::from_slice(&g, &[3], CPU).unwrap();
        x.cumsum(0, None)
            .unwrap()
            .backward_with(Some(&g), false)
            .unwrap();
        let got = grad_f32(&x);
        let same = got
            .iter()
            .zip(&expected)
            .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
        assert!(same, "{got:?} != {expected:?}");
    }
    // Along the last dim of a matrix, accumulated in f64, back in f32:
    // every row [3, 2, 1].
    let x = Var::parameter(Tensor::ones(&[2, 3], DType::F32, CPU).unwrap()).unwrap();
    let y = x.cumsum(-1, Some(DType::F64)).unwrap();
    y.backward_with(
        Some(&Tensor::ones(&[2, 3], DType::F64, CPU).unwrap()),
        false,
    )
    .unwrap();
    assert_eq!(x.grad().unwrap().dtype(), DType::F32);
    assert_eq!(grad_f32(&x), vec![3.0, 2.0, 1.0, 3.0, 2.0, 1.0]);
}

#[test]
fn relu_passes_the_gradient_through_nan_as_pytorch() {
    // PyTorch: relu of [nan, 1, -1, 0] backward with ones: [1, 1, 0, 0].
    let x = param(&[f32::NAN, 1.0, -1.0, 0.0]);
    x.relu()
        .unwrap()
        .backward_with(Some(&ones(4, DType::F32)), false)
        .unwrap();
    assert_eq!(grad_f32(&x), vec![1.0, 1.0, 0.0, 0.0]);
}

// ------------------------------------------------------------ checkpoint

#[test]
fn checkpoint_refuses_in_place_ops_on_its_inputs_as_pytorch() {
    // PyTorch: checkpoint(f, w) with f doing x.mul_(2) on a leaf w that
    // requires grad raises "a leaf Variable that requires grad is being
    // used in an in-place operation" and leaves w as it was.
    let w = param(&[1.0, 1.0, 1.0]);
    let err = checkpoint(
        |xs| {
            xs[0].mul_(2.0)?;
            xs[0].exp()
        },
        std::slice::from_ref(&w),
    )
    .unwrap_err();
    assert!(matches!(err, AutogradError::InPlaceOnLeaf { .. }), "{err}");
    // A view of it too.
    let err = checkpoint(
        |xs| {
            xs[0].narrow(0, 0, 2)?.add_(1.0)?;
            xs[0].exp()
        },
        std::slice::from_ref(&w),
    )
    .unwrap_err();
    assert!(matches!(err, AutogradError::InPlaceOnLeaf { .. }), "{err}");
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0; 3]);

    // A non-leaf input modified in place: the forward runs (as PyTorch's),
    // the backward is refused (PyTorch: "one of the variables needed for
    // gradient computation has been modified by an inplace operation").
    let y = w.mul(1.0).unwrap();
    let out = checkpoint(
        |xs| {
            xs[0].mul_(2.0)?;
            xs[0].exp()
        },
        std::slice::from_ref(&y),
    )
    .unwrap();
    let err = out.sum(None, false).unwrap().backward().unwrap_err();
    assert!(
        matches!(
            err,
            AutogradError::SavedTensorModified {
                op: "CheckpointBackward",
                index: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(w.grad().is_none());

    // Reading the inputs (and in-place ops on the function's own results)
    // still work: d/dw sum(exp(2 w)) = 2 e^2.
    let out = checkpoint(
        |xs| {
            let t = xs[0].mul(2.0)?;
            t.add_(0.0)?;
            t.exp()
        },
        std::slice::from_ref(&w),
    )
    .unwrap();
    out.sum(None, false).unwrap().backward().unwrap();
    for g in grad_f32(&w) {
        assert!((g - 2.0 * 2f32.exp()).abs() < 1e-4, "{g}");
    }
}

// ------------------------------------------------------ backward_with

#[test]
fn backward_with_converts_a_gradient_of_another_dtype_as_pytorch() {
    // PyTorch: x = ones(2, 2); (x @ x).backward(ones(2, 2, int64)) gives
    // x.grad = 4 everywhere (f32); F.gelu(x).backward(ones(4, bool)) for
    // x = [1, -2, 3, 0.5] gives gelu'(x).
    for dtype in [DType::F64, DType::I64, DType::Bool, DType::F16] {
        let x = Var::parameter(Tensor::ones(&[2, 2], DType::F32, CPU).unwrap()).unwrap();
        let g = Tensor::ones(&[2, 2], dtype, CPU).unwrap();
        x.matmul(&x)
            .unwrap()
            .backward_with(Some(&g), false)
            .unwrap();
        assert_eq!(x.grad().unwrap().dtype(), DType::F32);
        assert_eq!(grad_f32(&x), vec![4.0; 4], "{dtype:?}");

        let x = param(&[1.0, -2.0, 3.0, 0.5]);
        let g = Tensor::ones(&[4], dtype, CPU).unwrap();
        x.gelu(GeluApprox::None)
            .unwrap()
            .backward_with(Some(&g), false)
            .unwrap();
        let expected = [1.0833154, -0.0852319, 1.0119456, 0.8674951];
        for (a, b) in grad_f32(&x).iter().zip(expected) {
            assert!((a - b).abs() < 1e-5, "{dtype:?}: {a} vs {b}");
        }
    }
}

// -------------------------------------------------------- inference mode

#[test]
fn a_view_made_in_inference_mode_is_not_modified_in_place_with_grad_mode_on() {
    // PyTorch: v = w[:2] in inference mode; v.mul_(2) afterwards raises
    // "A view was created in inference mode and is being modified inplace
    // in normal mode"; inside inference mode (or under no_grad) it runs.
    let w = param(&[1.0, 1.0, 1.0]);
    let v = inference_mode(|| w.narrow(0, 0, 2)).unwrap();
    let err = v.mul_(2.0).unwrap_err();
    assert!(
        matches!(err, AutogradError::InPlaceOnNoGradView { .. }),
        "{err}"
    );
    // A view of that view too.
    let err = v.narrow(0, 0, 1).unwrap().add_(1.0).unwrap_err();
    assert!(
        matches!(err, AutogradError::InPlaceOnNoGradView { .. }),
        "{err}"
    );
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0; 3]);
    inference_mode(|| v.mul_(3.0).map(|_| ())).unwrap();
    no_grad(|| v.mul_(2.0).map(|_| ())).unwrap();
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![6.0, 6.0, 1.0]);
    // Views of variables that do not require grad stay free. (Results
    // made in inference mode are inference variables, which PyTorch does
    // not let one modify in place outside the region: see
    // hostile_sweep_s30.rs.)
    let d = Var::new(Tensor::ones(&[3], DType::F32, CPU).unwrap());
    let r = inference_mode(|| w.mul(2.0)).unwrap();
    let err = r.mul_(2.0).unwrap_err();
    assert!(
        matches!(err, AutogradError::InferenceTensorInPlace { .. }),
        "{err}"
    );
    inference_mode(|| d.narrow(0, 0, 2))
        .unwrap()
        .mul_(2.0)
        .unwrap();
    assert_eq!(d.to_vec::<f32>().unwrap(), vec![2.0, 2.0, 1.0]);
}

// ------------------------------------------------ failing backward passes

#[test]
fn a_backward_that_cannot_complete_changes_no_gradient() {
    let w = param(&[1.0, 2.0]);
    let z = param(&[1.0, 1.0]);
    let x = Var::new(Tensor::from_slice(&[3.0f32, 4.0], &[2], CPU).unwrap());
    let sum = |v: &Var| v.sum(None, false).unwrap();
    let y = w.mul(&x).unwrap();
    sum(&y).backward().unwrap();
    assert_eq!(grad_f32(&w), vec![3.0, 4.0]);

    // Through y's released node: z's branch (recorded last, so run first)
    // used to add its gradient before the pass failed.
    let l = sum(&y.mul(2.0).unwrap()).add(&sum(&z)).unwrap();
    let err = l.backward().unwrap_err();
    assert!(
        matches!(err, AutogradError::GraphReleased { op: "MulBackward" }),
        "{err}"
    );
    assert!(z.grad().is_none());
    assert_eq!(grad_f32(&w), vec![3.0, 4.0]);

    // A saved tensor modified in place: exp's result.
    let a = w.exp().unwrap();
    let l = sum(&a).add(&sum(&z.mul(&z).unwrap())).unwrap();
    a.data().add_(1.0).unwrap();
    let err = l.backward().unwrap_err();
    assert!(
        matches!(
            err,
            AutogradError::SavedTensorModified {
                op: "ExpBackward",
                ..
            }
        ),
        "{err}"
    );
    assert!(z.grad().is_none());
    assert_eq!(grad_f32(&w), vec![3.0, 4.0]);

    // Nothing was released by the failed pass: z's branch alone still
    // back-propagates (d/dz sum(z * z) = 2 z).
    let zz = z.mul(&z).unwrap();
    let l = sum(&zz).add(&sum(&w.exp().unwrap())).unwrap();
    l.backward().unwrap();
    assert_eq!(grad_f32(&z), vec![2.0, 2.0]);
}
