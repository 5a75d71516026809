//! Tensor operations: argument checks, type promotion and broadcasting here
//! (device-independent), kernels in the backends.

mod checks;
mod elementwise;
mod matmul;
mod overloads;
mod reduce;
pub(crate) mod table;

pub use elementwise::{Operand, RoundingMode};
