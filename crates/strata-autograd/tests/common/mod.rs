//! The finite-difference gradient check shared by `gradcheck*.rs`: the
//! checked function is `sum(f(x) * w)` with a random weight `w`, so every
//! element of every gradient is exercised, and each analytic gradient is
//! compared with central differences in f64.
// Each test file uses a different part of this module.
#![allow(dead_code)]

use strata_autograd::{no_grad, Result, Var};
use strata_tensor::{DType, Device, Tensor};

pub const EPS: f64 = 1e-6;

pub fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F64, seed, Device::Cpu).unwrap()
}

/// Random values mapped by `f` (to keep inputs away from kinks and poles).
pub fn rand_map(shape: &[usize], seed: u64, f: impl Fn(f64) -> f64) -> Tensor {
    let v: Vec<f64> = randn(shape, seed)
        .to_vec::<f64>()
        .unwrap()
        .into_iter()
        .map(f)
        .collect();
    Tensor::from_vec(v, shape, Device::Cpu).unwrap()
}

pub fn away_from_zero(x: f64) -> f64 {
    x + 0.2 * x.signum()
}

pub fn positive(x: f64) -> f64 {
    x.abs() + 0.5
}

/// `sum(out * w)` as an f64.
pub fn weighted(out: &Tensor, w: &Tensor) -> f64 {
    out.to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(w.to_vec::<f64>().unwrap())
        .map(|(a, b)| a * b)
        .sum()
}

/// Checks the gradients of `f` at `inputs` against finite differences.
pub fn gradcheck(inputs: Vec<Tensor>, seed: u64, f: impl Fn(&[Var]) -> Result<Var>) {
    let inputs = &inputs[..];
    let vars: Vec<Var> = inputs
        .iter()
        .map(|t| Var::parameter(t.deep_clone().unwrap()).unwrap())
        .collect();
    let out = f(&vars).unwrap();
    assert!(out.requires_grad(), "output must require grad");
    let w = randn(out.shape(), seed ^ 0x5eed);
    let loss = out
        .mul(&Var::new(w.clone()))
        .unwrap()
        .sum(None, false)
        .unwrap();
    loss.backward().unwrap();
    for (i, x) in inputs.iter().enumerate() {
        let analytic = vars[i].grad().expect("a gradient for every input");
        assert_eq!(analytic.shape(), x.shape(), "gradient shape of input {i}");
        let analytic = analytic.to_vec::<f64>().unwrap();
        let base = x.to_vec::<f64>().unwrap();
        for j in 0..base.len() {
            let eval = |delta: f64| -> f64 {
                let mut v = base.clone();
                v[j] += delta;
                let mut args: Vec<Var> = inputs
                    .iter()
                    .map(|t| Var::new(t.deep_clone().unwrap()))
                    .collect();
                args[i] = Var::new(Tensor::from_vec(v, x.shape(), Device::Cpu).unwrap());
                let out = no_grad(|| f(&args)).unwrap();
                weighted(out.data(), &w)
            };
            let numeric = (eval(EPS) - eval(-EPS)) / (2.0 * EPS);
            let a = analytic[j];
            assert!(
                (a - numeric).abs() <= 1e-5 + 1e-5 * numeric.abs(),
                "input {i} element {j}: analytic {a} vs numeric {numeric}"
            );
        }
    }
}

/// Shapes that broadcast against `[m, n]`.
pub fn partner_shape(m: usize, n: usize, k: usize) -> Vec<usize> {
    match k {
        0 => vec![m, n],
        1 => vec![n],
        2 => vec![m, 1],
        3 => vec![1, n],
        4 => vec![],
        _ => vec![2, m, n], // broadcasts the other way: [m, n] against [2, m, n]
    }
}

/// A parameter (a leaf requiring grad) of f32 values `v`, on the CPU.
pub fn param(v: &[f32]) -> Var {
    Var::parameter(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()).unwrap()
}

/// A constant (a leaf not requiring grad) of f32 values `v`, on the CPU.
pub fn constant(v: &[f32]) -> Var {
    Var::new(Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap())
}

/// `v`'s gradient as f32 values (panics when it has none).
pub fn grad(v: &Var) -> Vec<f32> {
    v.grad().expect("a gradient").to_vec::<f32>().unwrap()
}
