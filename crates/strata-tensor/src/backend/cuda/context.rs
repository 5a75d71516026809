//! One opened GPU per ordinal — [`CudaDevice`], which owns everything that
//! belongs to the device: the driver handle (its primary context), properties,
//! compiled kernels, the cuBLAS and cuDNN handles, the pinned staging allocator of its
//! transfers (and, on GPU 0, the allocator of `pin_memory()` tensors) — the
//! current stream per device and thread, and the guard that turns cudarc's
//! panics (missing library or symbol) into typed errors.
//!
//! The process holds two per-device tables: the opened devices (read without
//! a lock once a device is open) and, per thread, the current streams.

use crate::error::{Result, TensorError};
use cudarc::driver::sys;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use strata_alloc::driver::cuda::CudaDriver;
use strata_alloc::pinned::CudaPinnedAllocator;
use strata_alloc::{CachingAllocator, Device, StreamId};

/// An opened GPU: the driver (which retains the primary context that the
/// caching allocator also uses), properties read once, and the kernels
/// compiled for it.
pub(crate) struct CudaDevice {
    /// The device ordinal.
    pub ordinal: usize,
    /// strata-alloc's driver for this device.
    pub driver: Arc<CudaDriver>,
    /// Compute capability `(major, minor)`.
    pub cc: (i32, i32),
    /// Number of multiprocessors.
    pub sm_count: u32,
    /// Loaded kernels, keyed by kernel key (one module's functions in order).
    pub(crate) functions: Mutex<HashMap<String, Arc<[Function]>, KeyHash>>,
    /// The cuBLAS handle (created on first use) and its workspaces.
    pub(crate) blas: Mutex<Option<super::blas::Handle>>,
    /// The cuDNN handle (created on first use) and its chosen algorithms.
    pub(crate) dnn: Mutex<Option<super::cudnn::Handle>>,
    /// The caching pinned allocator staging pageable transfers.
    pub(crate) staging: OnceLock<Arc<CudaPinnedAllocator>>,
    /// The allocator of `pin_memory()` tensors (used on GPU 0 only).
    pub(crate) pinned_tensors: OnceLock<Arc<CachingAllocator>>,
}

/// The hasher of the kernel table: FxHash (word at a time, no per-process
/// seed), which is several times cheaper than SipHash on the short keys looked
/// up at every launch. The keys are strata's own, so flooding is no concern.
pub(crate) type KeyHash = std::hash::BuildHasherDefault<FxHasher>;

/// FxHash, as in rustc.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.add(b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64)
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64)
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// GPU ordinals below this are found without a lock once opened.
const MAX_DEVICES: usize = 64;

/// The opened devices, by ordinal.
static DEVICES: [OnceLock<&'static CudaDevice>; MAX_DEVICES] =
    [const { OnceLock::new() }; MAX_DEVICES];

/// Serialises the opening of devices.
static OPENING: Mutex<()> = Mutex::new(());

/// A loaded kernel: the raw function handle (its module stays loaded for the
/// life of the process).
#[derive(Clone, Copy)]
pub(crate) struct Function(pub sys::CUfunction);

// SAFETY: a CUfunction is a handle to an immutable, loaded kernel; the driver
// API allows launching it from any thread with its context current.
unsafe impl Send for Function {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Function {}

/// A device failure with the driver's words.
pub(crate) fn failure(
    device: Device,
    op: impl Into<String>,
    message: impl Into<String>,
) -> TensorError {
    TensorError::DeviceFailure {
        device,
        op: op.into(),
        message: message.into(),
    }
}

/// Checks a driver status.
pub(crate) fn cu(device: Device, call: &'static str, r: sys::CUresult) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    Err(failure(device, call, describe(r)))
}

/// `CUDA_ERROR_X: text` for a status.
pub(crate) fn describe(r: sys::CUresult) -> String {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: both are valid out-pointers; the driver writes pointers to static
    // strings (or leaves them null for an unknown code).
    let ok = catch_unwind(AssertUnwindSafe(|| unsafe {
        sys::cuGetErrorName(r, &mut name);
        sys::cuGetErrorString(r, &mut text);
    }))
    .is_ok();
    let read = |p: *const std::ffi::c_char| {
        if !ok || p.is_null() {
            None
        } else {
            // SAFETY: non-null pointers from cuGetError* point to static C strings.
            Some(
                unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    };
    match (read(name), read(text)) {
        (Some(n), Some(t)) => format!("{n}: {t}"),
        _ => format!("{r:?}"),
    }
}

/// Runs `f`, turning a panic inside cudarc (a library or entry point that
/// cannot be loaded) into a typed error.
pub(crate) fn guarded<T>(device: Device, op: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(failure(
                device,
                op,
                format!(
                    "a CUDA library could not be used (missing library or entry point?): {msg}"
                ),
            ))
        }
    }
}

impl CudaDevice {
    /// The opened device `ordinal`, opening it on first use. A typed
    /// [`TensorError::BackendUnavailable`] when CUDA or the GPU is absent.
    pub(crate) fn get(ordinal: usize) -> Result<&'static CudaDevice> {
        if let Some(d) = CudaDevice::get_if_open(ordinal) {
            return Ok(d);
        }
        let _one_at_a_time = OPENING.lock();
        if let Some(d) = CudaDevice::get_if_open(ordinal) {
            return Ok(d);
        }
        let d = CudaDevice::open(ordinal)?;
        Ok(*DEVICES[ordinal].get_or_init(|| d))
    }

    /// The device `ordinal` if it has been opened (one atomic load).
    #[inline]
    pub(crate) fn get_if_open(ordinal: usize) -> Option<&'static CudaDevice> {
        DEVICES.get(ordinal).and_then(|slot| slot.get().copied())
    }

    /// Opens device `ordinal`: the one place the tensor backend opens a driver.
    fn open(ordinal: usize) -> Result<&'static CudaDevice> {
        let device = Device::Cuda(ordinal);
        let driver = CudaDriver::shared(ordinal).map_err(|e| TensorError::BackendUnavailable {
            device,
            reason: e.to_string(),
        })?;
        if ordinal >= MAX_DEVICES {
            return Err(TensorError::BackendUnavailable {
                device,
                reason: format!("strata supports GPU ordinals below {MAX_DEVICES}"),
            });
        }
        let unavailable = |e: strata_alloc::DriverError| TensorError::BackendUnavailable {
            device,
            reason: e.to_string(),
        };
        let cc = driver.compute_capability().map_err(unavailable)?;
        let sm_count = driver
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(unavailable)? as u32;
        Ok(Box::leak(Box::new(CudaDevice {
            ordinal,
            driver,
            cc,
            sm_count,
            functions: Mutex::new(HashMap::default()),
            blas: Mutex::new(None),
            dnn: Mutex::new(None),
            staging: OnceLock::new(),
            pinned_tensors: OnceLock::new(),
        })))
    }

    /// Memory for temporaries of this device's kernels (reduction partials,
    /// operand copies), on the current stream: it returns to the cache when
    /// dropped, ordered after the work queued so far.
    pub(crate) fn scratch(&self, nbytes: usize) -> Result<strata_alloc::Allocation> {
        Ok(self.allocator()?.allocate(nbytes as u64, self.stream())?)
    }

    /// This device's caching allocator (the registry's, found through its
    /// per-thread cache without a lock; see `strata_alloc::allocator`).
    pub(crate) fn allocator(&self) -> Result<Arc<CachingAllocator>> {
        Ok(strata_alloc::allocator(self.device())?)
    }

    /// The strata device.
    pub(crate) fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    /// Makes this device's primary context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        let dev = self.device();
        guarded(dev, "cuCtxSetCurrent", || {
            let mut current: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: `current` is a valid out-pointer.
            cu(dev, "cuCtxGetCurrent", unsafe {
                sys::cuCtxGetCurrent(&mut current)
            })?;
            if current != self.driver.cu_context() {
                // SAFETY: the driver retains the primary context for the life of
                // the process (devices are never closed), so it is live.
                cu(dev, "cuCtxSetCurrent", unsafe {
                    sys::cuCtxSetCurrent(self.driver.cu_context())
                })?;
            }
            Ok(())
        })
    }

    /// The stream work for this device goes to on the calling thread.
    pub(crate) fn stream(&self) -> StreamId {
        current_stream_id(self.ordinal)
    }
}

thread_local! {
    /// The current stream per GPU ordinal on this thread (indexed, not
    /// hashed: it is read at every launch and allocation).
    static CURRENT: RefCell<Vec<StreamId>> = const { RefCell::new(Vec::new()) };
}

/// The current stream of GPU `ordinal` on this thread (the legacy default
/// stream unless set).
pub(crate) fn current_stream_id(ordinal: usize) -> StreamId {
    CURRENT.with(|c| {
        c.borrow()
            .get(ordinal)
            .copied()
            .unwrap_or(StreamId::DEFAULT)
    })
}

/// Sets the current stream of GPU `ordinal` on this thread; returns the previous one.
pub(crate) fn set_current_stream_id(ordinal: usize, s: StreamId) -> StreamId {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() <= ordinal {
            c.resize(ordinal + 1, StreamId::DEFAULT);
        }
        std::mem::replace(&mut c[ordinal], s)
    })
}

/// The raw stream handle.
pub(crate) fn cu_stream(s: StreamId) -> sys::CUstream {
    s.0 as usize as sys::CUstream
}
