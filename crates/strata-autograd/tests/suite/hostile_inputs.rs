//! Hostile inputs to gradients, the optimizers and the local process
//! group that the adversarial suite does not reach: a gradient handed to
//! `set_grad` with another shape or dtype (it used to be accepted, and the
//! optimizers then updated the parameters before it and failed, or
//! broadcast a smaller gradient over the parameter; backward broadcast into
//! it), a world size the host cannot hold (it used to panic on the
//! allocation), data-parallel parameters whose element counts add up past
//! usize (the sum wrapped: a debug build panicked, a release build made a
//! bucket too small and failed later with an unrelated error), attention
//! with an empty embedding dim and no scale (an error about a scale the
//! caller never passed; since session 40 PyTorch's answer, the mean of
//! the values), and in-place gradient scaling (`clip_grad_norm_`,
//! `GradScaler::unscale_`) over an expanded gradient (an error half-way left
//! the earlier gradients scaled, and `unscale_` ready to scale them again).

use std::sync::Arc;
use strata_autograd::distributed::{DdpConfig, DistributedDataParallel, LocalGroup};
use strata_autograd::{
    clip_grad_norm_, Adam, AdamW, AttentionArgs, AutogradError, GradScaler, Optimizer, Sgd, Var,
};
use strata_tensor::{DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn param(v: &[f32], grad: &[f32]) -> Var {
    let p = Var::parameter(Tensor::from_slice(v, &[v.len()], CPU).unwrap()).unwrap();
    p.set_grad(Some(Tensor::from_slice(grad, &[grad.len()], CPU).unwrap()))
        .unwrap();
    p
}

fn values(p: &Var) -> Vec<f32> {
    p.to_vec::<f32>().unwrap()
}

/// A gradient of another shape or dtype than its tensor, set with
/// `set_grad`.
fn assert_set_grad_refuses(p: &Var, g: Tensor, shape_error: bool) {
    match (p.set_grad(Some(g)), shape_error) {
        (Err(AutogradError::Tensor(TensorError::Shape { op, .. })), true)
        | (Err(AutogradError::Tensor(TensorError::DType { op, .. })), false) => {
            assert_eq!(op, "set_grad")
        }
        (other, _) => panic!("expected set_grad to refuse the gradient, got {other:?}"),
    }
}

#[test]
fn set_grad_refuses_a_gradient_of_another_shape_or_dtype_and_keeps_the_old_one() {
    let p = param(&[1.0, 2.0], &[0.5, 0.5]);
    let f32s = |v: &[f32], shape: &[usize]| Tensor::from_slice(v, shape, CPU).unwrap();
    // Too long, too short (SGD used to subtract a [1] gradient from every
    // element), another rank, another dtype.
    assert_set_grad_refuses(&p, f32s(&[1.0, 1.0, 1.0], &[3]), true);
    assert_set_grad_refuses(&p, f32s(&[5.0], &[1]), true);
    assert_set_grad_refuses(&p, f32s(&[1.0, 1.0, 1.0, 1.0], &[2, 2]), true);
    assert_set_grad_refuses(
        &p,
        Tensor::from_slice(&[1i64, 2], &[2], CPU).unwrap(),
        false,
    );
    assert_eq!(p.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.5, 0.5]);
    // Every optimizer then steps with the gradient that was kept.
    let mut sgd = Sgd::new(vec![p.clone()], 0.1, 0.0).unwrap();
    sgd.step().unwrap();
    assert_eq!(values(&p), vec![0.95, 1.95]);
    for mut opt in [
        Box::new(Adam::new(vec![p.clone()], 0.1).unwrap()) as Box<dyn Optimizer>,
        Box::new(AdamW::new(vec![p.clone()])),
    ] {
        let before = values(&p);
        opt.step().unwrap();
        assert!(values(&p).iter().zip(&before).all(|(a, b)| a < b));
    }
}

#[test]
fn a_world_size_the_host_cannot_hold_is_a_typed_error() {
    match LocalGroup::new(usize::MAX, CPU) {
        Err(AutogradError::Distributed { msg }) => assert!(msg.contains("ranks"), "{msg}"),
        Err(e) => panic!("expected a Distributed error, got {e}"),
        Ok(_) => panic!("expected a Distributed error, got a group"),
    }
}

#[test]
fn ddp_parameters_counting_past_usize_are_a_distributed_error() {
    // Four expanded f32 leaves of 2^62 elements: 2^64 elements in one
    // bucket (a huge cap keeps them together).
    let params: Vec<Var> = (0..4)
        .map(|_| {
            let t = Tensor::zeros(&[1], DType::F32, CPU)
                .unwrap()
                .expand(&[1 << 62])
                .unwrap();
            Var::parameter(t).unwrap()
        })
        .collect();
    let (_group, mut ranks) = LocalGroup::new(1, CPU).unwrap();
    let comm = Arc::new(ranks.remove(0));
    let config = DdpConfig {
        bucket_cap_bytes: usize::MAX,
        broadcast_parameters: false,
    };
    match DistributedDataParallel::new(&params, comm, config) {
        Err(AutogradError::Distributed { msg }) => assert!(msg.contains("bucket"), "{msg}"),
        Err(e) => panic!("expected a Distributed error, got {e}"),
        Ok(_) => panic!("expected a Distributed error, got a DDP"),
    }
    for p in &params {
        assert!(p.grad().is_none(), "no gradient was replaced");
    }
}

/// Session 40: PyTorch accepts an empty embedding dim without a scale (its
/// default 1/sqrt(0) multiplies q and k, both empty, so every score is 0):
/// `F.scaled_dot_product_attention(torch.zeros(2, 0), torch.zeros(2, 0),
/// torch.zeros(2, 0)).shape` is `(2, 0)`; see `hostile_sweep_s40.rs` for
/// the values.
#[test]
fn attention_with_an_empty_embedding_dim_needs_no_scale() {
    let z = Var::new(Tensor::zeros(&[2, 0], DType::F32, CPU).unwrap());
    assert_eq!(
        z.attention(&z, &z, AttentionArgs::default())
            .unwrap()
            .shape(),
        &[2, 0]
    );
    let args = AttentionArgs {
        scale: Some(1.0),
        ..Default::default()
    };
    assert_eq!(z.attention(&z, &z, args).unwrap().shape(), &[2, 0]);
}

/// A parameter whose gradient is one value expanded over its two elements
/// (the right shape and dtype, but its elements share memory).
fn with_expanded_grad() -> Var {
    let c = Var::parameter(Tensor::zeros(&[2], DType::F32, CPU).unwrap()).unwrap();
    c.set_grad(Some(
        Tensor::full(&[1], 4.0, DType::F32, CPU)
            .unwrap()
            .expand(&[2])
            .unwrap(),
    ))
    .unwrap();
    c
}

#[test]
fn clip_grad_norm_refuses_an_aliased_gradient_before_scaling_any() {
    // An expanded gradient after a good one: the good one was scaled, then
    // the error came.
    let a = param(&[1.0], &[3.0]);
    match clip_grad_norm_(&[a.clone(), with_expanded_grad()], 1.0) {
        Err(AutogradError::Tensor(TensorError::Overlap { .. })) => {}
        other => panic!("expected an Overlap error, got {other:?}"),
    }
    assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0]);
}

#[test]
fn grad_scaler_unscale_refuses_a_bad_gradient_before_unscaling_any() {
    let a = param(&[1.0], &[8.0]);
    let b = with_expanded_grad();
    let mut sgd = Sgd::new(vec![a.clone(), b.clone()], 0.1, 0.0).unwrap();
    let mut scaler = GradScaler::with_settings(4.0, 2.0, 0.5, 10).unwrap();
    for _ in 0..2 {
        // Each attempt fails the same way and unscales nothing (the first
        // gradient used to be divided by 4 on every attempt).
        match scaler.unscale_(&sgd) {
            Err(AutogradError::Tensor(TensorError::Overlap { .. })) => {}
            other => panic!("expected an Overlap error, got {other:?}"),
        }
        assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![8.0]);
    }
    // With a gradient of its own the scaler works, once.
    b.set_grad(Some(Tensor::from_slice(&[8.0f32, 8.0], &[2], CPU).unwrap()))
        .unwrap();
    assert!(scaler.step(&mut sgd).unwrap());
    assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0]);
}

#[test]
fn backward_never_meets_a_grad_of_another_shape() {
    // set_grad used to accept a [2, 2] gradient for a [2] leaf, and backward
    // then broadcast the new gradient into it.
    let w = Var::parameter(Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU).unwrap()).unwrap();
    assert_set_grad_refuses(&w, Tensor::zeros(&[2, 2], DType::F32, CPU).unwrap(), true);
    assert!(w.grad().is_none());
    let loss = w.mul(3.0).unwrap().sum(None, false).unwrap();
    loss.backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
}
