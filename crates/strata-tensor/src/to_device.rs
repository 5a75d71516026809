//! Moving tensors between devices: `to`, non-blocking copies, `pin_memory`,
//! and `record_stream`.

use crate::cuda::Stream;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use strata_alloc::Device;

#[cfg(feature = "cuda")]
use crate::backend::cuda::{context::CudaDevice, transfer};
#[cfg(feature = "cuda")]
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
        #[cfg(feature = "cuda")]
        {
            self.to_device_cuda(device, non_blocking)
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = non_blocking;
            crate::backend::backend_for(device)?;
            crate::backend::backend_for(self.device())?;
            unreachable!("only the CPU has a backend without the `cuda` feature")
        }
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
        #[cfg(feature = "cuda")]
        {
            let alloc = transfer::pinned_tensor_allocator()?;
            let storage = Storage::new_in(&alloc, self.numel() * self.dtype().size())?;
            let out = Tensor::from_parts(
                std::sync::Arc::new(storage),
                crate::layout::Layout::contiguous(self.shape()),
                self.dtype(),
            );
            out.copy_from_unchecked(self)?;
            Ok(out)
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err(TensorError::BackendUnavailable {
                device: Device::Cuda(0),
                reason: "pinned memory needs the `cuda` feature".into(),
            })
        }
    }

    /// Whether the tensor's memory is page-locked host memory from [`Tensor::pin_memory`].
    pub fn is_pinned(&self) -> bool {
        #[cfg(feature = "cuda")]
        {
            self.device() == Device::Cpu
                && transfer::pinned_tensor_allocator_if_open().is_some_and(|a| {
                    std::sync::Arc::ptr_eq(&a, self.storage().allocation().allocator())
                })
        }
        #[cfg(not(feature = "cuda"))]
        {
            false
        }
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

    #[cfg(feature = "cuda")]
    fn to_device_cuda(&self, device: Device, non_blocking: bool) -> Result<Tensor> {
        let src = self.contiguous()?;
        let nbytes = src.numel() * src.dtype().size();
        let offset = src.offset() * src.dtype().size();
        match (src.device(), device) {
            (Device::Cpu, Device::Cuda(n)) => {
                let dev = CudaDevice::get(n)?;
                let out = Tensor::empty(src.shape(), src.dtype(), device)?;
                let g = AccessGuard::lock(Some(out.storage()), &[src.storage()]);
                let dst = out.storage().allocation().ptr();
                let stream = dev.stream();
                // SAFETY: the contiguous source holds `nbytes` initialised bytes
                // from its offset inside its storage, read-locked above.
                let bytes = unsafe {
                    std::slice::from_raw_parts(
                        src.storage().allocation().as_mut_ptr().add(offset),
                        nbytes,
                    )
                };
                if non_blocking && src.is_pinned() {
                    transfer::htod_pinned_async(dev, dst, bytes, stream)?;
                    src.storage()
                        .allocation()
                        .record_stream(stream)
                        .map_err(TensorError::from)?;
                } else {
                    transfer::host_to_device(dev, dst, bytes, src.is_pinned(), stream)?;
                }
                drop(g);
                Ok(out)
            }
            (Device::Cuda(n), Device::Cpu) => {
                let dev = CudaDevice::get(n)?;
                let stream = dev.stream();
                let out = if non_blocking {
                    Tensor::empty(src.shape(), src.dtype(), Device::Cpu)?.pin_memory_empty()?
                } else {
                    Tensor::empty(src.shape(), src.dtype(), Device::Cpu)?
                };
                let g = AccessGuard::lock(Some(out.storage()), &[src.storage()]);
                let from = src.storage().allocation().ptr() + offset as u64;
                // SAFETY: the fresh output holds `nbytes` bytes of host memory,
                // write-locked above and seen by no one else yet.
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(out.storage().allocation().as_mut_ptr(), nbytes)
                };
                if non_blocking {
                    transfer::dtoh_pinned_async(dev, bytes, from, stream)?;
                    out.storage()
                        .allocation()
                        .record_stream(stream)
                        .map_err(TensorError::from)?;
                } else {
                    transfer::device_to_host(dev, bytes, from, false, stream)?;
                }
                drop(g);
                Ok(out)
            }
            (Device::Cuda(a), Device::Cuda(b)) => {
                let (sdev, ddev) = (CudaDevice::get(a)?, CudaDevice::get(b)?);
                // Order the copy after the source's pending work.
                transfer::sync_stream(sdev, sdev.stream())?;
                let out = Tensor::empty(src.shape(), src.dtype(), device)?;
                let g = AccessGuard::lock(Some(out.storage()), &[src.storage()]);
                let stream = ddev.stream();
                transfer::device_to_device(
                    ddev,
                    out.storage().allocation().ptr(),
                    sdev,
                    src.storage().allocation().ptr() + offset as u64,
                    nbytes,
                    stream,
                )?;
                if !non_blocking {
                    transfer::sync_stream(ddev, stream)?;
                }
                drop(g);
                Ok(out)
            }
            (Device::Cpu, Device::Cpu) => Ok(src),
        }
    }

    /// An uninitialised pinned tensor of this tensor's shape and dtype.
    #[cfg(feature = "cuda")]
    fn pin_memory_empty(&self) -> Result<Tensor> {
        let alloc = transfer::pinned_tensor_allocator()?;
        let storage = Storage::new_in(&alloc, self.numel() * self.dtype().size())?;
        Ok(Tensor::from_parts(
            std::sync::Arc::new(storage),
            crate::layout::Layout::contiguous(self.shape()),
            self.dtype(),
        ))
    }
}
