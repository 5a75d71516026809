//! Small constructors and readers shared by the suite's sweep files: CPU
//! tensors from slices, and their elements back as one type.

use strata_tensor::{Device, Tensor};

/// The CPU.
pub const CPU: Device = Device::Cpu;

/// An f32 CPU tensor of `shape` holding `v`.
pub fn f32t(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

/// An i64 CPU tensor of `shape` holding `v`.
pub fn i64t(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

/// A bool CPU tensor of `shape` holding `v`.
pub fn boolt(v: &[bool], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

/// The elements of `t`, converted to f32.
pub fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec_as::<f32>().unwrap()
}

/// The elements of `t`, converted to f64.
pub fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_vec_as::<f64>().unwrap()
}

/// The elements of `t`, converted to i64.
pub fn i64s(t: &Tensor) -> Vec<i64> {
    t.to_vec_as::<i64>().unwrap()
}
