//! Tensor operations: argument checks, type promotion and broadcasting here
//! (device-independent), kernels in the backends.

mod checks;
mod elementwise;
pub(crate) mod math;
mod matmul;
mod overloads;
mod reduce;
mod softmax;
pub(crate) mod table;

pub use elementwise::{GeluApprox, Operand, RoundingMode};

// ---- issue 12: nn, indexing, joining (branch nn) ----
mod index;
mod join;
mod nn;

pub use join::SplitSize;
pub use nn::{acc_dtype, nll_weights, CrossEntropyArgs, CrossEntropySaved, Reduction};
