//! strata: Rust tensors with PyTorch's semantics and memory behaviour.
//!
//! The package is `strata-ml` on crates.io; the library is `strata`.
//! Tensors ([`Tensor`]) are strided views of storage from a caching
//! allocator with PyTorch's behaviour (size classes, per-stream reuse,
//! expandable segments, `memory_stats()` with PyTorch's key names), with CPU
//! and CUDA backends and autograd ([`autograd`]).
//!
//! ```
//! use strata::{s, tensor, DType, Device, Tensor};
//!
//! let device: Device = std::env::var("STRATA_DEVICE").unwrap_or("cpu".into()).parse()?;
//! let x = tensor![[1., 2., 3.], [4., 5., 6.]]?.to(device)?;   // f32, like torch.tensor
//! let b = Tensor::ones(&[3], DType::F32, device)?;
//! let y = (2.0 * &x + &b)?;                      // broadcasting, one `?` per chain
//! assert_eq!(y.i(s![.., 1..])?.to_vec::<f32>()?, vec![5.0, 7.0, 11.0, 13.0]);
//! assert_eq!(y.sum(None, false)?.item::<f64>()?, 48.0);
//! println!("{y}");   // tensor([[ 3.,  5.,  7.], [ 9., 11., 13.]])
//!
//! // `clone()` is a cheap handle on the same storage (Rust's `Arc` clone);
//! // PyTorch's `clone()` (a copy) is `deep_clone()`.
//! let alias = y.clone();
//! let copy = y.deep_clone()?;
//! alias.add_(1.0)?;                              // in place, seen by `y` too
//! assert!(y.equal(&alias)? && !y.equal(&copy)?);
//!
//! println!("allocated {} bytes", strata::memory_allocated(device)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Where to look next: [`Tensor`] (creation, views, ops; operators and
//! compound assignment in the crate docs of [`tensor`](mod@tensor)), the memory functions
//! ([`memory_stats`], [`memory_summary`], [`empty_cache`], [`mem_get_info`];
//! [`set_allocator_settings`] and [`caching_allocator_enable`] change a live
//! allocator as `torch.cuda.memory` does), and
//! [`autograd`] (`Var`, `backward`, `no_grad`, optimizers).

pub use strata_alloc::{
    allocator, caching_allocator_enable, empty_cache, max_memory_allocated, max_memory_reserved,
    mem_get_info, mem_pool, memory_allocated, memory_reserved, memory_stats, memory_summary,
    reset_accumulated_memory_stats, reset_peak_memory_stats, set_allocator_settings, AllocError,
    AllocatorConfig, CachingAllocator, Device, MemInfo, MemPool, MemPoolGuard, MemPoolOptions,
    MemoryStats, OutOfMemory, StreamId,
};

pub use strata_tensor::{
    default_device, s, tensor, DType, DimIter, Element, Layout, Operand, RoundingMode, Scalar,
    SliceItem, Tensor, TensorData, TensorError,
};

// ----- model files (safetensors, .npy) -----
pub use strata_tensor::interop::{
    load_npy, load_safetensors, npy_from_bytes, npy_to_bytes, safetensors_from_bytes,
    safetensors_to_bytes, save_npy, save_safetensors,
};

/// The precision of f32 matrix products on GPUs (PyTorch's
/// `torch.set_float32_matmul_precision`; TF32 is opt-in).
pub use strata_tensor::{float32_matmul_precision, set_float32_matmul_precision, Precision};

/// `torch.linalg` on tensors (`strata::linalg::inv(&a)`); the recorded
/// forms on variables are `strata::autograd::linalg`.
pub use strata_tensor::linalg;

/// The tensor crate, for layouts, shapes and iteration plans.
pub use strata_tensor as tensor;

/// The allocator crate, for drivers, configuration and snapshots.
pub use strata_alloc as alloc;

/// Autograd over strata tensors: `Var`, `backward`, `no_grad`, optimizers.
pub use strata_autograd as autograd;

/// The README's "Use it in your project" program, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
