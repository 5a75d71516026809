//! One caching allocator per device, created on first use, reachable from
//! anywhere: `strata_alloc::memory_stats(Device::Cuda(0))` works without a handle.

use crate::allocator::CachingAllocator;
use crate::config::AllocatorConfig;
use crate::driver::{host::HostDriver, Device, MemInfo};
use crate::error::AllocError;
use crate::mempool::{MemPool, MemPoolOptions};
use crate::stats::MemoryStats;
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

fn registry() -> &'static Mutex<HashMap<Device, Arc<CachingAllocator>>> {
    static R: OnceLock<Mutex<HashMap<Device, Arc<CachingAllocator>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Bumped whenever the registry's map changes (an allocator created or
/// installed), so that the per-thread caches of [`allocator`] notice.
static GENERATION: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The allocators this thread looked up, with the [`GENERATION`] at which
    /// they were read: a hit costs one atomic load and no lock, which matters
    /// for the host cost of small ops (each output tensor allocates).
    static CACHED: RefCell<Vec<(Device, u64, Arc<CachingAllocator>)>> = const { RefCell::new(Vec::new()) };
}

/// A private memory pool of `device`'s allocator (PyTorch's
/// `torch.cuda.MemPool()`): tensors and buffers that the thread allocates on
/// the device while a guard from [`MemPool::activate`](crate::MemPool::activate)
/// lives come from the pool's own segments.
///
/// ```
/// use strata_alloc::{mem_pool, Device, MemPoolOptions, StreamId};
///
/// let pool = mem_pool(Device::Cpu, MemPoolOptions::default())?;
/// let buffer = {
///     let _in_pool = pool.activate()?;
///     pool.allocator().allocate(1 << 20, StreamId::DEFAULT)?
/// };
/// assert_eq!(pool.snapshot()[0].blocks[0].address, buffer.ptr());
/// # Ok::<(), strata_alloc::AllocError>(())
/// ```
pub fn mem_pool(device: Device, options: MemPoolOptions) -> Result<MemPool, AllocError> {
    Ok(allocator(device)?.mem_pool(options))
}

/// The allocator of `device`, created on first use with the configuration from
/// `STRATA_ALLOC_CONF`. Fails with a typed error where the device is absent
/// (no CUDA library, no such GPU) or the configuration string is bad.
///
/// After a thread's first lookup of a device, later lookups on that thread
/// take no lock (a per-thread cache, checked against a counter that
/// [`set_allocator`] bumps, so an installed allocator is seen by the next call).
pub fn allocator(device: Device) -> Result<Arc<CachingAllocator>, AllocError> {
    let generation = GENERATION.load(Ordering::Acquire);
    // `try_with`: from a thread-local destructor of an exiting thread the
    // cache may be gone (`with` would panic there, and the panic abort the
    // process); the registry then answers without it.
    let hit = CACHED
        .try_with(|c| {
            c.borrow()
                .iter()
                .find(|(d, g, _)| *d == device && *g == generation)
                .map(|(_, _, a)| Arc::clone(a))
        })
        .ok()
        .flatten();
    if let Some(a) = hit {
        return Ok(a);
    }
    let a = allocator_slow(device)?;
    let _ = CACHED.try_with(|c| {
        let mut c = c.borrow_mut();
        c.retain(|(d, _, _)| *d != device);
        c.push((device, generation, Arc::clone(&a)));
    });
    Ok(a)
}

/// [`allocator`] through the registry's lock.
fn allocator_slow(device: Device) -> Result<Arc<CachingAllocator>, AllocError> {
    if let Some(a) = registry().lock().get(&device) {
        return Ok(Arc::clone(a));
    }
    // Create outside the registry lock (opening a CUDA device can take a
    // while), under the settings lock, so that a concurrent
    // `set_allocator_settings` either sees the new allocator or is seen by it.
    let settings = settings().lock();
    let config = match settings.clone() {
        Some(c) => c,
        None => AllocatorConfig::from_env()?,
    };
    let created = match device {
        Device::Cpu => CachingAllocator::new(Arc::new(HostDriver::new(None)), config),
        Device::Cuda(n) => CachingAllocator::new(cuda_driver(n)?, config),
    };
    if !CACHING.load(Ordering::Acquire) || caching_forced_off()? {
        created.set_caching_enabled(false);
    }
    let mut r = registry().lock();
    let a = Arc::clone(r.entry(device).or_insert(created));
    GENERATION.fetch_add(1, Ordering::Release);
    Ok(a)
}

#[cfg(feature = "cuda")]
fn cuda_driver(n: usize) -> Result<Arc<dyn crate::Driver>, AllocError> {
    crate::driver::cuda::open(n).map_err(|e| AllocError::Unavailable {
        device: Device::Cuda(n),
        reason: e.to_string(),
    })
}

#[cfg(not(feature = "cuda"))]
fn cuda_driver(n: usize) -> Result<Arc<dyn crate::Driver>, AllocError> {
    Err(AllocError::Unavailable {
        device: Device::Cuda(n),
        reason: "strata was built without the `cuda` feature".into(),
    })
}

/// The configuration set by [`set_allocator_settings`], which replaces
/// `STRATA_ALLOC_CONF` for allocators created afterwards.
fn settings() -> &'static Mutex<Option<AllocatorConfig>> {
    static S: OnceLock<Mutex<Option<AllocatorConfig>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(None))
}

/// Reconfigures the allocators at run time, PyTorch's
/// `torch.cuda.memory._set_allocator_settings(str)`: `settings` is applied to
/// every allocator created so far and to the configuration of those created
/// later (in place of `STRATA_ALLOC_CONF`), by PyTorch's rule for a re-parse
/// ([`AllocatorConfig::reparse`]: `max_split_size_mb`,
/// `roundup_power2_divisions` and `garbage_collection_threshold` go back to
/// their defaults unless named, `max_non_split_rounding_mb` to the large
/// segment size, every other key keeps its value unless named). A bad string
/// is a typed error and changes nothing. See
/// [`CachingAllocator::set_allocator_settings`] for what happens to memory
/// already held. The pinned keys reach the pinned allocators that follow
/// the settings ([`PinnedAllocator::follow_allocator_settings`](crate::pinned::PinnedAllocator::follow_allocator_settings):
/// every CUDA pinned allocator), as PyTorch's host allocator reads them
/// where it uses them.
///
/// ```
/// use strata_alloc::{Device, StreamId};
/// strata_alloc::set_allocator_settings("max_split_size_mb:128").unwrap();
/// let cpu = strata_alloc::allocator(Device::Cpu).unwrap();
/// assert_eq!(cpu.config().max_split_size, Some(128 << 20));
/// assert!(strata_alloc::set_allocator_settings("max_split_size_mb:1").is_err());
/// assert_eq!(cpu.config().max_split_size, Some(128 << 20));
/// strata_alloc::set_allocator_settings("").unwrap(); // the three resettable keys
/// assert_eq!(cpu.config().max_split_size, None);
/// ```
pub fn set_allocator_settings(settings_str: &str) -> Result<(), AllocError> {
    let mut current = settings().lock();
    // The base of later allocators' configuration: the last one set, or the
    // environment's (a bad environment string surfaces when an allocator is
    // created from it; the string set here replaces it).
    let base = current
        .clone()
        .unwrap_or_else(|| AllocatorConfig::from_env().unwrap_or_default());
    let next = base.reparse(settings_str)?;
    let all: Vec<Arc<CachingAllocator>> = registry().lock().values().cloned().collect();
    // Every allocator checks the string against its own configuration before
    // any takes it: one whose fields differ from the base (a larger
    // `large_segment_size_mb` installed with `set_allocator`, say) can refuse
    // a string the base accepts, and a refusal must change no allocator.
    for a in &all {
        a.config().reparse(settings_str)?;
    }
    for a in all {
        a.set_allocator_settings(settings_str)?;
    }
    crate::pinned::follow::apply(&next);
    *current = Some(next);
    Ok(())
}

/// Runs `f` with the configuration the allocators created now start from:
/// the last string given to [`set_allocator_settings`] (over the
/// environment's), else `STRATA_ALLOC_CONF`'s (`None` when that string is
/// bad). The settings lock is held meanwhile, so that no
/// `set_allocator_settings` comes between what `f` reads and what it does.
pub(crate) fn with_current_config<R>(f: impl FnOnce(Option<&AllocatorConfig>) -> R) -> R {
    let current = settings().lock();
    match &*current {
        Some(c) => f(Some(c)),
        None => f(AllocatorConfig::from_env().ok().as_ref()),
    }
}

/// Whether the allocators the registry creates cache (see
/// [`caching_allocator_enable`]).
static CACHING: AtomicBool = AtomicBool::new(true);

/// The environment variable that turns caching off for good, PyTorch's
/// `PYTORCH_NO_CUDA_MEMORY_CACHING`.
pub const NO_CACHING_ENV_VAR: &str = "STRATA_NO_MEMORY_CACHING";

/// Whether [`NO_CACHING_ENV_VAR`] is `1` (read once): the registry's
/// allocators then never cache, whatever [`caching_allocator_enable`] says,
/// as PyTorch's `forceUncachedAllocator()` overrides its switch. `0` or
/// unset leaves caching on; any other value is a typed error (PyTorch's
/// `check_env` accepts only `0` and `1` too, and warns about the rest).
fn caching_forced_off() -> Result<bool, AllocError> {
    static FORCED: OnceLock<Result<bool, crate::config::ConfigError>> = OnceLock::new();
    FORCED
        .get_or_init(|| match crate::config::env_value(NO_CACHING_ENV_VAR) {
            Err(e) => Err(e),
            Ok(None) => Ok(false),
            Ok(Some(v)) if v == "1" => Ok(true),
            Ok(Some(v)) if v == "0" => Ok(false),
            Ok(Some(v)) => Err(crate::config::ConfigError::BadValue {
                key: NO_CACHING_ENV_VAR,
                value: v,
                accepted: "1 to allocate without caching (every request a device allocation), 0 or unset to cache",
            }),
        })
        .clone()
        .map_err(AllocError::from)
}

/// Turns caching on or off for every device's allocator, PyTorch's
/// `torch.cuda.memory.caching_allocator_enable(value)` (one switch for the
/// process): the allocators created so far and those created later. While
/// it is off, each allocation goes straight to the device and each free
/// straight back ([`CachingAllocator::set_caching_enabled`] tells the
/// details); statistics and snapshots leave such memory out. An allocator
/// installed with [`set_allocator`] keeps its own switch until this is
/// called again. With `STRATA_NO_MEMORY_CACHING=1` in the environment
/// (PyTorch's `PYTORCH_NO_CUDA_MEMORY_CACHING=1`), the registry's
/// allocators never cache and turning caching on here changes nothing.
///
/// ```
/// use strata_alloc::{Device, StreamId};
/// strata_alloc::caching_allocator_enable(false);
/// let cpu = strata_alloc::allocator(Device::Cpu).unwrap();
/// assert!(!cpu.caching_enabled());
/// let x = cpu.allocate(4096, StreamId::DEFAULT).unwrap();
/// assert_eq!(cpu.memory_allocated(), 0); // outside the cache
/// drop(x);
/// strata_alloc::caching_allocator_enable(true);
/// assert!(cpu.caching_enabled());
/// ```
pub fn caching_allocator_enable(enabled: bool) {
    // Under the settings lock, as allocators are created: one created
    // concurrently either sees the new value or is reached by the loop.
    let _settings = settings().lock();
    CACHING.store(enabled, Ordering::Release);
    let enabled = enabled && !caching_forced_off().unwrap_or(false);
    for a in registry().lock().values() {
        a.set_caching_enabled(enabled);
    }
}

/// Free and total memory of `device` as its driver reports them now
/// (PyTorch's `torch.cuda.mem_get_info(device)`; memory used by other
/// processes counts as used). Uses the device's allocator's driver when one
/// exists (an installed simulated device, for example), the device's shared
/// driver otherwise; creates no allocator. A device that cannot be opened is a
/// typed error.
///
/// ```
/// use strata_alloc::Device;
/// let m = strata_alloc::mem_get_info(Device::Cpu).unwrap();
/// assert!(m.free <= m.total && m.total > 0);
/// ```
pub fn mem_get_info(device: Device) -> Result<MemInfo, AllocError> {
    if let Some(a) = existing_allocator(device) {
        return a.mem_get_info();
    }
    let driver: Arc<dyn crate::Driver> = match device {
        Device::Cpu => Arc::new(HostDriver::new(None)),
        Device::Cuda(n) => cuda_driver(n)?,
    };
    driver
        .mem_get_info()
        .map_err(|source| AllocError::Driver { device, source })
}

/// The name of the allocator backend, PyTorch's
/// `torch.cuda.get_allocator_backend()`: `"native"`, the caching allocator
/// this crate implements (PyTorch's default). PyTorch's other backend,
/// `cudaMallocAsync`, chosen there with `backend:cudaMallocAsync` in the
/// allocator settings, does not exist in strata: that setting is refused
/// with a typed [`ConfigError::BadValue`](crate::ConfigError::BadValue), so
/// no configuration makes this return anything else.
///
/// ```
/// assert_eq!(strata_alloc::get_allocator_backend(), "native");
/// assert!(strata_alloc::AllocatorConfig::parse("backend:cudaMallocAsync").is_err());
/// ```
pub fn get_allocator_backend() -> &'static str {
    "native"
}

/// Installs `allocator` as the allocator of its device (for a custom driver, a
/// simulated device in tests, or a non-default configuration). Allocations made
/// by a replaced allocator stay valid: each holds its own allocator.
pub fn set_allocator(allocator: Arc<CachingAllocator>) {
    registry().lock().insert(allocator.device(), allocator);
    GENERATION.fetch_add(1, Ordering::Release);
}

/// The allocator of `device` if one has been created.
pub fn existing_allocator(device: Device) -> Option<Arc<CachingAllocator>> {
    registry().lock().get(&device).cloned()
}

/// The allocator of `device` if one exists, after checking that the device
/// exists (PyTorch's "invalid device ordinal"): the CPU always does; `cuda:N`
/// does when an allocator was installed for it ([`set_allocator`]) or when
/// `N` is below the number of visible GPUs. Creates no allocator.
fn existing_checked(device: Device) -> Result<Option<Arc<CachingAllocator>>, AllocError> {
    if let Some(a) = existing_allocator(device) {
        return Ok(Some(a));
    }
    match device {
        Device::Cpu => Ok(None),
        Device::Cuda(n) => check_cuda_ordinal(n).map(|()| None),
    }
}

#[cfg(feature = "cuda")]
fn check_cuda_ordinal(n: usize) -> Result<(), AllocError> {
    use crate::driver::cuda;
    let count = cuda::device_count();
    if n < count {
        return Ok(());
    }
    let reason = match cuda::unavailable_reason() {
        Some(why) => why,
        None => format!(
            "cuda:{n} does not exist: this machine has {count} visible GPU{} (cuda:0{}); check CUDA_VISIBLE_DEVICES",
            if count == 1 { "" } else { "s" },
            if count > 1 {
                format!(" to cuda:{}", count - 1)
            } else {
                String::new()
            }
        ),
    };
    Err(AllocError::Unavailable {
        device: Device::Cuda(n),
        reason,
    })
}

#[cfg(not(feature = "cuda"))]
fn check_cuda_ordinal(n: usize) -> Result<(), AllocError> {
    Err(AllocError::Unavailable {
        device: Device::Cuda(n),
        reason: "strata was built without the `cuda` feature".into(),
    })
}

/// Statistics of `device` (all zero if nothing was allocated there yet, as
/// `torch.cuda.memory_stats()` returns `{}` before the device is used). A
/// device that does not exist (`cuda:7` on a one-GPU machine, any `cuda:N`
/// without a GPU) is an [`AllocError::Unavailable`] error, as in PyTorch; the
/// CPU always exists.
///
/// ```
/// use strata_alloc::{AllocError, Device};
/// assert!(strata_alloc::memory_stats(Device::Cpu).is_ok());
/// assert!(matches!(
///     strata_alloc::memory_stats(Device::Cuda(1 << 20)),
///     Err(AllocError::Unavailable { .. })
/// ));
/// ```
pub fn memory_stats(device: Device) -> Result<MemoryStats, AllocError> {
    Ok(existing_checked(device)?
        .map(|a| a.memory_stats())
        .unwrap_or_default())
}

/// `allocated_bytes.all.current` of `device` (an error for a device that does
/// not exist, as for [`memory_stats`]).
pub fn memory_allocated(device: Device) -> Result<u64, AllocError> {
    Ok(existing_checked(device)?.map_or(0, |a| a.memory_allocated()))
}

/// `reserved_bytes.all.current` of `device` (an error for a device that does
/// not exist).
pub fn memory_reserved(device: Device) -> Result<u64, AllocError> {
    Ok(existing_checked(device)?.map_or(0, |a| a.memory_reserved()))
}

/// `allocated_bytes.all.peak` of `device` (an error for a device that does not
/// exist).
pub fn max_memory_allocated(device: Device) -> Result<u64, AllocError> {
    Ok(existing_checked(device)?.map_or(0, |a| a.max_memory_allocated()))
}

/// `reserved_bytes.all.peak` of `device` (an error for a device that does not
/// exist).
pub fn max_memory_reserved(device: Device) -> Result<u64, AllocError> {
    Ok(existing_checked(device)?.map_or(0, |a| a.max_memory_reserved()))
}

/// Resets the peaks of `device`'s statistics (an error for a device that does
/// not exist).
pub fn reset_peak_memory_stats(device: Device) -> Result<(), AllocError> {
    if let Some(a) = existing_checked(device)? {
        a.reset_peak_memory_stats();
    }
    Ok(())
}

/// Resets the accumulated statistics of `device` (an error for a device that
/// does not exist).
pub fn reset_accumulated_memory_stats(device: Device) -> Result<(), AllocError> {
    if let Some(a) = existing_checked(device)? {
        a.reset_accumulated_memory_stats();
    }
    Ok(())
}

/// Releases `device`'s cached memory (an error for a device that does not
/// exist).
#[track_caller]
pub fn empty_cache(device: Device) -> Result<(), AllocError> {
    match existing_checked(device)? {
        Some(a) => a.empty_cache(),
        None => Ok(()),
    }
}

/// `memory_summary()` of `device` (an error for a device that does not exist).
pub fn memory_summary(device: Device) -> Result<String, AllocError> {
    Ok(crate::snapshot::summary(
        device,
        &memory_stats(device)?,
        false,
    ))
}
