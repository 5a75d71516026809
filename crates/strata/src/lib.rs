//! strata: Rust tensors with PyTorch's memory behaviour and diagnostics.
//!
//! This facade re-exports the pieces users need: the per-device memory
//! functions of the caching allocator, autograd ([`autograd`]), and (as they
//! land) tensors.

pub use strata_alloc::{
    allocator, empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated,
    memory_reserved, memory_stats, memory_summary, reset_accumulated_memory_stats,
    reset_peak_memory_stats, AllocError, AllocatorConfig, CachingAllocator, Device, MemoryStats,
    OutOfMemory, StreamId,
};

pub use strata_tensor::{
    default_device, DType, Element, Layout, Operand, RoundingMode, Scalar, Tensor, TensorError,
};

/// The tensor crate, for layouts, shapes and iteration plans.
pub use strata_tensor as tensor;

/// The allocator crate, for drivers, configuration and snapshots.
pub use strata_alloc as alloc;

/// Autograd over strata tensors: `Var`, `backward`, `no_grad`, optimizers.
pub use strata_autograd as autograd;
