//! [`SimPinnedBackend`]: real host memory standing in for pinned memory, with
//! the simulated device's events, for tests.

use super::size_class::PAGE;
use super::PinnedBackend;
use crate::driver::sim::SimDriver;
use crate::driver::{DriverError, StreamEvents, StreamId};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

/// A simulated pinning backend: real page-aligned host memory from the system
/// allocator (so buffers can be read and written), counted calls, an optional
/// capacity and injectable exhaustion; its events and streams are those of a
/// [`SimDriver`], completed by the test.
pub struct SimPinnedBackend {
    capacity: Option<u64>,
    state: Mutex<SimState>,
    device: SimDriver,
}

#[derive(Default)]
struct SimState {
    live: HashMap<u64, u64>,
    used: u64,
    alloc_calls: u64,
    free_calls: u64,
    fail_allocs: u64,
    latency: Duration,
}

impl SimPinnedBackend {
    /// A backend that pins at most `capacity` bytes (unlimited with `None`).
    pub fn new(capacity: Option<u64>) -> SimPinnedBackend {
        SimPinnedBackend {
            capacity,
            state: Mutex::new(SimState::default()),
            device: SimDriver::new(0, 0),
        }
    }

    fn layout(size: u64) -> Result<std::alloc::Layout, DriverError> {
        let size = usize::try_from(size).map_err(|_| DriverError::OutOfMemory)?;
        std::alloc::Layout::from_size_align(size.max(1), PAGE as usize)
            .map_err(|_| DriverError::OutOfMemory)
    }

    /// The next `n` allocations fail with [`DriverError::OutOfMemory`].
    pub fn inject_out_of_memory(&self, n: u64) {
        self.state.lock().fail_allocs = n;
    }

    /// Every later `alloc` and `free` takes at least `latency` (it sleeps,
    /// outside the backend's lock), as pinning and unpinning real memory do, so
    /// that the allocator's `host_alloc_time` / `host_free_time` record
    /// non-zero durations.
    pub fn set_latency(&self, latency: Duration) {
        self.state.lock().latency = latency;
    }

    /// Sleeps for the configured latency, if any.
    fn pause(&self) {
        let latency = self.state.lock().latency;
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
    }

    /// The simulated device whose events guard reuse (complete them with
    /// [`SimDriver::complete_stream`], count them with
    /// [`SimDriver::call_count`]).
    pub fn device(&self) -> &SimDriver {
        &self.device
    }

    /// Completes the events recorded on `stream`.
    pub fn complete_stream(&self, stream: StreamId) {
        self.device.complete_stream(stream);
    }

    /// Completes every recorded event.
    pub fn complete_all(&self) {
        self.device.complete_all_events();
    }

    /// Bytes currently pinned.
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used
    }

    /// Blocks currently pinned.
    pub fn live_blocks(&self) -> usize {
        self.state.lock().live.len()
    }

    /// `(alloc, free)` calls made.
    pub fn calls(&self) -> (u64, u64) {
        let s = self.state.lock();
        (s.alloc_calls, s.free_calls)
    }

    /// Events created and not destroyed.
    pub fn live_events(&self) -> usize {
        self.device.live_events()
    }

    fn misuse(call: &'static str, message: impl Into<String>) -> DriverError {
        DriverError::Call {
            call,
            message: message.into(),
        }
    }
}

impl PinnedBackend for SimPinnedBackend {
    fn alloc(&self, size: u64) -> Result<u64, DriverError> {
        let layout = Self::layout(size)?;
        self.pause();
        {
            let mut s = self.state.lock();
            s.alloc_calls += 1;
            if s.fail_allocs > 0 {
                s.fail_allocs -= 1;
                return Err(DriverError::OutOfMemory);
            }
            if self.capacity.is_some_and(|c| s.used + size > c) {
                return Err(DriverError::OutOfMemory);
            }
            s.used += size;
        }
        // SAFETY: `layout` has a non-zero size and a power-of-two alignment.
        let p = unsafe { std::alloc::alloc(layout) };
        let mut s = self.state.lock();
        if p.is_null() {
            s.used -= size;
            return Err(DriverError::OutOfMemory);
        }
        s.live.insert(p as usize as u64, size);
        Ok(p as usize as u64)
    }

    fn free(&self, ptr: u64, size: u64) -> Result<(), DriverError> {
        let layout = Self::layout(size)?;
        self.pause();
        let mut s = self.state.lock();
        s.free_calls += 1;
        match s.live.get(&ptr) {
            Some(&sz) if sz == size => {
                s.live.remove(&ptr);
                s.used -= size;
            }
            Some(&sz) => {
                return Err(Self::misuse(
                    "free",
                    format!("size {size} != allocated {sz}"),
                ))
            }
            None => return Err(Self::misuse("free", format!("{ptr:#x} is not live"))),
        }
        drop(s);
        // SAFETY: `ptr` was returned by `alloc` with this size, hence this layout,
        // and was live until the line above removed it, so it is freed once.
        unsafe { std::alloc::dealloc(ptr as usize as *mut u8, layout) };
        Ok(())
    }

    fn events(&self) -> &dyn StreamEvents {
        &self.device
    }
}

impl Drop for SimPinnedBackend {
    fn drop(&mut self) {
        let s = self.state.get_mut();
        for (&p, &size) in &s.live {
            if let Ok(layout) = Self::layout(size) {
                // SAFETY: every live pointer came from `alloc` with this size and
                // has not been freed; the backend is going away, so nothing else
                // can use it.
                unsafe { std::alloc::dealloc(p as usize as *mut u8, layout) };
            }
        }
    }
}
