//! The boundary between the caching allocator and whatever supplies memory.
//!
//! A [`Driver`] hands out whole segments (`malloc`/`free`) and optionally offers
//! the virtual-memory calls that expandable segments need ([`VirtualMemory`]).
//! It extends [`StreamEvents`], the stream and event primitives an allocator
//! uses to defer reuse of memory touched by other streams (the pinned host
//! allocator needs only that half). Three drivers ship with strata:
//!
//! * [`sim::SimDriver`]: a simulated device (capacity, granularity, fake addresses,
//!   counted calls, injectable failures, events completed by the test);
//! * [`host::HostDriver`]: real page-aligned host memory, for CPU tensors;
//! * `cuda::CudaDriver` (feature `cuda`): an NVIDIA GPU through cudarc, one
//!   shared handle per device (`CudaDriver::shared`).
//!
//! [`counting::CountingDriver`] wraps any driver and counts its calls by kind;
//! the caching allocator reports its driver calls through it.

pub mod counting;
pub mod host;
pub mod sim;

#[cfg(feature = "cuda")]
pub mod cuda;

use std::fmt;

/// Which device a driver (and therefore an allocator) serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// Host memory.
    Cpu,
    /// The CUDA device with this ordinal.
    Cuda(usize),
}

impl Device {
    /// Parses `cpu`, `cuda` (device 0) or `cuda:N`, the forms `STRATA_DEVICE` accepts.
    ///
    /// ```
    /// use strata_alloc::Device;
    /// assert_eq!(Device::parse("cuda:1").unwrap(), Device::Cuda(1));
    /// assert_eq!(Device::parse("cpu").unwrap(), Device::Cpu);
    /// assert!(Device::parse("tpu").is_err());
    /// assert!(Device::parse("cuda:+1").is_err() && Device::parse("cuda:01").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<Device, crate::AllocError> {
        let t = s.trim();
        let bad = || crate::AllocError::InvalidDevice {
            given: s.to_string(),
        };
        match t {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            _ => {
                let n = t.strip_prefix("cuda:").ok_or_else(bad)?;
                // Decimal digits only, without a sign or a leading zero, as
                // PyTorch's `torch.device` reads them (`cuda:+1` and
                // `cuda:01` are invalid there).
                let digits = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
                if !digits || (n.len() > 1 && n.starts_with('0')) {
                    return Err(bad());
                }
                n.parse::<usize>().map(Device::Cuda).map_err(|_| bad())
            }
        }
    }
}

impl std::str::FromStr for Device {
    type Err = crate::AllocError;
    /// [`Device::parse`]: `"cpu"`, `"cuda"`, `"cuda:1"`.
    ///
    /// ```
    /// use strata_alloc::Device;
    /// let d: Device = "cuda:1".parse().unwrap();
    /// assert_eq!(d, Device::Cuda(1));
    /// assert!("gpu".parse::<Device>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Device, crate::AllocError> {
        Device::parse(s)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// A device address as the driver reports it (a `CUdeviceptr` on CUDA, a host
/// address on the host driver, a fake address on the simulated device).
pub type DevicePtr = u64;

/// A stream, identified by its driver handle. `StreamId::DEFAULT` (0) is the
/// device's default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The default (legacy NULL) stream.
    pub const DEFAULT: StreamId = StreamId(0);
}

/// An event created by a driver; the value is the driver's own handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventHandle(pub u64);

/// A physical memory handle made by [`VirtualMemory::create`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PhysHandle(pub u64);

/// Free and total device memory, as `cuMemGetInfo` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemInfo {
    /// Bytes the device could still hand out (to anyone).
    pub free: u64,
    /// The device's capacity in bytes.
    pub total: u64,
}

/// A failure reported by a driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// The device has no memory left for this request. The allocator treats this
    /// as a recoverable condition (release cached memory and retry, then a typed
    /// out-of-memory error).
    #[error("the device is out of memory")]
    OutOfMemory,
    /// The driver library or a device is not available on this machine.
    #[error("{0}")]
    Unavailable(String),
    /// Any other failure, with the driver's own words.
    #[error("driver call {call} failed: {message}")]
    Call {
        /// Which call failed (`cuMemMap`, …).
        call: &'static str,
        /// The driver's description of the failure.
        message: String,
    },
}

/// The virtual-memory half of a driver: reserve address ranges, create physical
/// pages and map them. Expandable segments are built on it.
///
/// Every size and address passed in is a multiple of [`granularity`](Self::granularity).
pub trait VirtualMemory: Send + Sync {
    /// The mapping granularity in bytes (2 MiB on an H100).
    fn granularity(&self) -> u64;
    /// Reserves `size` bytes of address space (no memory behind it).
    fn reserve(&self, size: u64) -> Result<DevicePtr, DriverError>;
    /// Returns an address range obtained from [`reserve`](Self::reserve).
    fn unreserve(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError>;
    /// Creates `size` bytes of physical memory.
    fn create(&self, size: u64) -> Result<PhysHandle, DriverError>;
    /// Releases physical memory made by [`create`](Self::create); it must be unmapped.
    fn release(&self, handle: PhysHandle) -> Result<(), DriverError>;
    /// Maps a whole physical handle at `ptr`.
    fn map(&self, ptr: DevicePtr, size: u64, handle: PhysHandle) -> Result<(), DriverError>;
    /// Grants the device read/write access to a mapped range (one or more mappings).
    fn set_access(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError>;
    /// Unmaps exactly a range that was mapped by one [`map`](Self::map) call.
    fn unmap(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError>;
}

/// The event and stream half of a device: what an allocator needs to defer the
/// reuse of memory that queued work may still touch.
///
/// The caching allocator ([`Driver`] requires this trait) and the pinned host
/// allocator ([`crate::pinned::PinnedBackend`] requires it too) both record an
/// event on each stream that used a block when the block is freed, and reuse the
/// block once the events have completed. Implementations must be cheap to call
/// from several threads.
pub trait StreamEvents: Send + Sync {
    /// Creates an event (timing disabled).
    fn create_event(&self) -> Result<EventHandle, DriverError>;
    /// Destroys an event.
    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError>;
    /// Records `event` on `stream`: it completes once the work queued so far on
    /// the stream has finished.
    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError>;
    /// Whether a recorded event has completed (non-blocking).
    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError>;
    /// Blocks until a recorded event has completed.
    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError>;
    /// Blocks until all work queued on `stream` has finished.
    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError>;
    /// Creates a new stream (the simulated device makes up a handle; the host
    /// driver, whose work is synchronous, returns the default stream).
    fn create_stream(&self) -> Result<StreamId, DriverError> {
        Ok(StreamId::DEFAULT)
    }
}

/// What the caching allocator needs from a device: whole segments, the
/// device's memory figures, the virtual-memory calls where the device has them,
/// and (as a [`StreamEvents`]) its events and streams.
///
/// Implementations must be cheap to call from several threads; the allocator
/// serialises its own state but calls the driver while holding its lock.
pub trait Driver: StreamEvents {
    /// The device served.
    fn device(&self) -> Device;
    /// A short human-readable description (`NVIDIA H100 80GB HBM3`, `host`, `simulated`).
    fn name(&self) -> String;
    /// The device's capacity in bytes.
    fn total_memory(&self) -> u64;
    /// Free and total memory right now.
    fn mem_get_info(&self) -> Result<MemInfo, DriverError>;
    /// Allocates one segment of exactly `size` bytes.
    fn malloc(&self, size: u64) -> Result<DevicePtr, DriverError>;
    /// Frees a segment returned by [`malloc`](Self::malloc).
    fn free(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError>;
    /// The virtual-memory calls, where the device supports them.
    fn virtual_memory(&self) -> Option<&dyn VirtualMemory>;
}

/// How many driver calls of each kind an allocator has made; reported by the
/// replay tool and by [`crate::CachingAllocator::driver_calls`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverCalls {
    /// `cuMemAlloc`.
    pub malloc: u64,
    /// `cuMemFree`.
    pub free: u64,
    /// `cuMemAddressReserve`.
    pub reserve: u64,
    /// `cuMemAddressFree`.
    pub unreserve: u64,
    /// `cuMemCreate`.
    pub create: u64,
    /// `cuMemRelease`.
    pub release: u64,
    /// `cuMemMap`.
    pub map: u64,
    /// `cuMemSetAccess`.
    pub set_access: u64,
    /// `cuMemUnmap`.
    pub unmap: u64,
    /// `cuEventRecord` (events are pooled, so creation is rare).
    pub event_record: u64,
    /// `cuEventQuery`.
    pub event_query: u64,
    /// `cuEventSynchronize`.
    pub event_synchronize: u64,
    /// `cuStreamSynchronize`.
    pub stream_synchronize: u64,
    /// `cuMemGetInfo`.
    pub mem_get_info: u64,
}

impl DriverCalls {
    /// `(name, count)` for every kind, in a fixed order, for printing and JSON.
    pub fn entries(&self) -> [(&'static str, u64); 14] {
        [
            ("malloc", self.malloc),
            ("free", self.free),
            ("reserve", self.reserve),
            ("unreserve", self.unreserve),
            ("create", self.create),
            ("release", self.release),
            ("map", self.map),
            ("set_access", self.set_access),
            ("unmap", self.unmap),
            ("event_record", self.event_record),
            ("event_query", self.event_query),
            ("event_synchronize", self.event_synchronize),
            ("stream_synchronize", self.stream_synchronize),
            ("mem_get_info", self.mem_get_info),
        ]
    }

    /// Calls that change the device's memory (allocate, free, map, unmap, …),
    /// the expensive ones.
    pub fn memory_calls(&self) -> u64 {
        self.malloc
            + self.free
            + self.reserve
            + self.unreserve
            + self.create
            + self.release
            + self.map
            + self.set_access
            + self.unmap
    }

    /// Calls that block the host until queued device work has finished
    /// (`cuStreamSynchronize`, `cuEventSynchronize`).
    pub fn stream_synchronizations(&self) -> u64 {
        self.stream_synchronize + self.event_synchronize
    }
}
