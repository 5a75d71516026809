//! Examples for strata; see `examples/`.

pub mod autograd_demo;
pub mod gpt_model;
pub mod gpu_timing;
pub mod peak_live;
pub mod training;
