//! strata-tensor: tensors with PyTorch's semantics whose storage comes from
//! strata's caching allocator.
//!
//! * [`Tensor`]: a cheap handle on a strided view of reference-counted
//!   storage. Views (`view`, `transpose`, `narrow`, `slice`, `expand`, ...)
//!   share storage; in-place ops (`add_`, `mul_`, `copy_`, ...) write through
//!   every view; dropping the last view returns the block to the allocator's cache.
//! * Device-independent logic — [`shape`] (broadcasting, view strides),
//!   [`layout`] (strided views), `iter_plan` (loop ordering, coalescing,
//!   tiling), `reduce_plan` (kept/reduced dims), [`dtype`] (promotion) — is
//!   shared by all backends; kernels live
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
//! # Bad input is a typed error
//!
//! No input through the public API panics or crashes: every failure is a
//! [`TensorError`] that names what was wrong, and the tensors involved are
//! left unchanged.
//!
//! * **Sizes.** As in PyTorch a tensor holds at most `i64::MAX` elements, and
//!   every size, stride, offset and extent is computed with overflow checks
//!   (element and byte counts, `reshape`/`view` inference, broadcast shapes,
//!   `expand`, `as_strided` extents, `from_slice` shapes, matmul shapes). A
//!   shape beyond the limits is [`TensorError::SizeOverflow`] naming it (see
//!   [`shape`]); a size within them that the device cannot hold is the
//!   allocator's out-of-memory error ([`TensorError::Alloc`]), returned
//!   before anything is built: creation ops (`zeros`, `full`, `arange`,
//!   `rand`, `randn`) allocate first and fill in place on the device.
//! * **Scalars** are converted to a dtype with PyTorch's overflow check
//!   (`fill_`, `full`, `clamp`'s bounds): 70000 for an f16 tensor or NaN for
//!   an integer one is [`TensorError::Value`]; a float into an integer tensor
//!   truncates toward zero; anything converts to bool.
//! * **Devices.** A device without a backend here (no GPU, an ordinal past
//!   the last one) is [`TensorError::BackendUnavailable`], also from
//!   [`default_device`] when `STRATA_DEVICE` names it.
//!
//! ```
//! use strata_tensor::{DType, Device, Tensor, TensorError};
//! let e = Tensor::zeros(&[1 << 32, 1 << 32], DType::F32, Device::Cpu).unwrap_err();
//! assert!(matches!(e, TensorError::SizeOverflow { .. }));
//! let h = Tensor::ones(&[2], DType::F16, Device::Cpu).unwrap();
//! assert!(matches!(h.clamp(Some(70000), None::<i64>), Err(TensorError::Value { .. })));
//! ```
//!
//! # Random numbers
//!
//! [`Tensor::rand`] and [`Tensor::randn`] draw from a counter-based Philox
//! 4x32-10 stream keyed by the seed: element `i` depends on the seed and `i`
//! only, so every device gives the same numbers for the same seed and shape,
//! and a smaller tensor is a prefix of a larger one (the layout of the stream
//! is documented in `src/random.rs`). The samplers built on it take a seed
//! too: [`Tensor::randint`], [`Tensor::randperm`], [`Tensor::bernoulli`],
//! [`Tensor::bernoulli_`], [`Tensor::multinomial`] and `dropout`.
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
mod creation;
pub mod cuda;
mod device;
mod display;
pub mod distributed;
pub mod dtype;
mod error;
mod generate;
mod index;
pub mod interop;
mod iter;
pub(crate) mod iter_plan;
pub mod layout;
mod ops;
mod random;
pub(crate) mod reduce_plan;
mod scalar;
pub mod shape;
mod storage;
mod tensor;
mod to_device;
pub mod torch_random;
mod value_range;
mod view;

pub use backend::has_backend;
pub use convert::TensorData;
pub use device::default_device;
pub use dtype::{DType, Element};
pub use error::{Result, TensorError};
pub use index::SliceItem;
pub use iter::DimIter;
pub use layout::Layout;
#[doc(hidden)]
pub use ops::contract;
pub use ops::contract::{LerpWeight, TensordotDims};
pub use ops::cosine_similarity_plan;
pub use ops::ldexp_dtype;
pub use ops::AdamHyper;
pub use ops::GeluApprox;
pub use ops::Operand;
pub use ops::RoundingMode;
pub use ops::ScatterReduce;
pub use ops::Unique;
pub use ops::MAX_PIECES;
pub use ops::{
    acc_dtype, channel_dropout_batched, class_weight, feature_dropout_shape, nll_weights,
    CrossEntropyArgs, CrossEntropySaved, Reduction, SplitSize,
};
pub use ops::{
    adaptive_average, adaptive_pool, adaptive_pool_plan, adaptive_windows, conv_plan,
    conv_transpose_plan, convolution, global_mean_dims, pool_plan, AdaptiveDim, ConvKind,
    ConvOptions, ConvPadding, ConvPlan, ConvTransposePlan, Convolution, PoolKind, PoolOptions,
    PoolPlan,
};
pub use ops::{
    batch_norm, batch_norm_plan, group_norm, group_norm_plan, rms_norm, rms_norm_plan,
    BatchNormPlan, GroupNormPlan, RmsNormPlan, SELU_ALPHA, SELU_SCALE,
};
pub use ops::{col2im_plan, im2col_plan, pixel_shuffle_of, FoldOptions};
pub use ops::{
    conv_allow_tf32, conv_chunk_bytes, cudnn_enabled, set_conv_allow_tf32, set_conv_chunk_bytes,
    set_cudnn_enabled, DEFAULT_CONV_CHUNK_BYTES,
};
pub use ops::{float32_matmul_precision, set_float32_matmul_precision, Precision};
pub use ops::{interpolate_plan, InterpolateMode, InterpolateOptions, InterpolatePlan};
pub use ops::{with_batch, without_batch, AvgMode, Composite, Windows};
pub use ops::{PadMode, Repeats};
// session 78
pub use ops::GaussianVar;
#[doc(hidden)]
pub use ops::{addcdiv_plan, glu_halves, movedim_order, prelu_weight};
#[doc(hidden)]
pub use ops::{likelihood_losses, margin_losses};
// session 79 (helper 134): shape, join, statistics and nn ops
pub use ops::nn_more::{self, EmbeddingBagMode};
pub use ops::shape_join::{self, TensorSplit};
pub use ops::statistics::{self, HistogramBins, QuantileInterpolation, QuantileQ, Spacing};
// session 79 (helper 132): torch.linalg as `strata_tensor::linalg::inv(&a)`
pub use ops::linalg;
// session 80: GPU factorizations through cuSOLVER, switchable as cuDNN is
pub use ops::linalg::{cusolver_enabled, set_cusolver_enabled};
pub use scalar::Scalar;
pub use storage::Storage;
pub use strata_alloc::Device;
pub use tensor::Tensor;

// ----- model files and array exchange (src/interop) -----
pub use interop::{
    load_npy, load_safetensors, npy_from_bytes, npy_to_bytes, safetensors_from_bytes,
    safetensors_to_bytes, save_npy, save_safetensors,
};

// The default random generator (seed/offset state, replayed by checkpointing).
pub mod generator;
