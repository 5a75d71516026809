//! strata-tensor: tensors whose storage comes from strata's caching allocator.
//! (Being built: see the tensor issue.)

pub use strata_alloc::Device;
