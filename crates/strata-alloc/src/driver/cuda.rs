//! The CUDA driver: one NVIDIA GPU through the CUDA driver API (cudarc's raw
//! `sys` layer, with `libcuda` loaded at run time).
//!
//! * Segments are plain `cuMemAlloc_v2`/`cuMemFree_v2` allocations on raw
//!   `CUdeviceptr`s. cudarc's `CudaSlice` is deliberately not used: it allocates
//!   from the driver's stream-ordered pool and creates two events per slice, which
//!   is a second cache under ours and costs four driver calls per allocation.
//! * Expandable segments use the virtual-memory calls (`cuMemAddressReserve`,
//!   `cuMemCreate`, `cuMemMap`, `cuMemSetAccess`, `cuMemUnmap`, `cuMemRelease`,
//!   `cuMemAddressFree`) where the device supports them.
//! * `StreamId(0)` is the legacy default (NULL) stream; any other `StreamId` is a
//!   raw `CUstream` handle cast to `u64` (see [`CudaDriver::create_stream`]).
//!   Events are raw `CUevent` handles, created with `CU_EVENT_DISABLE_TIMING`.
//!
//! # Absence and failure
//!
//! cudarc panics when `libcuda` cannot be loaded or lacks a symbol. Every entry
//! point here first checks for the library (`is_culib_present`) and runs each
//! driver call inside `catch_unwind`, so a missing driver, a missing GPU or an
//! out-of-range ordinal is a [`DriverError::Unavailable`] that says what is missing
//! and what to do, never a panic. (This needs `panic = "unwind"`, which the
//! workspace's release profile sets.) A failing call is a [`DriverError::Call`]
//! carrying the call's name and the driver's own error name and text;
//! `CUDA_ERROR_OUT_OF_MEMORY` is [`DriverError::OutOfMemory`], which the caching
//! allocator treats as recoverable.
//!
//! # Threads
//!
//! The driver retains the device's primary context once, in [`CudaDriver::new`],
//! and releases it on drop. Before each call it makes that context current on the
//! calling thread (one `cuCtxGetCurrent`, plus a `cuCtxSetCurrent` only when
//! another context is current). If the thread had another context current, that
//! context is restored after the call, so the driver never changes a context that
//! other code on the thread relies on.

use super::{
    Device, DevicePtr, Driver, DriverError, EventHandle, MemInfo, PhysHandle, StreamEvents,
    StreamId, VirtualMemory,
};
use cudarc::driver::sys;
use parking_lot::Mutex;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

/// CUDA device `ordinal` as a [`Driver`]: the process-wide handle of
/// [`CudaDriver::shared`].
///
/// Fails with [`DriverError::Unavailable`] when the CUDA driver library is not
/// installed, no GPU is visible, or `ordinal` is out of range; never panics.
pub fn open(ordinal: usize) -> Result<Arc<dyn Driver>, DriverError> {
    CudaDriver::shared(ordinal).map(|d| d as Arc<dyn Driver>)
}

/// Whether the CUDA driver library loads and at least one GPU is visible.
/// Never panics; the answer is computed once per process.
pub fn is_available() -> bool {
    device_count() > 0
}

/// The number of visible GPUs, 0 when the driver library or the GPUs are absent.
/// Never panics; the answer is computed once per process.
pub fn device_count() -> usize {
    init().unwrap_or(0)
}

/// Why CUDA cannot be used on this machine, or `None` when it can. The text is
/// the one [`open`] would return.
pub fn unavailable_reason() -> Option<String> {
    match init() {
        Ok(_) => None,
        Err(DriverError::Unavailable(s)) => Some(s),
        Err(e) => Some(e.to_string()),
    }
}

/// What to do when no GPU can be used; appended to every "unavailable" message.
const NO_GPU_ADVICE: &str = "on a machine without a GPU use the cpu device (STRATA_DEVICE=cpu)";

/// Loads the library and runs `cuInit` once per process; the device count, or
/// why CUDA is unavailable. A failed `cuInit` cannot be retried in the same
/// process (the driver remembers it), so the failure is cached as well.
fn init() -> Result<usize, DriverError> {
    static INIT: OnceLock<Result<usize, String>> = OnceLock::new();
    INIT.get_or_init(|| {
        if !library_present() {
            return Err(format!(
                "the CUDA driver library (libcuda.so.1) was not found: install the NVIDIA \
                 driver, or add the directory that holds libcuda.so.1 to LD_LIBRARY_PATH; \
                 {NO_GPU_ADVICE}"
            ));
        }
        // SAFETY: `cuInit(0)` has no preconditions; 0 is the only valid flag value.
        let r = guarded("cuInit", || check("cuInit", unsafe { sys::cuInit(0) }));
        match r {
            Ok(()) => {}
            Err(DriverError::Call { message, .. })
                if message.starts_with("CUDA_ERROR_NO_DEVICE") =>
            {
                return Err(format!(
                    "no CUDA-capable GPU is visible (cuInit: {message}): check `nvidia-smi` \
                     and CUDA_VISIBLE_DEVICES; {NO_GPU_ADVICE}"
                ));
            }
            Err(e) => {
                return Err(format!(
                    "the CUDA driver could not be initialised ({e}): check that the NVIDIA \
                     kernel module is loaded and matches libcuda (`nvidia-smi` must work); \
                     {NO_GPU_ADVICE}"
                ));
            }
        }
        let mut count: i32 = 0;
        guarded("cuDeviceGetCount", || {
            // SAFETY: `count` is a valid out-pointer for the duration of the call,
            // and cuInit succeeded above.
            check("cuDeviceGetCount", unsafe {
                sys::cuDeviceGetCount(&mut count)
            })
        })
        .map_err(|e| format!("the CUDA driver cannot count GPUs ({e}); {NO_GPU_ADVICE}"))?;
        if count <= 0 {
            return Err(format!(
                "the CUDA driver reports no GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES; \
                 {NO_GPU_ADVICE}"
            ));
        }
        Ok(count as usize)
    })
    .clone()
    .map_err(DriverError::Unavailable)
}

/// Whether `libcuda` can be loaded (checked once per process).
fn library_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to dlopen the candidate library names
    // and drops each handle it opens; it has no preconditions and, unlike the rest
    // of cudarc, does not panic when nothing loads.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// The text of a panic payload.
fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Runs `f`, turning a panic inside cudarc (library or symbol missing) into a
/// [`DriverError::Call`] for `call`.
fn guarded<T>(
    call: &'static str,
    f: impl FnOnce() -> Result<T, DriverError>,
) -> Result<T, DriverError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(DriverError::Call {
            call,
            message: format!(
                "the CUDA driver library could not be used (a missing library or entry point?): {}",
                panic_text(p.as_ref())
            ),
        }),
    }
}

/// Maps a `CUresult` to strata's error: out of memory is
/// [`DriverError::OutOfMemory`], anything else a [`DriverError::Call`] with the
/// driver's error name and text.
fn check(call: &'static str, r: sys::CUresult) -> Result<(), DriverError> {
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(DriverError::OutOfMemory),
        e => Err(DriverError::Call {
            call,
            message: describe(e),
        }),
    }
}

/// `CUDA_ERROR_X: text`, from `cuGetErrorName` and `cuGetErrorString`, falling
/// back to the enum's name when the driver cannot describe the code.
fn describe(code: sys::CUresult) -> String {
    if !library_present() {
        return format!("{code:?}");
    }
    let name = catch_unwind(|| {
        let mut p: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: `p` is a valid out-pointer; on success the driver stores a
        // pointer to a static NUL-terminated string, which is only read here.
        let ok = unsafe { sys::cuGetErrorName(code, &mut p) } == sys::CUresult::CUDA_SUCCESS;
        // SAFETY: see above: `p` is non-null only when the driver set it to a
        // static C string.
        (ok && !p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    })
    .ok()
    .flatten()
    .unwrap_or_else(|| format!("{code:?}"));
    let text = catch_unwind(|| {
        let mut p: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: as for `cuGetErrorName` above.
        let ok = unsafe { sys::cuGetErrorString(code, &mut p) } == sys::CUresult::CUDA_SUCCESS;
        // SAFETY: `p` is non-null only when the driver set it to a static C string.
        (ok && !p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    })
    .ok()
    .flatten();
    match text {
        Some(t) => format!("{name}: {t}"),
        None => name,
    }
}

/// The raw stream behind a `StreamId`.
#[inline]
fn cu_stream(s: StreamId) -> sys::CUstream {
    s.0 as usize as sys::CUstream
}

/// The raw event behind an `EventHandle`.
#[inline]
fn cu_event(e: EventHandle) -> sys::CUevent {
    e.0 as usize as sys::CUevent
}

/// One CUDA device, serving a caching allocator (and the pinned host allocator).
///
/// Reach a device through [`CudaDriver::shared`]: one handle per ordinal,
/// opened once per process and shared by everything that uses the device (the
/// device allocator, the pinned host allocator, the tensor backend).
/// [`CudaDriver::new`] opens a separate handle (retaining the primary context
/// once more), for tests and for code that must not share.
///
/// ```no_run
/// use strata_alloc::driver::{cuda::CudaDriver, Driver};
/// let gpu = CudaDriver::shared(0)?; // Err(DriverError::Unavailable(..)) without a GPU
/// let p = gpu.malloc(1 << 20)?;
/// gpu.free(p, 1 << 20)?;
/// # Ok::<(), strata_alloc::DriverError>(())
/// ```
pub struct CudaDriver {
    ordinal: usize,
    device: sys::CUdevice,
    ctx: sys::CUcontext,
    name: String,
    total: u64,
    /// The minimum mapping granularity, `None` where the device lacks virtual
    /// memory management.
    granularity: Option<u64>,
}

// SAFETY: `CudaDriver` holds plain integers and one `CUcontext`, a handle to the
// device's primary context, which the driver retains for the lifetime of the
// value. CUDA contexts may be made current on, and used from, any number of
// threads at once (the driver API is thread-safe), and every method makes the
// context current on the calling thread before using it, so moving the value to
// another thread is sound.
unsafe impl Send for CudaDriver {}
// SAFETY: the methods take `&self` and never mutate the fields; the driver API
// serialises concurrent calls on the same context internally, so sharing the
// value between threads is sound.
unsafe impl Sync for CudaDriver {}

/// Makes a context current for the duration of one call; restores the context
/// that was current before, when there was a different one.
struct Bound {
    previous: sys::CUcontext,
}

impl Drop for Bound {
    fn drop(&mut self) {
        if !self.previous.is_null() {
            // SAFETY: `previous` was current on this thread a moment ago, so it is a
            // live context; a failure leaves our context current, which is harmless.
            let _ = catch_unwind(|| unsafe { sys::cuCtxSetCurrent(self.previous) });
        }
    }
}

impl CudaDriver {
    /// The process-wide handle of CUDA device `ordinal`, opened on first use
    /// and cached: every later call for the same ordinal returns the same
    /// handle. This is the way to reach a device; [`new`](Self::new) opens an
    /// unshared one.
    ///
    /// Fails with [`DriverError::Unavailable`] as [`new`](Self::new) does (a
    /// failure is not cached: a later call tries again); never panics.
    pub fn shared(ordinal: usize) -> Result<Arc<CudaDriver>, DriverError> {
        static OPEN: OnceLock<Mutex<HashMap<usize, Arc<CudaDriver>>>> = OnceLock::new();
        let mut open = OPEN.get_or_init(|| Mutex::new(HashMap::new())).lock();
        if let Some(d) = open.get(&ordinal) {
            return Ok(Arc::clone(d));
        }
        // Opened under the lock, so a device is opened once even when several
        // threads ask for it first at the same time.
        let d = CudaDriver::new(ordinal)?;
        open.insert(ordinal, Arc::clone(&d));
        Ok(d)
    }

    /// Opens CUDA device `ordinal` as a new, unshared handle (prefer
    /// [`shared`](Self::shared)): initialises the driver, retains the device's
    /// primary context and reads the name, capacity and virtual-memory support.
    ///
    /// Fails with [`DriverError::Unavailable`] (saying what is missing and what
    /// to do) when the driver library or the GPU is absent; never panics.
    pub fn new(ordinal: usize) -> Result<Arc<CudaDriver>, DriverError> {
        let count = init()?;
        if ordinal >= count {
            return Err(DriverError::Unavailable(format!(
                "cuda:{ordinal} does not exist: this machine has {count} visible GPU{} \
                 (cuda:0{}); check CUDA_VISIBLE_DEVICES",
                if count == 1 { "" } else { "s" },
                if count > 1 {
                    format!(" to cuda:{}", count - 1)
                } else {
                    String::new()
                }
            )));
        }
        let unavailable = |e: DriverError| {
            DriverError::Unavailable(format!("cuda:{ordinal} cannot be opened: {e}"))
        };
        let mut device: sys::CUdevice = 0;
        guarded("cuDeviceGet", || {
            // SAFETY: `device` is a valid out-pointer; `ordinal < count` was checked.
            check("cuDeviceGet", unsafe {
                sys::cuDeviceGet(&mut device, ordinal as i32)
            })
        })
        .map_err(unavailable)?;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        guarded("cuDevicePrimaryCtxRetain", || {
            // SAFETY: `device` came from cuDeviceGet; `ctx` is a valid out-pointer.
            // The reference taken here is released in `Drop`.
            check("cuDevicePrimaryCtxRetain", unsafe {
                sys::cuDevicePrimaryCtxRetain(&mut ctx, device)
            })
        })
        .map_err(unavailable)?;
        // From here on, dropping `d` releases the context.
        let mut d = CudaDriver {
            ordinal,
            device,
            ctx,
            name: String::new(),
            total: 0,
            granularity: None,
        };
        d.name = d.query_name().map_err(unavailable)?;
        d.total = d.query_total().map_err(unavailable)?;
        d.granularity = d.query_granularity();
        Ok(Arc::new(d))
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The retained primary context (for interoperation with other CUDA code,
    /// e.g. cudarc's `CudaContext` on the same device).
    pub fn cu_context(&self) -> sys::CUcontext {
        self.ctx
    }

    /// The `CUdevice` handle.
    pub fn cu_device(&self) -> sys::CUdevice {
        self.device
    }

    /// Makes the primary context current on this thread for one call.
    fn bind(&self) -> Result<Bound, DriverError> {
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: `current` is a valid out-pointer.
        check("cuCtxGetCurrent", unsafe {
            sys::cuCtxGetCurrent(&mut current)
        })?;
        if current == self.ctx {
            return Ok(Bound {
                previous: std::ptr::null_mut(),
            });
        }
        // SAFETY: `self.ctx` is the primary context retained in `new` and not yet
        // released (that happens in `Drop`), so it is a live context.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.ctx) })?;
        Ok(Bound { previous: current })
    }

    /// Runs `f` with the context current, panics turned into errors.
    fn with_ctx<T>(
        &self,
        call: &'static str,
        f: impl FnOnce() -> Result<T, DriverError>,
    ) -> Result<T, DriverError> {
        guarded(call, || {
            let _bound = self.bind()?;
            f()
        })
    }

    fn query_name(&self) -> Result<String, DriverError> {
        self.with_ctx("cuDeviceGetName", || {
            let mut buf = [0u8; 256];
            // SAFETY: the buffer is writable for its whole length, which is what we
            // pass; `self.device` is a valid device.
            check("cuDeviceGetName", unsafe {
                sys::cuDeviceGetName(buf.as_mut_ptr().cast(), buf.len() as i32, self.device)
            })?;
            let name = CStr::from_bytes_until_nul(&buf)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_else(|_| String::from_utf8_lossy(&buf).into_owned());
            Ok(name)
        })
    }

    fn query_total(&self) -> Result<u64, DriverError> {
        self.with_ctx("cuDeviceTotalMem_v2", || {
            let mut bytes: usize = 0;
            // SAFETY: `bytes` is a valid out-pointer; `self.device` is a valid device.
            check("cuDeviceTotalMem_v2", unsafe {
                sys::cuDeviceTotalMem_v2(&mut bytes, self.device)
            })?;
            Ok(bytes as u64)
        })
    }

    /// The device attribute `attr`.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32, DriverError> {
        self.with_ctx("cuDeviceGetAttribute", || {
            let mut v: i32 = 0;
            // SAFETY: `v` is a valid out-pointer; `self.device` is a valid device.
            check("cuDeviceGetAttribute", unsafe {
                sys::cuDeviceGetAttribute(&mut v, attr, self.device)
            })?;
            Ok(v)
        })
    }

    /// The compute capability `(major, minor)` (`(9, 0)` on an H100).
    pub fn compute_capability(&self) -> Result<(i32, i32), DriverError> {
        Ok((
            self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }

    /// The allocation properties of physical memory on this device.
    fn prop(&self) -> sys::CUmemAllocationProp {
        // SAFETY: `CUmemAllocationProp` is a plain C struct of integers, enums whose
        // zero value is valid (`CU_MEM_ALLOCATION_TYPE_INVALID`,
        // `CU_MEM_LOCATION_TYPE_INVALID`), a nullable pointer and bytes; all-zero
        // is the documented way to start one.
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
        prop.location = self.location();
        prop
    }

    fn location(&self) -> sys::CUmemLocation {
        sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.device,
        }
    }

    /// The minimum mapping granularity, or `None` when the device does not
    /// support virtual memory management (or the query fails).
    fn query_granularity(&self) -> Option<u64> {
        let vmm = self
            .attribute(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
            )
            .ok()?;
        if vmm == 0 {
            return None;
        }
        let prop = self.prop();
        self.with_ctx("cuMemGetAllocationGranularity", || {
            let mut g: usize = 0;
            // SAFETY: `g` is a valid out-pointer and `prop` a fully initialised
            // property struct that outlives the call.
            check("cuMemGetAllocationGranularity", unsafe {
                sys::cuMemGetAllocationGranularity(
                    &mut g,
                    &prop,
                    sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
                )
            })?;
            Ok(g as u64)
        })
        .ok()
        .filter(|&g| g > 0)
    }

    /// Creates a stream that does not synchronise with the legacy default stream
    /// (`CU_STREAM_NON_BLOCKING`). Destroy it with
    /// [`destroy_stream`](Self::destroy_stream).
    pub fn create_stream(&self) -> Result<StreamId, DriverError> {
        self.with_ctx("cuStreamCreate", || {
            let mut s: sys::CUstream = std::ptr::null_mut();
            // SAFETY: `s` is a valid out-pointer; the flag is a valid stream flag.
            check("cuStreamCreate", unsafe {
                sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
            })?;
            Ok(StreamId(s as usize as u64))
        })
    }

    /// The stream priorities this device accepts, `(least, greatest)`: the
    /// greatest is the lowest number (`(0, -5)` on Hopper), and 0 is a
    /// plain stream's (`cuCtxGetStreamPriorityRange`).
    pub fn stream_priority_range(&self) -> Result<(i32, i32), DriverError> {
        self.with_ctx("cuCtxGetStreamPriorityRange", || {
            let (mut least, mut greatest) = (0, 0);
            // SAFETY: both out-pointers are valid; the context is bound.
            check("cuCtxGetStreamPriorityRange", unsafe {
                sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest)
            })?;
            Ok((least, greatest))
        })
    }

    /// [`create_stream`](Self::create_stream) at `priority`: when kernels of
    /// several streams wait for the GPU, those of a stream with a lower
    /// number are scheduled first. The driver clamps a value outside
    /// [`stream_priority_range`](Self::stream_priority_range) to it.
    pub fn create_stream_with_priority(&self, priority: i32) -> Result<StreamId, DriverError> {
        self.with_ctx("cuStreamCreateWithPriority", || {
            let mut s: sys::CUstream = std::ptr::null_mut();
            // SAFETY: `s` is a valid out-pointer; the flag is a valid stream
            // flag and any priority is accepted (clamped by the driver).
            check("cuStreamCreateWithPriority", unsafe {
                sys::cuStreamCreateWithPriority(
                    &mut s,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                    priority,
                )
            })?;
            Ok(StreamId(s as usize as u64))
        })
    }

    /// The priority `stream` was created with (0 for the default stream).
    pub fn stream_priority(&self, stream: StreamId) -> Result<i32, DriverError> {
        self.with_ctx("cuStreamGetPriority", || {
            let mut p = 0;
            // SAFETY: the caller passes the default stream or a live stream
            // of this device; `p` is a valid out-pointer.
            check("cuStreamGetPriority", unsafe {
                sys::cuStreamGetPriority(cu_stream(stream), &mut p)
            })?;
            Ok(p)
        })
    }

    /// Destroys a stream made by [`create_stream`](Self::create_stream). Work
    /// already queued on it still completes. Destroying the default stream is an
    /// error.
    pub fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        if stream == StreamId::DEFAULT {
            return Err(DriverError::Call {
                call: "cuStreamDestroy_v2",
                message: "the default stream cannot be destroyed".into(),
            });
        }
        self.with_ctx("cuStreamDestroy_v2", || {
            // SAFETY: the caller passes a stream created by `create_stream` on this
            // device and not yet destroyed; the driver rejects other handles it
            // can recognise with an error.
            check("cuStreamDestroy_v2", unsafe {
                sys::cuStreamDestroy_v2(cu_stream(stream))
            })
        })
    }

    /// Makes future work on `stream` wait until `event` (recorded on another
    /// stream) has completed, without blocking the host (`cuStreamWaitEvent`).
    pub fn stream_wait_event(
        &self,
        stream: StreamId,
        event: EventHandle,
    ) -> Result<(), DriverError> {
        self.with_ctx("cuStreamWaitEvent", || {
            // SAFETY: the event was made by `create_event` and is live; the stream
            // is the default stream or a live stream of this context; flags 0 is
            // `CU_EVENT_WAIT_DEFAULT`.
            check("cuStreamWaitEvent", unsafe {
                sys::cuStreamWaitEvent(cu_stream(stream), cu_event(event), 0)
            })
        })
    }

    /// Blocks until all work on the device has finished (`cuCtxSynchronize`).
    pub fn synchronize_device(&self) -> Result<(), DriverError> {
        self.with_ctx("cuCtxSynchronize", || {
            // SAFETY: no arguments; `with_ctx` made the context current.
            check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
        })
    }

    /// Copies `src` from host memory to device address `dst`, synchronously.
    ///
    /// # Safety
    /// `dst..dst + src.len()` must lie inside memory of this device that the
    /// caller owns (an allocation of a caching allocator over this driver), with
    /// no kernel or copy using it concurrently.
    pub unsafe fn memcpy_htod(&self, dst: DevicePtr, src: &[u8]) -> Result<(), DriverError> {
        self.with_ctx("cuMemcpyHtoD_v2", || {
            // SAFETY: `src` is readable for `src.len()` bytes; the caller guarantees
            // the device range.
            check("cuMemcpyHtoD_v2", unsafe {
                sys::cuMemcpyHtoD_v2(dst, src.as_ptr().cast(), src.len())
            })
        })
    }

    /// Copies device memory at `src` into `dst`, synchronously.
    ///
    /// # Safety
    /// `src..src + dst.len()` must lie inside memory of this device that the
    /// caller owns, with no kernel or copy writing it concurrently.
    pub unsafe fn memcpy_dtoh(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), DriverError> {
        self.with_ctx("cuMemcpyDtoH_v2", || {
            // SAFETY: `dst` is writable for `dst.len()` bytes and borrowed mutably
            // for the whole (synchronous) copy; the caller guarantees the device range.
            check("cuMemcpyDtoH_v2", unsafe {
                sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), src, dst.len())
            })
        })
    }

    /// Queues a copy of `len` bytes from host memory at `src` to device address
    /// `dst` on `stream`. With pinned `src` (see [`crate::pinned`]) the copy is
    /// asynchronous: the host buffer must stay untouched until the stream reaches
    /// it, which `PinnedBuffer::record_stream` arranges.
    ///
    /// # Safety
    /// `src..src + len` must be host memory that stays valid and unwritten until
    /// the copy has completed; `dst..dst + len` must be device memory of this
    /// device owned by the caller; `stream` must be the default stream or a live
    /// stream of this device.
    pub unsafe fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        stream: StreamId,
    ) -> Result<(), DriverError> {
        self.with_ctx("cuMemcpyHtoDAsync_v2", || {
            // SAFETY: guaranteed by the caller (see the function's contract).
            check("cuMemcpyHtoDAsync_v2", unsafe {
                sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, cu_stream(stream))
            })
        })
    }

    /// Queues a copy of `len` bytes from device address `src` to host memory at
    /// `dst` on `stream` (asynchronous when `dst` is pinned).
    ///
    /// # Safety
    /// `dst..dst + len` must be host memory that stays valid and is neither read
    /// nor written until the copy has completed; `src..src + len` must be device
    /// memory of this device owned by the caller; `stream` must be the default
    /// stream or a live stream of this device.
    pub unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        stream: StreamId,
    ) -> Result<(), DriverError> {
        self.with_ctx("cuMemcpyDtoHAsync_v2", || {
            // SAFETY: guaranteed by the caller (see the function's contract).
            check("cuMemcpyDtoHAsync_v2", unsafe {
                sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, cu_stream(stream))
            })
        })
    }

    /// Queues `len` bytes of `value` at device address `dst` on `stream`.
    ///
    /// # Safety
    /// `dst..dst + len` must be device memory of this device owned by the caller;
    /// `stream` must be the default stream or a live stream of this device.
    pub unsafe fn memset_d8_async(
        &self,
        dst: DevicePtr,
        value: u8,
        len: usize,
        stream: StreamId,
    ) -> Result<(), DriverError> {
        self.with_ctx("cuMemsetD8Async", || {
            // SAFETY: guaranteed by the caller (see the function's contract).
            check("cuMemsetD8Async", unsafe {
                sys::cuMemsetD8Async(dst, value, len, cu_stream(stream))
            })
        })
    }

    /// Allocates `size` bytes of page-locked host memory (`cuMemHostAlloc` with
    /// flags 0: cached, not write-combined, visible to this context). Used by the
    /// pinned host allocator; free with [`host_free`](Self::host_free).
    pub fn host_alloc(&self, size: u64) -> Result<u64, DriverError> {
        let bytes = usize::try_from(size).map_err(|_| DriverError::OutOfMemory)?;
        self.with_ctx("cuMemHostAlloc", || {
            let mut p: *mut c_void = std::ptr::null_mut();
            // SAFETY: `p` is a valid out-pointer; flags 0 is valid.
            check("cuMemHostAlloc", unsafe {
                sys::cuMemHostAlloc(&mut p, bytes, 0)
            })?;
            Ok(p as usize as u64)
        })
    }

    /// Frees page-locked host memory from [`host_alloc`](Self::host_alloc).
    pub fn host_free(&self, ptr: u64) -> Result<(), DriverError> {
        self.with_ctx("cuMemFreeHost", || {
            // SAFETY: the caller (the pinned allocator) passes a pointer returned by
            // `host_alloc` exactly once, after all copies using it completed.
            check("cuMemFreeHost", unsafe {
                sys::cuMemFreeHost(ptr as usize as *mut c_void)
            })
        })
    }
}

impl Drop for CudaDriver {
    fn drop(&mut self) {
        // A failure (the driver shutting down) is ignored.
        let _ = guarded("cuDevicePrimaryCtxRelease_v2", || {
            // SAFETY: releases the one reference `new` retained on this device's
            // primary context; the driver is being dropped, so no method can use
            // the context afterwards.
            check("cuDevicePrimaryCtxRelease_v2", unsafe {
                sys::cuDevicePrimaryCtxRelease_v2(self.device)
            })
        });
    }
}

impl std::fmt::Debug for CudaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDriver")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("total", &self.total)
            .field("granularity", &self.granularity)
            .finish()
    }
}

impl StreamEvents for CudaDriver {
    fn create_event(&self) -> Result<EventHandle, DriverError> {
        self.with_ctx("cuEventCreate", || {
            let mut e: sys::CUevent = std::ptr::null_mut();
            // SAFETY: `e` is a valid out-pointer; the flag is a valid event flag.
            check("cuEventCreate", unsafe {
                sys::cuEventCreate(&mut e, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
            })?;
            Ok(EventHandle(e as usize as u64))
        })
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError> {
        self.with_ctx("cuEventDestroy_v2", || {
            // SAFETY: the event was made by `create_event` and is destroyed once;
            // destroying a pending event is allowed (resources go at completion).
            check("cuEventDestroy_v2", unsafe {
                sys::cuEventDestroy_v2(cu_event(event))
            })
        })
    }

    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError> {
        self.with_ctx("cuEventRecord", || {
            // SAFETY: the event was made by `create_event` and is live; the stream is
            // the default stream or a live stream of this context (the caller's
            // contract for `StreamId`).
            check("cuEventRecord", unsafe {
                sys::cuEventRecord(cu_event(event), cu_stream(stream))
            })
        })
    }

    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError> {
        self.with_ctx("cuEventQuery", || {
            // SAFETY: the event was made by `create_event` and is live.
            match unsafe { sys::cuEventQuery(cu_event(event)) } {
                sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                r => check("cuEventQuery", r).map(|_| true),
            }
        })
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError> {
        self.with_ctx("cuEventSynchronize", || {
            // SAFETY: the event was made by `create_event` and is live.
            check("cuEventSynchronize", unsafe {
                sys::cuEventSynchronize(cu_event(event))
            })
        })
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        self.with_ctx("cuStreamSynchronize", || {
            // SAFETY: the stream is the default stream or a live stream of this
            // context.
            check("cuStreamSynchronize", unsafe {
                sys::cuStreamSynchronize(cu_stream(stream))
            })
        })
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        CudaDriver::create_stream(self)
    }
}

impl Driver for CudaDriver {
    fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn total_memory(&self) -> u64 {
        self.total
    }

    fn mem_get_info(&self) -> Result<MemInfo, DriverError> {
        self.with_ctx("cuMemGetInfo_v2", || {
            let (mut free, mut total) = (0usize, 0usize);
            // SAFETY: both are valid out-pointers; the context is current.
            check("cuMemGetInfo_v2", unsafe {
                sys::cuMemGetInfo_v2(&mut free, &mut total)
            })?;
            Ok(MemInfo {
                free: free as u64,
                total: total as u64,
            })
        })
    }

    fn malloc(&self, size: u64) -> Result<DevicePtr, DriverError> {
        let bytes = usize::try_from(size).map_err(|_| DriverError::OutOfMemory)?;
        self.with_ctx("cuMemAlloc_v2", || {
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: `p` is a valid out-pointer; the context is current.
            check("cuMemAlloc_v2", unsafe {
                sys::cuMemAlloc_v2(&mut p, bytes)
            })?;
            Ok(p)
        })
    }

    fn free(&self, ptr: DevicePtr, _size: u64) -> Result<(), DriverError> {
        self.with_ctx("cuMemFree_v2", || {
            // SAFETY: the allocator frees each segment returned by `malloc` exactly
            // once, after the work using it has finished (it synchronises streams
            // with pending events first).
            check("cuMemFree_v2", unsafe { sys::cuMemFree_v2(ptr) })
        })
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        self.granularity.map(|_| self as &dyn VirtualMemory)
    }
}

impl VirtualMemory for CudaDriver {
    fn granularity(&self) -> u64 {
        // `virtual_memory()` hands out this trait only when the granularity is
        // known; 2 MiB is the value on every device that has VMM.
        self.granularity.unwrap_or(2 << 20)
    }

    fn reserve(&self, size: u64) -> Result<DevicePtr, DriverError> {
        let bytes = usize::try_from(size).map_err(|_| DriverError::OutOfMemory)?;
        self.with_ctx("cuMemAddressReserve", || {
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: `p` is a valid out-pointer; alignment 0 (the granularity),
            // no fixed address and flags 0 are valid arguments.
            check("cuMemAddressReserve", unsafe {
                sys::cuMemAddressReserve(&mut p, bytes, 0, 0, 0)
            })?;
            Ok(p)
        })
    }

    fn unreserve(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        self.with_ctx("cuMemAddressFree", || {
            // SAFETY: the allocator passes a whole range from `reserve`, once, after
            // unmapping everything in it.
            check("cuMemAddressFree", unsafe {
                sys::cuMemAddressFree(ptr, size as usize)
            })
        })
    }

    fn create(&self, size: u64) -> Result<PhysHandle, DriverError> {
        let prop = self.prop();
        self.with_ctx("cuMemCreate", || {
            let mut h: sys::CUmemGenericAllocationHandle = 0;
            // SAFETY: `h` is a valid out-pointer, `prop` is fully initialised and
            // outlives the call, flags 0 is valid.
            check("cuMemCreate", unsafe {
                sys::cuMemCreate(&mut h, size as usize, &prop, 0)
            })?;
            Ok(PhysHandle(h))
        })
    }

    fn release(&self, handle: PhysHandle) -> Result<(), DriverError> {
        self.with_ctx("cuMemRelease", || {
            // SAFETY: the handle came from `create` and is released once, unmapped.
            check("cuMemRelease", unsafe { sys::cuMemRelease(handle.0) })
        })
    }

    fn map(&self, ptr: DevicePtr, size: u64, handle: PhysHandle) -> Result<(), DriverError> {
        self.with_ctx("cuMemMap", || {
            // SAFETY: `ptr..ptr + size` lies in a reserved, unmapped range and
            // `handle` is an unmapped physical allocation of exactly `size` bytes
            // (the allocator's invariants); offset and flags 0 are valid.
            check("cuMemMap", unsafe {
                sys::cuMemMap(ptr, size as usize, 0, handle.0, 0)
            })
        })
    }

    fn set_access(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        let desc = sys::CUmemAccessDesc {
            location: self.location(),
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        self.with_ctx("cuMemSetAccess", || {
            // SAFETY: `desc` is one fully initialised descriptor that outlives the
            // call (count 1); the range is fully mapped (the allocator's invariant).
            check("cuMemSetAccess", unsafe {
                sys::cuMemSetAccess(ptr, size as usize, &desc, 1)
            })
        })
    }

    fn unmap(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        self.with_ctx("cuMemUnmap", || {
            // SAFETY: the range is exactly one earlier mapping, and the allocator
            // synchronised the streams that used it before unmapping.
            check("cuMemUnmap", unsafe { sys::cuMemUnmap(ptr, size as usize) })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_maps_to_the_typed_variant() {
        assert_eq!(
            check("cuMemAlloc_v2", sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY),
            Err(DriverError::OutOfMemory)
        );
        assert_eq!(check("x", sys::CUresult::CUDA_SUCCESS), Ok(()));
    }

    #[test]
    fn other_errors_name_the_call() {
        // Without a driver the description falls back to the enum's name; with
        // one it starts with the same name.
        match check("cuMemMap", sys::CUresult::CUDA_ERROR_INVALID_VALUE) {
            Err(DriverError::Call { call, message }) => {
                assert_eq!(call, "cuMemMap");
                assert!(message.starts_with("CUDA_ERROR_INVALID_VALUE"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn guarded_turns_a_panic_into_an_error() {
        let r: Result<(), DriverError> = guarded("cuFoo", || panic!("Missing symbol cuFoo"));
        match r {
            Err(DriverError::Call { call, message }) => {
                assert_eq!(call, "cuFoo");
                assert!(message.contains("Missing symbol cuFoo"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn the_driver_is_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<CudaDriver>();
    }

    #[test]
    fn stream_and_event_handles_round_trip() {
        assert!(cu_stream(StreamId::DEFAULT).is_null());
        let s = StreamId(0x7f00_1234_5000);
        assert_eq!(cu_stream(s) as usize as u64, s.0);
        let e = EventHandle(0x5555_0000_1000);
        assert_eq!(cu_event(e) as usize as u64, e.0);
    }

    #[test]
    fn absence_is_a_typed_error_that_agrees_with_device_count() {
        match CudaDriver::new(0) {
            Ok(d) => {
                assert!(device_count() > 0);
                assert!(d.total_memory() > 0);
            }
            Err(DriverError::Unavailable(msg)) => {
                // Either no driver/GPU at all, or (with a GPU) never for ordinal 0.
                assert_eq!(device_count(), 0, "{msg}");
                assert!(!is_available());
                assert_eq!(unavailable_reason().as_deref(), Some(msg.as_str()));
                assert!(msg.contains("cpu"), "the message says what to do: {msg}");
            }
            Err(e) => panic!("expected Unavailable, got {e:?}"),
        }
        // An ordinal no machine has is always Unavailable.
        assert!(matches!(
            CudaDriver::new(1 << 20),
            Err(DriverError::Unavailable(_))
        ));
    }
}
