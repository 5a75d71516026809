//! strata-tensor: tensors with PyTorch's semantics whose storage comes from
//! strata's caching allocator.
//!
//! * [`Tensor`]: a cheap handle on a strided view of reference-counted
//!   storage. Views (`view`, `transpose`, `narrow`, `slice`, `expand`, ...)
//!   share storage; in-place ops (`add_`, `mul_`, `copy_`, ...) write through
//!   every view; dropping the last view returns the block to the allocator's cache.
//! * Device-independent logic — [`shape`] (broadcasting, view strides),
//!   [`layout`] (strided views), [`iter_plan`] (loop ordering, coalescing,
//!   tiling), [`dtype`] (promotion) — is shared by all backends; kernels live
//!   behind the backend boundary (`backend::cpu`, and `backend::cuda` with the
//!   `cuda` feature: NVRTC-compiled kernels, cuBLAS, staged transfers; without
//!   a GPU, CUDA tensors report [`TensorError::BackendUnavailable`]).
//! * Operators: `&a + &b`, `&a * 2.0`, `-&a` give `Result<Tensor>` (the
//!   method's error on bad shapes, dtypes or devices). Rust's `+=` cannot
//!   return an error and strata does not panic on bad input, so `+= -= *= /=`
//!   are defined on `Result<Tensor>`: `let mut r = Ok(a); r += &b; r?` runs
//!   `add_` in place and keeps the first error (the tensor is left unchanged).
//! * [`cuda`]: streams, events, synchronisation; [`Tensor::to`],
//!   [`Tensor::pin_memory`] and [`Tensor::record_stream`] move tensors.
//!
//! ```
//! use strata_tensor::{Tensor, DType, Device};
//! let a = Tensor::ones(&[2, 3], DType::F32, Device::Cpu).unwrap();
//! let b = Tensor::arange(0.0, 3.0, 1.0, None, Device::Cpu).unwrap();
//! a.add_(&b).unwrap();                       // b broadcasts over a's rows
//! assert_eq!(a.sum(None, false).unwrap().item::<f32>().unwrap(), 12.0);
//! ```

#![warn(missing_docs)]

pub(crate) mod backend;
mod compare;
mod convert;
pub mod cuda;
mod device;
mod display;
pub mod dtype;
mod error;
mod index;
mod iter;
pub mod iter_plan;
pub mod layout;
mod ops;
mod random;
mod scalar;
pub mod shape;
mod storage;
mod tensor;
mod to_device;
mod view;

pub use backend::has_backend;
pub use convert::TensorData;
pub use device::default_device;
pub use dtype::{DType, Element};
pub use error::{Result, TensorError};
pub use index::SliceItem;
pub use iter::DimIter;
pub use layout::Layout;
pub use ops::Operand;
pub use ops::RoundingMode;
pub use scalar::Scalar;
pub use storage::Storage;
pub use strata_alloc::Device;
pub use tensor::Tensor;
