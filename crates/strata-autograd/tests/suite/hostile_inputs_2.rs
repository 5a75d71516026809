//! The second sweep of hostile inputs to autograd (after `hostile_inputs.rs`
//! and `adversarial.rs`). Each test asserts the typed error (or the state
//! left behind).
//!
//! Defects these tests found (fixed with them):
//!
//! * `AutocastGuard`s dropped out of order (`drop(outer)` before
//!   `drop(inner)`) left autocast enabled after both were gone: each guard
//!   restored the state it had seen on entry;
//! * `Linear::from_tensors` accepted a bias of another dtype than the
//!   weight, which failed only at the first forward;
//! * `Var::cross_entropy` took a NaN `label_smoothing` as 0 (fixed in
//!   strata-tensor's `cross_entropy`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use strata_autograd::autocast::autocast_state;
use strata_autograd::nn::Linear;
use strata_autograd::{checkpoint, AutocastGuard, AutogradError, DeviceType, Var};
use strata_tensor::{CrossEntropyArgs, DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn param(v: &[f32], shape: &[usize]) -> Var {
    Var::parameter(Tensor::from_slice(v, shape, CPU).unwrap()).unwrap()
}

#[test]
fn autocast_guards_dropped_out_of_order_leave_autocast_off() {
    assert_eq!(autocast_state(), None);
    let outer = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
    let inner = AutocastGuard::new(DeviceType::Cpu, DType::F16).unwrap();
    drop(outer);
    // The inner region is still alive: its settings stay in force.
    assert_eq!(autocast_state().map(|s| s.dtype), Some(DType::F16));
    drop(inner);
    assert_eq!(
        autocast_state(),
        None,
        "autocast left on after every guard was dropped"
    );

    // A disabled region dropped before the enabled one inside it.
    let off = AutocastGuard::disabled();
    let on = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
    drop(off);
    assert_eq!(autocast_state().map(|s| s.dtype), Some(DType::BF16));
    drop(on);
    assert_eq!(autocast_state(), None);

    // Three deep, the middle one first: the innermost still decides.
    let a = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
    let b = AutocastGuard::disabled();
    let c = AutocastGuard::new(DeviceType::Cpu, DType::F16).unwrap();
    drop(b);
    assert_eq!(autocast_state().map(|s| s.dtype), Some(DType::F16));
    drop(c);
    assert_eq!(autocast_state().map(|s| s.dtype), Some(DType::BF16));
    drop(a);
    assert_eq!(autocast_state(), None);
    assert_eq!(strata_autograd::autocast::autocast_cache_len(), 0);

    // In order, as before.
    {
        let _g = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
        {
            let _d = AutocastGuard::disabled();
            assert_eq!(autocast_state(), None);
        }
        assert_eq!(autocast_state().map(|s| s.dtype), Some(DType::BF16));
    }
    assert_eq!(autocast_state(), None);
    // A dtype autocast does not run in.
    let e = AutocastGuard::new(DeviceType::Cpu, DType::I64)
        .err()
        .unwrap();
    assert!(matches!(e, AutogradError::Autocast { .. }), "{e}");
    assert!(e.to_string().contains("BF16"), "{e}");
    assert_eq!(autocast_state(), None);
}

#[test]
fn linear_from_tensors_refuses_a_bias_of_another_dtype() {
    let w = Tensor::ones(&[2, 3], DType::F32, CPU).unwrap();
    let b = Tensor::ones(&[2], DType::F64, CPU).unwrap();
    let e = Linear::from_tensors(w.clone(), Some(b)).err().unwrap();
    match &e {
        AutogradError::Module { module, msg } => {
            assert_eq!(*module, "Linear");
            assert!(msg.contains("f64") && msg.contains("f32"), "{e}");
        }
        _ => panic!("expected a Module error, got {e}"),
    }
    // Wrong shape and non-float weights were already refused.
    let e = Linear::from_tensors(
        w.clone(),
        Some(Tensor::ones(&[3], DType::F32, CPU).unwrap()),
    )
    .err()
    .unwrap();
    assert!(matches!(e, AutogradError::Module { .. }), "{e}");
    let e = Linear::from_tensors(Tensor::ones(&[2, 3], DType::I64, CPU).unwrap(), None)
        .err()
        .unwrap();
    assert!(matches!(e, AutogradError::RequiresGrad { .. }), "{e}");
    // A matching bias gives a layer that runs.
    let l = Linear::from_tensors(w, Some(Tensor::zeros(&[2], DType::F32, CPU).unwrap())).unwrap();
    let y = l.forward(&param(&[1., 2., 3.], &[1, 3])).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![6.0, 6.0]);
}

/// A NaN label smoothing was refused here until session 44; PyTorch 2.15
/// takes it as none (`label_smoothing > 0.0` is false):
/// `x = torch.tensor([[1., 2., 3.], [4., 5., 6.]], requires_grad=True)`;
/// `F.cross_entropy(x, torch.tensor([0, 2]), label_smoothing=nan)` is
/// 1.4076059 and `x.grad` [[-0.4549847, 0.1223642, 0.3326205], [0.0450153,
/// 0.1223642, -0.1673795]], as without smoothing. Above 1 stays refused.
#[test]
fn cross_entropy_of_a_var_takes_a_nan_label_smoothing_as_none() {
    let t = Tensor::from_slice(&[0i64, 2], &[2], CPU).unwrap();
    let run = |ls: f64| {
        let x = param(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
        let args = CrossEntropyArgs {
            label_smoothing: ls,
            ..Default::default()
        };
        let loss = x.cross_entropy(&t, args).unwrap();
        loss.backward().unwrap();
        (
            loss.item::<f32>().unwrap(),
            x.grad().unwrap().to_vec::<f32>().unwrap(),
        )
    };
    let (l, g) = run(f64::NAN);
    assert_eq!((l, g.clone()), run(0.0));
    assert!((l - 1.407_605_9).abs() < 1e-6, "{l}");
    let expect = [
        -0.454_984_7,
        0.122_364_2,
        0.332_620_5,
        0.045_015_3,
        0.122_364_2,
        -0.167_379_5,
    ];
    for (a, b) in g.iter().zip(expect) {
        assert!((a - b).abs() < 1e-6, "{g:?}");
    }
    let x = param(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    let args = CrossEntropyArgs {
        label_smoothing: 1.5,
        ..Default::default()
    };
    let e = x.cross_entropy(&t, args).err().unwrap();
    assert!(
        matches!(
            e,
            AutogradError::Tensor(TensorError::Value {
                op: "cross_entropy",
                ..
            })
        ),
        "{e}"
    );
    assert!(x.grad().is_none());
}

#[test]
fn checkpoint_whose_recomputation_differs_is_a_typed_error_and_leaves_no_gradient() {
    let x = param(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
    // Forward: x * 2 ([2, 3]); recomputation in backward: a sum ([]).
    let flip = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flip);
    let y = checkpoint(
        move |xs: &[Var]| {
            if f.swap(true, Ordering::SeqCst) {
                xs[0].sum(None, false)
            } else {
                xs[0].mul(2.0)
            }
        },
        std::slice::from_ref(&x),
    )
    .unwrap();
    let g = Tensor::ones(&[2, 3], DType::F32, CPU).unwrap();
    let e = y.backward_with(Some(&g), false).err().unwrap();
    // Since session 51 the recomputed output's metadata is compared with
    // the forward's (PyTorch's `CheckpointError`), before the engine's
    // `GradShape` check would see the gradient [2, 3] for an output [].
    match &e {
        AutogradError::Checkpoint { msg } => {
            assert!(
                msg.contains("f32 []") && msg.contains("f32 [2, 3]"),
                "{msg}"
            );
        }
        _ => panic!("expected Checkpoint, got {e}"),
    }
    assert!(x.grad().is_none());

    // A recomputation that fails reports its own error.
    let flip = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flip);
    let y = checkpoint(
        move |xs: &[Var]| {
            if f.swap(true, Ordering::SeqCst) {
                xs[0].reshape(&[7])
            } else {
                xs[0].mul(2.0)
            }
        },
        std::slice::from_ref(&x),
    )
    .unwrap();
    let e = y.sum(None, false).unwrap().backward().err().unwrap();
    assert!(
        matches!(
            e,
            AutogradError::Tensor(TensorError::Shape { op: "reshape", .. })
        ),
        "{e}"
    );
    assert!(x.grad().is_none());
}

#[test]
fn backward_twice_and_gradients_of_the_wrong_shape_are_typed_errors() {
    let x = param(&[1., 2., 3.], &[3]);
    let y = x.mul(&x).unwrap().sum(None, false).unwrap();
    y.backward().unwrap();
    let g1 = x.grad().unwrap().to_vec::<f32>().unwrap();
    let e = y.backward().err().unwrap();
    assert!(matches!(e, AutogradError::GraphReleased { .. }), "{e}");
    assert!(e.to_string().contains("retain_graph"), "{e}");
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), g1);

    let z = x.mul(2.0).unwrap();
    for shape in [&[1usize][..], &[3, 1], &[], &[0]] {
        let g = Tensor::ones(shape, DType::F32, CPU).unwrap();
        let e = z.backward_with(Some(&g), false).err().unwrap();
        assert!(
            matches!(e, AutogradError::GradShape { .. }),
            "{shape:?}: {e}"
        );
    }
    let e = z.backward().err().unwrap();
    assert!(matches!(e, AutogradError::NonScalarOutput { .. }), "{e}");
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), g1);
}
