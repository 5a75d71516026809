//! A simulated device: no memory is touched, addresses are made up, every call is
//! counted and checked, and failures can be injected.
//!
//! It lets the whole allocator (expandable segments included) run on any machine,
//! on traces larger than the machine's RAM, and lets tests decide when events
//! complete.
//!
//! Its virtual memory follows CUDA's: one physical handle may be mapped at
//! several addresses at once (each mapping made by its own `map` call), and a
//! handle can be released only once every mapping of it is gone.
//! [`SimDriver::physical_ranges`] tells tests which physical bytes an address
//! range reaches, so they can check that no two live allocations share memory.

use super::{
    Device, DevicePtr, Driver, DriverError, EventHandle, MemInfo, PhysHandle, StreamEvents,
    StreamId, VirtualMemory,
};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};

/// Base of the fake address space; far from 0 so that a null pointer is never valid.
const ADDRESS_BASE: u64 = 0x7f00_0000_0000;

/// An H100 80GB's memory as `cuMemGetInfo` reports it.
const H100_CAPACITY: u64 = 85_017_493_504;
/// An H200's memory as `cuMemGetInfo` reports it.
const H200_CAPACITY: u64 = 150_109_880_320;

#[derive(Default)]
struct SimState {
    used: u64,
    next_address: u64,
    segments: HashMap<DevicePtr, u64>,
    reservations: BTreeMap<DevicePtr, u64>,
    handles: HashMap<u64, (u64, u32)>, // id -> (size, live mappings)
    next_handle: u64,
    mappings: BTreeMap<DevicePtr, (u64, u64)>, // va -> (size, handle)
    events: HashMap<u64, SimEvent>,
    next_event: u64,
    next_stream: u64,
    fail_allocations: u64,
    /// Addresses `malloc` hands out first, in order (see
    /// [`SimDriver::with_malloc_addresses`]).
    planned: std::collections::VecDeque<(DevicePtr, u64)>,
    /// The live segments `malloc` placed at a planned address, by address,
    /// with their sizes: the simulator's own addresses step over them.
    planned_live: BTreeMap<DevicePtr, u64>,
    /// Per call name: how many calls still succeed, then how many fail.
    fail_calls: HashMap<&'static str, (u64, u64)>,
    calls: BTreeMap<&'static str, u64>,
    /// Streams synchronised (or waited on through an event recorded on them)
    /// since [`SimDriver::take_synchronized`] last ran.
    synchronized: Vec<StreamId>,
}

#[derive(Clone, Copy)]
struct SimEvent {
    stream: Option<StreamId>,
    complete: bool,
}

/// The simulated device.
///
/// ```
/// use strata_alloc::driver::{sim::SimDriver, Driver};
/// let d = SimDriver::new(1 << 30, 2 << 20);
/// let p = d.malloc(4096).unwrap();
/// assert_eq!(d.used_bytes(), 4096);
/// d.free(p, 4096).unwrap();
/// assert_eq!(d.used_bytes(), 0);
/// ```
pub struct SimDriver {
    capacity: u64,
    granularity: u64,
    auto_complete_events: bool,
    state: Mutex<SimState>,
}

impl SimDriver {
    /// A device of `capacity` bytes whose virtual-memory granularity is
    /// `granularity` bytes (0 disables the virtual-memory calls). Recorded events
    /// stay pending until the test completes them.
    pub fn new(capacity: u64, granularity: u64) -> SimDriver {
        SimDriver {
            capacity,
            granularity,
            auto_complete_events: false,
            state: Mutex::new(SimState {
                next_address: ADDRESS_BASE,
                ..SimState::default()
            }),
        }
    }

    /// An H100's capacity (85017493504 bytes) and 2 MiB granularity.
    pub fn h100() -> SimDriver {
        SimDriver::new(H100_CAPACITY, 2 << 20)
    }

    /// An H200's capacity (150109880320 bytes, as `cuMemGetInfo`
    /// reports it on an H200, session 42) and 2 MiB granularity.
    pub fn h200() -> SimDriver {
        SimDriver::new(H200_CAPACITY, 2 << 20)
    }

    /// A device like the one a trace was recorded on: `name` is the device's
    /// name as PyTorch reports it (a trace file's `device`, e.g. `"NVIDIA
    /// H200"`), and `at_least` the most memory the recording is known to have
    /// held (PyTorch's `reserved_bytes.all.peak`, 0 if unknown). An H200 gets
    /// an H200's capacity, every other name an H100's; the capacity is then
    /// raised, if need be, to `at_least` rounded up to the 2 MiB granularity,
    /// so that a replay never runs out of memory where the recording did not.
    ///
    /// ```
    /// use strata_alloc::driver::{sim::SimDriver, Driver};
    /// let h200 = SimDriver::like("NVIDIA H200", 0);
    /// assert_eq!(h200.mem_get_info().unwrap().total, 150_109_880_320);
    /// let h100 = SimDriver::like("NVIDIA H100 80GB HBM3", 0);
    /// assert_eq!(h100.mem_get_info().unwrap().total, 85_017_493_504);
    /// // A larger device than either, known from what the recording held:
    /// let big = SimDriver::like("a future GPU", 200 << 30);
    /// assert_eq!(big.mem_get_info().unwrap().total, 200 << 30);
    /// ```
    pub fn like(name: &str, at_least: u64) -> SimDriver {
        const GRANULARITY: u64 = 2 << 20;
        let known = if name.to_ascii_uppercase().contains("H200") {
            H200_CAPACITY
        } else {
            H100_CAPACITY
        };
        let needed = at_least
            .checked_next_multiple_of(GRANULARITY)
            .unwrap_or(u64::MAX - (GRANULARITY - 1));
        SimDriver::new(known.max(needed), GRANULARITY)
    }

    /// Makes every recorded event complete at once (as if the device were
    /// infinitely fast), for replays that do not study cross-stream timing.
    pub fn with_auto_complete_events(mut self) -> SimDriver {
        self.auto_complete_events = true;
        self
    }

    /// Makes `malloc` hand out these addresses, in order, to calls of the
    /// listed sizes, as the recording device did: a replay of a PyTorch trace
    /// then sees the same address order as PyTorch did, so that ties between
    /// equal free blocks (the lowest address wins) fall the same way. A call
    /// whose size differs from the next planned one, or whose planned range
    /// would overlap a live segment or reservation (or start at 0, or wrap
    /// past the end of the 64-bit address space), gets an address of the
    /// simulator's own; the simulator's own addresses step over the live
    /// segments at planned addresses, so no two live ranges ever overlap.
    ///
    /// ```
    /// use strata_alloc::driver::{sim::SimDriver, Driver};
    /// let d = SimDriver::h100().with_malloc_addresses([(0x7fc0_0000_0000, 4096)]);
    /// assert_eq!(d.malloc(4096).unwrap(), 0x7fc0_0000_0000);
    /// assert_ne!(d.malloc(4096).unwrap(), 0x7fc0_0000_0000);
    /// ```
    pub fn with_malloc_addresses(
        self,
        plan: impl IntoIterator<Item = (DevicePtr, u64)>,
    ) -> SimDriver {
        self.state.lock().planned = plan.into_iter().collect();
        self
    }

    /// The next `n` calls that create memory (`malloc`, `create`) fail with
    /// [`DriverError::OutOfMemory`], whatever the free capacity.
    pub fn inject_out_of_memory(&self, n: u64) {
        self.state.lock().fail_allocations = n;
    }

    /// The next `n` calls named `call` (`"map"`, `"set_access"`, `"unmap"`, `"free"`, …)
    /// fail with [`DriverError::Call`].
    pub fn inject_failure(&self, call: &'static str, n: u64) {
        self.inject_failure_after(call, 0, n);
    }

    /// After the next `skip` calls named `call` succeed, the `n` calls after
    /// them fail with [`DriverError::Call`].
    pub fn inject_failure_after(&self, call: &'static str, skip: u64, n: u64) {
        self.state.lock().fail_calls.insert(call, (skip, n));
    }

    /// Completes every recorded event.
    pub fn complete_all_events(&self) {
        for e in self.state.lock().events.values_mut() {
            if e.stream.is_some() {
                e.complete = true;
            }
        }
    }

    /// Completes the events recorded on `stream`.
    pub fn complete_stream(&self, stream: StreamId) {
        for e in self.state.lock().events.values_mut() {
            if e.stream == Some(stream) {
                e.complete = true;
            }
        }
    }

    /// The streams synchronised since the last call, directly or by waiting
    /// on an event recorded on them, in order (a test's model of queued work
    /// learns from it which streams have caught up).
    pub fn take_synchronized(&self) -> Vec<StreamId> {
        std::mem::take(&mut self.state.lock().synchronized)
    }

    /// Bytes of device memory in use (segments plus physical handles).
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().used
    }

    /// Live segments, physical handles, mapped ranges and reserved ranges.
    pub fn live_objects(&self) -> (usize, usize, usize, usize) {
        let s = self.state.lock();
        (
            s.segments.len(),
            s.handles.len(),
            s.mappings.len(),
            s.reservations.len(),
        )
    }

    /// The physical memory behind `[ptr, ptr + size)`: `(handle, offset in the
    /// handle, length)` pieces in address order, or `None` if any byte of the
    /// range is not mapped. Tests use it to check that live allocations never
    /// share physical bytes, whatever addresses they are mapped at.
    ///
    /// ```
    /// use strata_alloc::driver::{sim::SimDriver, VirtualMemory};
    /// let d = SimDriver::new(1 << 30, 2 << 20);
    /// let (a, b) = (d.reserve(4 << 20).unwrap(), d.reserve(2 << 20).unwrap());
    /// let h = d.create(2 << 20).unwrap();
    /// d.map(a, 2 << 20, h).unwrap();
    /// d.map(b, 2 << 20, h).unwrap(); // the same page at a second address
    /// assert_eq!(d.physical_ranges(a + 512, 1024), Some(vec![(h.0, 512, 1024)]));
    /// assert_eq!(d.physical_ranges(b + 512, 1024), Some(vec![(h.0, 512, 1024)]));
    /// assert_eq!(d.physical_ranges(a, 4 << 20), None); // the second page is unmapped
    /// ```
    pub fn physical_ranges(&self, ptr: DevicePtr, size: u64) -> Option<Vec<(u64, u64, u64)>> {
        let s = self.state.lock();
        let mut out = Vec::new();
        let mut at = ptr;
        let end = ptr + size;
        while at < end {
            let (&base, &(len, h)) = s.mappings.range(..=at).next_back()?;
            if at >= base + len {
                return None;
            }
            let piece = (base + len).min(end) - at;
            out.push((h, at - base, piece));
            at += piece;
        }
        Some(out)
    }

    /// How many times the call named `call` was made.
    pub fn call_count(&self, call: &str) -> u64 {
        self.state.lock().calls.get(call).copied().unwrap_or(0)
    }

    /// Events created and not destroyed.
    pub fn live_events(&self) -> usize {
        self.state.lock().events.len()
    }

    fn enter(&self, s: &mut SimState, call: &'static str) -> Result<(), DriverError> {
        *s.calls.entry(call).or_insert(0) += 1;
        if let Some((skip, n)) = s.fail_calls.get_mut(call) {
            if *skip > 0 {
                *skip -= 1;
            } else if *n > 0 {
                *n -= 1;
                return Err(DriverError::Call {
                    call,
                    message: "injected failure".into(),
                });
            }
        }
        Ok(())
    }

    fn take_memory(&self, s: &mut SimState, size: u64) -> Result<(), DriverError> {
        if s.fail_allocations > 0 {
            s.fail_allocations -= 1;
            return Err(DriverError::OutOfMemory);
        }
        // Checked: a size near `u64::MAX` would wrap `used + size` below the
        // capacity and be handed out.
        if s.used.checked_add(size).is_none_or(|u| u > self.capacity) {
            return Err(DriverError::OutOfMemory);
        }
        s.used += size;
        Ok(())
    }

    /// The next unused address aligned to `align` with `size` bytes after
    /// it; `None` when that range would not end below 2^64 (addresses are
    /// never reused, so a device of capacity near 2^64, or many large
    /// segments made and freed, can get there): the caller reports it as
    /// out of memory instead of handing out a range that wraps. The range
    /// steps over the live segments placed at planned addresses
    /// ([`SimDriver::with_malloc_addresses`]), which may lie anywhere: a
    /// trace's `segment_alloc` at an address the simulator counts up to
    /// would otherwise be handed out twice.
    fn bump(s: &mut SimState, size: u64, align: u64) -> Option<u64> {
        loop {
            let a = s.next_address.checked_next_multiple_of(align)?;
            let end = a.checked_add(size)?;
            // The planned segments never overlap each other, so the last one
            // starting below `end` is the only one that can reach past `a`.
            match s.planned_live.range(..end).next_back() {
                Some((&b, &l)) if b.saturating_add(l) > a => {
                    s.next_address = b.checked_add(l)?;
                }
                _ => {
                    s.next_address = end;
                    return Some(a);
                }
            }
        }
    }

    fn misuse(call: &'static str, message: impl Into<String>) -> DriverError {
        DriverError::Call {
            call,
            message: message.into(),
        }
    }
}

impl StreamEvents for SimDriver {
    fn create_event(&self) -> Result<EventHandle, DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "event_create")?;
        s.next_event += 1;
        let id = s.next_event;
        s.events.insert(
            id,
            SimEvent {
                stream: None,
                complete: true,
            },
        );
        Ok(EventHandle(id))
    }

    fn destroy_event(&self, event: EventHandle) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "event_destroy")?;
        s.events
            .remove(&event.0)
            .map(|_| ())
            .ok_or_else(|| Self::misuse("event_destroy", "unknown event"))
    }

    fn record_event(&self, event: EventHandle, stream: StreamId) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "event_record")?;
        let auto = self.auto_complete_events;
        let e = s
            .events
            .get_mut(&event.0)
            .ok_or_else(|| Self::misuse("event_record", "unknown event"))?;
        e.stream = Some(stream);
        e.complete = auto;
        Ok(())
    }

    fn query_event(&self, event: EventHandle) -> Result<bool, DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "event_query")?;
        s.events
            .get(&event.0)
            .map(|e| e.complete)
            .ok_or_else(|| Self::misuse("event_query", "unknown event"))
    }

    fn synchronize_event(&self, event: EventHandle) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "event_synchronize")?;
        let e = s
            .events
            .get_mut(&event.0)
            .ok_or_else(|| Self::misuse("event_synchronize", "unknown event"))?;
        e.complete = true;
        if let Some(stream) = e.stream {
            s.synchronized.push(stream);
        }
        Ok(())
    }

    fn synchronize_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "stream_synchronize")?;
        s.synchronized.push(stream);
        for e in s.events.values_mut() {
            if e.stream == Some(stream) {
                e.complete = true;
            }
        }
        Ok(())
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "stream_create")?;
        s.next_stream += 1;
        Ok(StreamId(0x5000_0000 + s.next_stream))
    }
}

impl Driver for SimDriver {
    fn device(&self) -> Device {
        Device::Cuda(0)
    }

    fn name(&self) -> String {
        format!(
            "simulated device ({} bytes, granularity {})",
            self.capacity, self.granularity
        )
    }

    fn total_memory(&self) -> u64 {
        self.capacity
    }

    fn mem_get_info(&self) -> Result<MemInfo, DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "mem_get_info")?;
        Ok(MemInfo {
            free: self.capacity - s.used,
            total: self.capacity,
        })
    }

    fn malloc(&self, size: u64) -> Result<DevicePtr, DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "malloc")?;
        self.take_memory(&mut s, size)?;
        let planned = match s.planned.front() {
            Some(&(at, len)) if len == size => {
                s.planned.pop_front();
                // A planned range that would wrap past 2^64 (a trace's
                // `segment_alloc` near the top of the address space) is not
                // handed out: the allocator would refuse it as a driver bug.
                let end = at.checked_add(size);
                let overlaps = |end: u64| {
                    s.segments
                        .iter()
                        .chain(&s.reservations)
                        .any(|(&b, &l)| b < end && at < b.saturating_add(l))
                };
                end.filter(|&end| !overlaps(end) && at != 0).map(|_| at)
            }
            _ => None,
        };
        if let Some(at) = planned {
            s.planned_live.insert(at, size);
        }
        let Some(p) = planned.or_else(|| Self::bump(&mut s, size, 512)) else {
            s.used -= size;
            return Err(DriverError::OutOfMemory);
        };
        s.segments.insert(p, size);
        Ok(p)
    }

    fn free(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "free")?;
        match s.segments.remove(&ptr) {
            Some(sz) if sz == size => {
                s.used -= size;
                s.planned_live.remove(&ptr);
                Ok(())
            }
            Some(sz) => {
                s.segments.insert(ptr, sz);
                Err(Self::misuse(
                    "free",
                    format!("size {size} != allocated {sz}"),
                ))
            }
            None => Err(Self::misuse("free", format!("{ptr:#x} is not a segment"))),
        }
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        if self.granularity > 0 {
            Some(self)
        } else {
            None
        }
    }
}

impl VirtualMemory for SimDriver {
    fn granularity(&self) -> u64 {
        self.granularity
    }

    fn reserve(&self, size: u64) -> Result<DevicePtr, DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "reserve")?;
        if size == 0 || !size.is_multiple_of(self.granularity) {
            return Err(Self::misuse(
                "reserve",
                "size not a multiple of granularity",
            ));
        }
        let Some(p) = Self::bump(&mut s, size, self.granularity) else {
            return Err(DriverError::OutOfMemory);
        };
        s.reservations.insert(p, size);
        Ok(p)
    }

    fn unreserve(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "unreserve")?;
        if s.reservations.get(&ptr) != Some(&size) {
            return Err(Self::misuse("unreserve", "not a reservation"));
        }
        if s.mappings.range(ptr..ptr + size).next().is_some() {
            return Err(Self::misuse("unreserve", "range still has mappings"));
        }
        s.reservations.remove(&ptr);
        Ok(())
    }

    fn create(&self, size: u64) -> Result<PhysHandle, DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "create")?;
        if size == 0 || !size.is_multiple_of(self.granularity) {
            return Err(Self::misuse("create", "size not a multiple of granularity"));
        }
        self.take_memory(&mut s, size)?;
        s.next_handle += 1;
        let h = s.next_handle;
        s.handles.insert(h, (size, 0));
        Ok(PhysHandle(h))
    }

    fn release(&self, handle: PhysHandle) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "release")?;
        match s.handles.get(&handle.0).copied() {
            Some((size, 0)) => {
                s.handles.remove(&handle.0);
                s.used -= size;
                Ok(())
            }
            Some(_) => Err(Self::misuse("release", "handle is still mapped")),
            None => Err(Self::misuse("release", "unknown handle")),
        }
    }

    fn map(&self, ptr: DevicePtr, size: u64, handle: PhysHandle) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "map")?;
        let inside = s
            .reservations
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&b, &sz)| ptr + size <= b + sz);
        if !inside {
            return Err(Self::misuse("map", "range outside any reservation"));
        }
        let overlaps_prev = s
            .mappings
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&b, &(sz, _))| b + sz > ptr);
        let overlaps_next = s.mappings.range(ptr..ptr + size).next().is_some();
        if overlaps_prev || overlaps_next {
            return Err(Self::misuse("map", "range already mapped"));
        }
        // Like cuMemMap, a handle may be mapped at several addresses.
        match s.handles.get_mut(&handle.0) {
            Some((hs, mappings)) if *hs == size => *mappings += 1,
            _ => return Err(Self::misuse("map", "unknown handle or wrong size")),
        }
        s.mappings.insert(ptr, (size, handle.0));
        Ok(())
    }

    fn set_access(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "set_access")?;
        // The whole range must be covered by mappings without gaps.
        let mut at = ptr;
        while at < ptr + size {
            match s.mappings.get(&at) {
                Some(&(sz, _)) => at += sz,
                None => return Err(Self::misuse("set_access", "range not fully mapped")),
            }
        }
        Ok(())
    }

    fn unmap(&self, ptr: DevicePtr, size: u64) -> Result<(), DriverError> {
        let mut s = self.state.lock();
        self.enter(&mut s, "unmap")?;
        match s.mappings.get(&ptr).copied() {
            Some((sz, h)) if sz == size => {
                s.mappings.remove(&ptr);
                if let Some(e) = s.handles.get_mut(&h) {
                    e.1 -= 1;
                }
                Ok(())
            }
            _ => Err(Self::misuse("unmap", "not exactly one mapping")),
        }
    }
}
