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
//!   copy is now never released (it saves nothing).

use strata_autograd::autocast::{AutocastGuard, DeviceType};
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

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
