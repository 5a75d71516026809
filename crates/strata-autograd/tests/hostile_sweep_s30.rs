//! Session 30's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s29.rs`). Each test asserts PyTorch's values (from
//! PyTorch 2.15 on the CPU, or worked out by hand), or the typed error and
//! the state left behind.

use std::sync::Mutex;
use strata_autograd::{generator_state, manual_seed, AutogradError, Var};
use strata_tensor::{DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

/// Serialises the tests that use the process-wide dropout generator.
static GENERATOR: Mutex<()> = Mutex::new(());

fn grad_f32(v: &Var) -> Vec<f32> {
    v.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

fn param(v: &[f32]) -> Var {
    Var::parameter(Tensor::from_slice(v, &[v.len()], CPU).unwrap()).unwrap()
}

// ---------------------------------------------------------------- dropout

#[test]
fn dropout_that_fails_draws_nothing_from_the_generator() {
    let _g = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    manual_seed(7);
    let before = generator_state();
    // PyTorch: F.dropout(torch.tensor([1, 2, 3]), 0.5, True) raises
    // "result type Float can't be cast to the desired output type Long"
    // (after drawing its noise; strata checks first and draws nothing).
    let x = Var::new(Tensor::from_slice(&[1i64, 2, 3], &[3], CPU).unwrap());
    let err = x.dropout(0.5, true).unwrap_err();
    assert!(
        matches!(err, AutogradError::Tensor(TensorError::DType { .. })),
        "{err}"
    );
    assert_eq!(generator_state(), before);
    // A bad p draws nothing either.
    let f = param(&[1.0, 2.0]);
    for p in [-0.1, 1.5, f64::NAN] {
        assert!(f.dropout(p, true).is_err(), "{p}");
        assert_eq!(generator_state(), before, "{p}");
    }
    // Nor does a dropout that needs no mask (PyTorch's `_dropout` returns
    // the input for p = 0 or no element, zeros for p = 1, before drawing):
    // integer inputs pass through there.
    assert_eq!(
        x.dropout(1.0, true).unwrap().to_vec::<i64>().unwrap(),
        vec![0; 3]
    );
    assert_eq!(
        x.dropout(0.0, true).unwrap().to_vec::<i64>().unwrap(),
        vec![1, 2, 3]
    );
    let e = Var::parameter(Tensor::zeros(&[0, 3], DType::F32, CPU).unwrap()).unwrap();
    assert_eq!(e.dropout(0.5, true).unwrap().shape(), &[0, 3]);
    let y = f.dropout(1.0, true).unwrap();
    assert_eq!(generator_state(), before);
    // p = 1: zeros, and a zero gradient.
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(grad_f32(&f), vec![0.0, 0.0]);
    // A dropout that draws a mask advances the offset by one.
    f.dropout(0.5, true).unwrap();
    assert_eq!(generator_state(), (before.0, before.1 + 1));
}
