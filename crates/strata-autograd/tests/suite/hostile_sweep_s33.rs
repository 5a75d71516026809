//! Session 33's sweep of hostile inputs to autograd (after
//! `hostile_sweep_s32.rs`): the grad-mode and inference-mode guards used
//! out of the usual nesting, `addmm` and `rsub` (no earlier sweep names
//! them) at the edges. Each test asserts PyTorch's values (PyTorch 2.15 on
//! the CPU, noted beside them), or the state left behind.
//!
//! Defects these tests found (fixed with them):
//!
//! * `NoGradGuard`, `EnableGradGuard` and `InferenceModeGuard` dropped out
//!   of order (`drop(outer)` before `drop(inner)`) each restored the mode
//!   it had seen on entry: the outer one turned grad mode back on while the
//!   inner `no_grad` guard was still alive, and once both were gone grad
//!   mode stayed off (two inference-mode guards: inference mode stayed on,
//!   so every later result was an inference variable and training recorded
//!   nothing). The guards now follow the rule `AutocastGuard` already
//!   follows (`hostile_inputs_2.rs`): a guard dropped while an inner one
//!   lives hands its saved mode to that inner guard, and the mode after
//!   the last guard is the one before the first. (PyTorch's Python context
//!   managers, `__exit__`ed in that order by hand, lose the state as strata
//!   did: `no_grad` twice leaves `is_grad_enabled()` False, and
//!   `inference_mode` twice leaves inference mode on; strata keeps its
//!   stricter rule, as for autocast.)
//! * a parameter shared by two modules (tied weights: `b.weight =
//!   a.weight.clone()`) was listed twice by `Module::parameters()` and
//!   `named_parameters()` (so `Adam::new(model.parameters())` refused it as
//!   a duplicate) and counted twice by `num_parameters()`; and
//!   `Module::to(device, dtype)` converted it twice into two separate
//!   leaves, silently untying the weights (each then trained on its own).
//!   PyTorch lists a shared parameter once, under its first name, and
//!   `module.to` keeps it one tensor; so does strata now.

use strata_autograd::nn::{Linear, Module};
use strata_autograd::Adam;
use strata_autograd::{
    is_grad_enabled, is_inference_mode_enabled, set_grad_enabled, EnableGradGuard,
    InferenceModeGuard, NoGradGuard, Var,
};
use strata_tensor::{DType, Device, Tensor};

const CPU: Device = Device::Cpu;

fn param(v: &[f32], shape: &[usize]) -> Var {
    Var::parameter(Tensor::from_slice(v, shape, CPU).unwrap()).unwrap()
}

// ------------------------------------------------------------ guard order

#[test]
fn no_grad_guards_dropped_out_of_order_restore_grad_mode() {
    assert!(is_grad_enabled());
    let outer = NoGradGuard::new();
    let inner = NoGradGuard::new();
    drop(outer);
    // The inner guard is alive: grad mode stays off.
    assert!(!is_grad_enabled());
    drop(inner);
    // Both gone: the mode before the first (PyTorch's manual __exit__s in
    // this order leave it False; see the header).
    assert!(is_grad_enabled());
    let w = param(&[1.0, 2.0], &[2]);
    assert!(w.mul(&w).unwrap().requires_grad());
}

#[test]
fn enable_grad_inside_no_grad_dropped_out_of_order() {
    assert!(is_grad_enabled());
    let outer = NoGradGuard::new();
    let inner = EnableGradGuard::new();
    assert!(is_grad_enabled());
    drop(outer);
    // enable_grad is still alive.
    assert!(is_grad_enabled());
    drop(inner);
    assert!(is_grad_enabled());

    // And the other way round: enable_grad outside, no_grad inside, with
    // grad mode off to begin with.
    set_grad_enabled(false);
    let outer = EnableGradGuard::new();
    let inner = NoGradGuard::new();
    drop(outer);
    assert!(!is_grad_enabled());
    drop(inner);
    assert!(!is_grad_enabled());
    set_grad_enabled(true);
}

#[test]
fn guards_in_order_still_restore_what_they_saw() {
    // In-order drops are unchanged, set_grad_enabled inside a guard
    // included (torch.no_grad's __exit__ restores the mode seen on entry).
    let g = NoGradGuard::new();
    set_grad_enabled(true);
    assert!(is_grad_enabled());
    {
        let _h = NoGradGuard::new();
        assert!(!is_grad_enabled());
    }
    // The inner guard restores the mode it saw (on).
    assert!(is_grad_enabled());
    drop(g);
    assert!(is_grad_enabled());
    assert!(!strata_autograd::no_grad(is_grad_enabled));
}

#[test]
fn inference_mode_guards_dropped_out_of_order() {
    assert!(is_grad_enabled() && !is_inference_mode_enabled());
    let outer = InferenceModeGuard::new();
    let inner = InferenceModeGuard::new();
    drop(outer);
    // The inner guard is alive: still inference mode, grad off.
    assert!(is_inference_mode_enabled() && !is_grad_enabled());
    drop(inner);
    // PyTorch's __exit__s in this order leave inference mode on and grad
    // off (see the header); strata restores both.
    assert!(!is_inference_mode_enabled() && is_grad_enabled());
    let w = param(&[1.0, 2.0], &[2]);
    let y = w.mul(&w).unwrap();
    assert!(!y.is_inference() && y.requires_grad());

    // Mixed: inference mode outside, no_grad inside.
    let outer = InferenceModeGuard::new();
    let inner = NoGradGuard::new();
    drop(outer);
    // Inference mode belongs to the guard just dropped; grad mode to the
    // live no_grad guard.
    assert!(!is_inference_mode_enabled() && !is_grad_enabled());
    drop(inner);
    assert!(!is_inference_mode_enabled() && is_grad_enabled());
}

// ------------------------------------------------------------------ addmm

#[test]
fn addmm_with_an_empty_inner_dim_gives_the_broadcast_bias_and_its_gradients() {
    // b = [1, 2, 3] requires grad, mat1 [2, 0], mat2 [0, 3] require grad:
    // torch.addmm(b, m1, m2) = [[1, 2, 3], [1, 2, 3]]; after .sum().backward():
    // b.grad = [2, 2, 2], m1.grad of shape [2, 0], m2.grad of shape [0, 3].
    let b = param(&[1.0, 2.0, 3.0], &[3]);
    let m1 = param(&[], &[2, 0]);
    let m2 = param(&[], &[0, 3]);
    let y = b.addmm(&m1, &m2).unwrap();
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    );
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0; 3]);
    assert_eq!(m1.grad().unwrap().shape(), &[2, 0]);
    assert_eq!(m2.grad().unwrap().shape(), &[0, 3]);
}

#[test]
fn addmm_gradients_when_only_one_matrix_requires_grad() {
    // b [2, 1] (broadcast over columns), m1 = [[1, 2], [3, 4]] (no grad),
    // m2 = [[1, 0, 2], [0, 1, 3]] requires grad. PyTorch:
    // m2.grad = m1.T @ ones(2, 3) = [[4, 4, 4], [6, 6, 6]];
    // b.grad = [[3], [3]] (summed over the broadcast columns).
    let b = param(&[1.0, 2.0], &[2, 1]);
    let m1 = Var::new(Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], CPU).unwrap());
    let m2 = param(&[1.0, 0.0, 2.0, 0.0, 1.0, 3.0], &[2, 3]);
    let y = b.addmm(&m1, &m2).unwrap();
    // [[1+1, 1+2, 1+8], [2+3, 2+4, 2+18]]
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![2.0, 3.0, 9.0, 5.0, 6.0, 20.0]
    );
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(
        m2.grad().unwrap().to_vec::<f32>().unwrap(),
        vec![4.0, 4.0, 4.0, 6.0, 6.0, 6.0]
    );
    assert_eq!(b.grad().unwrap().shape(), &[2, 1]);
    assert_eq!(b.grad().unwrap().to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
    assert!(m1.grad().is_none());
}

#[test]
fn addmm_refuses_a_bias_that_would_enlarge_the_product_and_records_nothing() {
    // torch.addmm(torch.ones(2, 2, 3), ...) : "expand(...): the number of
    // sizes provided (2) must be greater or equal to the number of
    // dimensions in the tensor"; a bias of another dtype: "self and mat2
    // must have the same dtype".
    let m1 = param(&[1.0; 4], &[2, 2]);
    let m2 = param(&[1.0; 6], &[2, 3]);
    let big = param(&[1.0; 12], &[2, 2, 3]);
    assert!(big.addmm(&m1, &m2).is_err());
    let f64_bias = Var::parameter(Tensor::ones(&[3], DType::F64, CPU).unwrap()).unwrap();
    assert!(f64_bias.addmm(&m1, &m2).is_err());
    assert!(m1.grad().is_none() && m2.grad().is_none());
}

// ------------------------------------------------------------------- rsub

#[test]
fn rsub_of_a_nan_or_infinite_scalar() {
    // torch: (float('inf') - x) for x = [1, inf]: [inf, nan]; the gradient
    // of the sum is -1 everywhere (also where the result is NaN).
    let x = param(&[1.0, f32::INFINITY], &[2]);
    let y = x.rsub(f64::INFINITY).unwrap();
    let v = y.to_vec::<f32>().unwrap();
    assert_eq!(v[0], f32::INFINITY);
    assert!(v[1].is_nan());
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![-1.0, -1.0]);
}

// ------------------------------------------------------------ tied weights

struct Tied {
    a: Linear,
    b: Linear,
}

impl Module for Tied {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(String, &Var)) {
        self.a.visit(&strata_autograd::nn::join(prefix, "a"), f);
        self.b.visit(&strata_autograd::nn::join(prefix, "b"), f);
    }

    fn visit_mut(
        &mut self,
        prefix: &str,
        f: &mut dyn FnMut(String, &mut Var) -> strata_autograd::Result<()>,
    ) -> strata_autograd::Result<()> {
        self.a
            .visit_mut(&strata_autograd::nn::join(prefix, "a"), f)?;
        self.b.visit_mut(&strata_autograd::nn::join(prefix, "b"), f)
    }

    fn set_training(&mut self, training: bool) {
        self.a.set_training(training);
        self.b.set_training(training);
    }

    fn is_training(&self) -> bool {
        self.a.is_training()
    }
}

fn tied() -> Tied {
    let w = || Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2], CPU).unwrap();
    let a = Linear::from_tensors(w(), None).unwrap();
    let mut b =
        Linear::from_tensors(w(), Some(Tensor::zeros(&[3], DType::F32, CPU).unwrap())).unwrap();
    b.weight = a.weight.clone();
    Tied { a, b }
}

#[test]
fn a_shared_parameter_is_listed_once() {
    // PyTorch, with m.b.weight = m.a.weight (b with a bias):
    // [n for n, _ in m.named_parameters()] == ['a.weight', 'b.bias'],
    // len(list(m.parameters())) == 2, 9 elements.
    let m = tied();
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["a.weight".to_string(), "b.bias".to_string()]);
    assert_eq!(m.parameters().len(), 2);
    assert_eq!(m.num_parameters(), 9);
    // An optimizer over them is accepted (torch.optim.Adam(m.parameters())).
    assert!(Adam::new(m.parameters(), 1e-3).is_ok());
}

#[test]
fn module_to_keeps_a_shared_parameter_shared() {
    // m.to(torch.float64): m.a.weight is m.b.weight stays True.
    let mut m = tied();
    m.to(CPU, Some(DType::F64)).unwrap();
    assert_eq!(m.a.weight.dtype(), DType::F64);
    assert_eq!(m.b.bias.as_ref().unwrap().dtype(), DType::F64);
    // One variable: a gradient through b reaches a's weight.
    let x = Var::new(Tensor::ones(&[1, 2], DType::F64, CPU).unwrap());
    m.b.forward(&x)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    // d sum(x W^T + b) / dW = ones(3, 2) (x is ones).
    assert_eq!(
        m.a.weight.grad().unwrap().to_vec::<f64>().unwrap(),
        vec![1.0; 6]
    );
    assert_eq!(m.parameters().len(), 2);
}
