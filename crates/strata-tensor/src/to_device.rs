//! Moving tensors between devices: `to`, non-blocking copies, `pin_memory`,
//! and `record_stream`.

use crate::cuda::Stream;
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::tensor::Tensor;
use strata_alloc::Device;

use crate::backend::gpu;
use crate::storage::{AccessGuard, Storage};

impl Tensor {
    /// A copy on `device` (the tensor itself when it is already there).
    /// Returns once the source may be modified; a copy to the host has
    /// completed when this returns.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu).unwrap();
    /// assert!(a.to(Device::Cpu).unwrap().same_storage(&a));
    /// ```
    pub fn to(&self, device: Device) -> Result<Tensor> {
        self.to_device(device, false)
    }

    /// A copy on `device`. With `non_blocking`, a copy from pinned host memory
    /// is queued on the GPU's current stream and this returns at once (the
    /// pinned block is reused only after the copy), and a copy to the host
    /// lands in a fresh pinned tensor that is complete once the GPU's current
    /// stream has been synchronised (PyTorch's semantics).
    pub fn to_device(&self, device: Device, non_blocking: bool) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        // Both ends must have a backend (the typed error names the one missing).
        crate::backend::backend_for(device)?;
        crate::backend::backend_for(self.device())?;
        self.to_other_device(device, non_blocking)
    }

    /// A copy of a CPU tensor in page-locked (pinned) host memory, which GPUs
    /// copy from and to directly and asynchronously.
    pub fn pin_memory(&self) -> Result<Tensor> {
        if self.device() != Device::Cpu {
            return Err(TensorError::value(
                "pin_memory",
                format!(
                    "only CPU tensors can be pinned, this one is on {}",
                    self.device()
                ),
            ));
        }
        if self.is_pinned() {
            return Ok(self.clone());
        }
        let out = self.pin_memory_empty()?;
        out.copy_from_unchecked(self)?;
        Ok(out)
    }

    /// Whether the tensor's memory is page-locked host memory from [`Tensor::pin_memory`].
    pub fn is_pinned(&self) -> bool {
        self.device() == Device::Cpu
            && gpu::pinned_tensor_allocator_if_open().is_some_and(|a| {
                std::sync::Arc::ptr_eq(&a, self.storage().allocation().allocator())
            })
    }

    /// Marks the tensor's memory as used by work queued on `stream`: when the
    /// last view is dropped, the caching allocator reuses the memory only after
    /// that work has run (PyTorch's `record_stream`).
    pub fn record_stream(&self, stream: &Stream) -> Result<()> {
        let on_stream_device = self.device() == stream.device();
        if !on_stream_device && !self.is_pinned() {
            return Err(TensorError::DeviceMismatch {
                op: "record_stream",
                lhs: self.device(),
                rhs: stream.device(),
            });
        }
        self.storage()
            .allocation()
            .record_stream(stream.id())
            .map_err(TensorError::from)
    }

    /// The copy of [`Tensor::to_device`] between two devices with backends,
    /// laid out as PyTorch's `_to_copy` lays it out (`memory_format=
    /// torch.preserve_format`): a non-overlapping and dense tensor keeps its
    /// strides (a transposed matrix stays transposed on the other device),
    /// any other becomes dense in the order of its strides. Either way the
    /// elements fill one run of `numel` slots, moved as one block of bytes.
    fn to_other_device(&self, device: Device, non_blocking: bool) -> Result<Tensor> {
        let src = if self.layout().is_dense() {
            self.clone()
        } else {
            self.deep_clone()?
        };
        let nbytes = src.numel() * src.dtype().size();
        // An empty view's offset is not bounded by its storage: read nothing from 0.
        let offset = if nbytes == 0 {
            0
        } else {
            src.offset() * src.dtype().size()
        };
        match (src.device(), device) {
            (Device::Cpu, Device::Cuda(_)) => {
                let stream = gpu::current_stream(device)?;
                let out = src.uninit_preserving_on("to", src.dtype(), device)?;
                let g = AccessGuard::lock(Some(out.storage()), &[src.storage()]);
                let dst = out.storage().allocation().ptr();
                // SAFETY: the contiguous source holds `nbytes` initialised bytes
                // from its offset inside its storage, read-locked above.
                let bytes = unsafe {
                    std::slice::from_raw_parts(
                        src.storage().allocation().as_mut_ptr().add(offset),
                        nbytes,
                    )
                };
                if non_blocking && src.is_pinned() {
                    gpu::htod_pinned_async(device, dst, bytes, stream)?;
                    src.storage()
                        .allocation()
                        .record_stream(stream)
                        .map_err(TensorError::from)?;
                } else {
                    gpu::host_to_device(device, dst, bytes, src.is_pinned(), stream)?;
                }
                drop(g);
                // The values' range, known from the source or read on the
                // host side of the copy (not for an asynchronous copy from
                // pinned memory, whose bytes may still change before it runs).
                if !(non_blocking && src.is_pinned()) {
                    match src.known_value_range() {
                        Some((lo, hi)) => out.remember_value_range(lo, hi),
                        None => out.remember_host_range(bytes),
                    }
                }
                Ok(out)
            }
            (from_device @ Device::Cuda(_), Device::Cpu) => {
                let stream = gpu::current_stream(from_device)?;
                let out = if non_blocking {
                    src.pin_memory_empty()?
                } else {
                    src.uninit_preserving_on("to", src.dtype(), Device::Cpu)?
                };
                let g = AccessGuard::lock(Some(out.storage()), &[src.storage()]);
                let from = src.storage().allocation().ptr() + offset as u64;
                // SAFETY: the fresh output holds `nbytes` bytes of host memory,
                // write-locked above and seen by no one else yet.
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(out.storage().allocation().as_mut_ptr(), nbytes)
                };
                if non_blocking {
                    gpu::dtoh_pinned_async(from_device, bytes, from, stream)?;
                    out.storage()
                        .allocation()
                        .record_stream(stream)
                        .map_err(TensorError::from)?;
                } else {
                    gpu::device_to_host(from_device, bytes, from, stream)?;
                }
                drop(g);
                src.pass_value_range(&out);
                Ok(out)
            }
            (from_device @ Device::Cuda(_), Device::Cuda(_)) => {
                // Order the copy after the source's pending work.
                gpu::synchronize_stream(from_device, gpu::current_stream(from_device)?)?;
                let out = src.uninit_preserving_on("to", src.dtype(), device)?;
                let g = AccessGuard::lock(Some(out.storage()), &[src.storage()]);
                let stream = gpu::current_stream(device)?;
                gpu::device_to_device(
                    device,
                    out.storage().allocation().ptr(),
                    from_device,
                    src.storage().allocation().ptr() + offset as u64,
                    nbytes,
                    stream,
                )?;
                if !non_blocking {
                    gpu::synchronize_stream(device, stream)?;
                }
                drop(g);
                src.pass_value_range(&out);
                Ok(out)
            }
            (Device::Cpu, Device::Cpu) => Ok(src),
        }
    }

    /// An uninitialised pinned tensor of this tensor's shape, strides and
    /// dtype, at offset 0, as PyTorch's `_pin_memory` lays it out: a strided
    /// view keeps its strides and the gaps between its elements (the storage
    /// spans them). A view whose elements share memory (an expanded view) is
    /// PyTorch's overlap error; one whose strides may overlap otherwise
    /// (an `as_strided` view) is laid out dense in the order of its strides.
    fn pin_memory_empty(&self) -> Result<Tensor> {
        let layout = self.layout();
        if self.numel() > 0 && layout.has_internal_overlap() {
            return Err(TensorError::overlap(
                "pin_memory",
                format!(
                    "more than one element of the pinned copy would refer to one memory location \
                     (shape {:?}, strides {:?}); pin a contiguous() copy instead",
                    self.shape(),
                    self.strides()
                ),
            ));
        }
        let layout = if self.numel() > 0 && !layout.may_overlap() {
            Layout {
                shape: self.shape().to_vec(),
                strides: self.strides().to_vec(),
                offset: 0,
            }
        } else {
            self.preserved_layout()
        };
        // At offset 0 the layout spans no more than the source's view does
        // within its own storage, so the extent is a real one.
        let span = layout.storage_extent();
        let alloc = gpu::pinned_tensor_allocator()?;
        let storage = Storage::new_in(&alloc, span * self.dtype().size())?;
        Ok(Tensor::from_parts(
            std::sync::Arc::new(storage),
            layout,
            self.dtype(),
        ))
    }
}
