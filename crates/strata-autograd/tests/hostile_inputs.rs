//! Hostile inputs to the optimizers and the local process group that the
//! adversarial suite does not reach: a gradient set with `set_grad` whose
//! shape is not its parameter's (the optimizers used to update the
//! parameters before it and then fail, or broadcast a smaller gradient over
//! the parameter), a world size the host cannot hold (it used to panic
//! on the allocation), data-parallel parameters whose element counts add up
//! past usize (the sum wrapped: a debug build panicked, a release build
//! made a bucket too small and failed later with an unrelated error), and
//! attention with an empty embedding dim and no scale (an error about a
//! scale the caller never passed), and in-place gradient scaling
//! (`clip_grad_norm_`, `GradScaler::unscale_`) over an integer or expanded
//! gradient (an integer gradient was zeroed by the truncated factor; an
//! error half-way left the earlier gradients scaled, and `unscale_` ready
//! to scale them again), and backward accumulating into a `.grad` of
//! another shape put there by `set_grad` (it was broadcast into it).

use std::sync::Arc;
use strata_autograd::distributed::{DdpConfig, DistributedDataParallel, LocalGroup};
use strata_autograd::{
    clip_grad_norm_, Adam, AdamW, AttentionArgs, AutogradError, GradScaler, Optimizer, Sgd, Var,
};
use strata_tensor::{DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn param(v: &[f32], grad: &[f32]) -> Var {
    let p = Var::parameter(Tensor::from_slice(v, &[v.len()], CPU).unwrap()).unwrap();
    p.set_grad(Some(Tensor::from_slice(grad, &[grad.len()], CPU).unwrap()));
    p
}

fn values(p: &Var) -> Vec<f32> {
    p.to_vec::<f32>().unwrap()
}

fn assert_shape_error(r: Result<(), AutogradError>) {
    match r {
        Err(AutogradError::Tensor(TensorError::Shape { .. })) => {}
        other => panic!("expected a Shape error, got {other:?}"),
    }
}

#[test]
fn a_bad_gradient_stops_every_optimizer_before_it_writes() {
    type Make = fn(Vec<Var>) -> Box<dyn Optimizer>;
    let makers: [(&str, Make); 4] = [
        ("sgd", |ps| Box::new(Sgd::new(ps, 0.1, 0.0).unwrap())),
        ("sgd momentum", |ps| {
            Box::new(Sgd::new(ps, 0.1, 0.9).unwrap())
        }),
        ("adam", |ps| Box::new(Adam::new(ps, 0.1).unwrap())),
        ("adamw", |ps| Box::new(AdamW::new(ps))),
    ];
    for (name, make) in makers {
        // The first parameter is fine, the second's gradient is too long.
        let p1 = param(&[1.0, 2.0, 3.0], &[1.0, 1.0, 1.0]);
        let p2 = param(&[1.0, 2.0], &[1.0, 1.0, 1.0]);
        let mut opt = make(vec![p1.clone(), p2.clone()]);
        assert_shape_error(opt.step());
        assert_eq!(values(&p1), vec![1.0, 2.0, 3.0], "{name}");
        assert_eq!(values(&p2), vec![1.0, 2.0], "{name}");
        // Once the gradient is right, the step runs (and the first
        // parameter moves once, from its original value).
        p2.set_grad(Some(Tensor::from_slice(&[1.0f32, 1.0], &[2], CPU).unwrap()));
        opt.step().unwrap();
        let moved = values(&p1);
        assert!(
            moved.iter().zip([1.0, 2.0, 3.0]).all(|(a, b)| *a < b),
            "{name}: {moved:?}"
        );
    }
}

#[test]
fn a_smaller_gradient_is_not_broadcast_over_its_parameter() {
    // A [1] gradient for a [2] parameter: SGD used to subtract it from
    // every element.
    let p = param(&[1.0, 2.0], &[5.0]);
    let mut sgd = Sgd::new(vec![p.clone()], 0.1, 0.0).unwrap();
    assert_shape_error(sgd.step());
    assert_eq!(values(&p), vec![1.0, 2.0]);
    let p = param(&[1.0, 2.0], &[5.0]);
    let mut adam = Adam::new(vec![p.clone()], 0.1).unwrap();
    assert_shape_error(adam.step());
    assert_eq!(values(&p), vec![1.0, 2.0]);
    assert_eq!(adam.state_bytes(), 0, "no moments made for a refused step");
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

#[test]
fn attention_with_an_empty_embedding_dim_asks_for_a_scale() {
    let z = Var::new(Tensor::zeros(&[2, 0], DType::F32, CPU).unwrap());
    match z.attention(&z, &z, AttentionArgs::default()) {
        Err(AutogradError::Tensor(TensorError::Shape { op, msg })) => {
            assert_eq!(op, "attention");
            assert!(msg.contains("pass a scale"), "{msg}");
        }
        other => panic!("expected a Shape error, got {other:?}"),
    }
    // With a scale the empty product is well defined: uniform weights
    // over an empty value dim.
    let args = AttentionArgs {
        scale: Some(1.0),
        ..Default::default()
    };
    assert_eq!(z.attention(&z, &z, args).unwrap().shape(), &[2, 0]);
}

#[test]
fn clip_grad_norm_refuses_integer_and_aliased_gradients_before_scaling_any() {
    // An i64 gradient: the factor 1/3 truncated to 0 and zeroed it.
    let a = param(&[1.0], &[3.0]);
    let b = Var::parameter(Tensor::from_slice(&[1.0f32], &[1], CPU).unwrap()).unwrap();
    b.set_grad(Some(Tensor::from_slice(&[3i64], &[1], CPU).unwrap()));
    match clip_grad_norm_(&[a.clone(), b.clone()], 1.0) {
        Err(AutogradError::Tensor(TensorError::DType { .. })) => {}
        other => panic!("expected a DType error, got {other:?}"),
    }
    assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0]);
    assert_eq!(b.grad().unwrap().to_vec::<i64>().unwrap(), vec![3]);
    // An expanded gradient after a good one: the good one was scaled, then
    // the error came.
    let c = Var::parameter(Tensor::zeros(&[2], DType::F32, CPU).unwrap()).unwrap();
    c.set_grad(Some(
        Tensor::full(&[1], 4.0, DType::F32, CPU)
            .unwrap()
            .expand(&[2])
            .unwrap(),
    ));
    match clip_grad_norm_(&[a.clone(), c], 1.0) {
        Err(AutogradError::Tensor(TensorError::Overlap { .. })) => {}
        other => panic!("expected an Overlap error, got {other:?}"),
    }
    assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0]);
}

#[test]
fn grad_scaler_unscale_refuses_a_bad_gradient_before_unscaling_any() {
    let a = param(&[1.0], &[8.0]);
    let b = Var::parameter(Tensor::from_slice(&[1.0f32], &[1], CPU).unwrap()).unwrap();
    b.set_grad(Some(Tensor::from_slice(&[8i64], &[1], CPU).unwrap()));
    let mut sgd = Sgd::new(vec![a.clone(), b.clone()], 0.1, 0.0).unwrap();
    let mut scaler = GradScaler::with_settings(4.0, 2.0, 0.5, 10).unwrap();
    for _ in 0..2 {
        // Each attempt fails the same way and unscales nothing (the first
        // gradient used to be divided by 4 on every attempt).
        match scaler.unscale_(&sgd) {
            Err(AutogradError::Tensor(TensorError::DType { .. })) => {}
            other => panic!("expected a DType error, got {other:?}"),
        }
        assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![8.0]);
    }
    // With a float gradient the scaler works, once.
    b.set_grad(Some(Tensor::from_slice(&[8.0f32], &[1], CPU).unwrap()));
    assert!(scaler.step(&mut sgd).unwrap());
    assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0]);
}

#[test]
fn backward_does_not_broadcast_into_a_grad_of_another_shape() {
    let w = Var::parameter(Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU).unwrap()).unwrap();
    w.set_grad(Some(Tensor::zeros(&[2, 2], DType::F32, CPU).unwrap()));
    let loss = w.mul(3.0).unwrap().sum(None, false).unwrap();
    match loss.backward() {
        Err(AutogradError::Tensor(TensorError::Shape { op, .. })) => assert_eq!(op, "backward"),
        other => panic!("expected a Shape error, got {other:?}"),
    }
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![0.0; 4]);
    // With the stale gradient cleared, backward fills it.
    w.set_grad(None);
    let loss = w.mul(3.0).unwrap().sum(None, false).unwrap();
    loss.backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
}
