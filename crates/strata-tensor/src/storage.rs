//! Reference-counted storage: one block from the device's caching allocator,
//! shared by every view of it, and the backend that computes on it (found
//! once, at allocation, so ops reach their device without a lookup).
//! Dropping the last view returns the block to the cache (visible in
//! `strata_alloc::memory_stats`).

use crate::backend::{alloc_stream, backend_for, Backend, Mem};
use crate::error::Result;
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use strata_alloc::{Allocation, Device, StreamId};

/// A block of device memory holding a tensor's elements.
///
/// Elements are read and written through raw pointers by the backends; the
/// `access` lock serialises writers against other users of the same storage so
/// that in-place ops on shared views from several threads cannot race.
pub struct Storage {
    alloc: Allocation,
    nbytes: usize,
    device: Device,
    backend: &'static dyn Backend,
    version: AtomicU64,
    /// Bumped by every write lock ([`Storage::write`]) and version bump: a
    /// cached value range is trusted only while this is unchanged.
    writes: AtomicU64,
    /// The cached value range of integer contents (see `value_range.rs`).
    range: parking_lot::Mutex<Option<crate::value_range::CachedRange>>,
    access: RwLock<()>,
}

impl Storage {
    /// Allocates `nbytes` uninitialised bytes on `device` (a typed error
    /// where this build or machine cannot compute on it).
    #[track_caller]
    pub(crate) fn new(nbytes: usize, device: Device) -> Result<Storage> {
        let backend = backend_for(device)?;
        let allocator = strata_alloc::allocator(device)?;
        let alloc = allocator.allocate(nbytes as u64, alloc_stream(device))?;
        Ok(Storage {
            alloc,
            nbytes,
            device,
            backend,
            version: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            range: parking_lot::Mutex::new(None),
            access: RwLock::new(()),
        })
    }

    /// Allocates `nbytes` uninitialised bytes from a specific allocator (e.g.
    /// page-locked host memory for `pin_memory()`), on its default stream.
    #[track_caller]
    pub(crate) fn new_in(
        allocator: &std::sync::Arc<strata_alloc::CachingAllocator>,
        nbytes: usize,
    ) -> Result<Storage> {
        let backend = backend_for(allocator.device())?;
        let alloc = allocator.allocate(nbytes as u64, StreamId::DEFAULT)?;
        Ok(Storage {
            alloc,
            nbytes,
            device: allocator.device(),
            backend,
            version: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            range: parking_lot::Mutex::new(None),
            access: RwLock::new(()),
        })
    }

    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The device the memory lives on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The backend computing on this memory.
    pub(crate) fn backend(&self) -> &'static dyn Backend {
        self.backend
    }

    /// The memory as kernels see it.
    pub(crate) fn mem(&self) -> Mem<'_> {
        Mem {
            ptr: self.alloc.ptr(),
            nbytes: self.nbytes,
            device: self.device,
            life: std::marker::PhantomData,
        }
    }

    /// The allocation (device address, allocator).
    pub fn allocation(&self) -> &Allocation {
        &self.alloc
    }

    /// Counter of in-place modifications, shared by all views.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub(crate) fn bump_version(&self) {
        self.writes.fetch_add(1, Ordering::AcqRel);
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// The write stamp: (writes, version). Every write through strata
    /// changes it (kernels write under [`Storage::write`]).
    pub(crate) fn write_stamp(&self) -> (u64, u64) {
        (
            self.writes.load(Ordering::Acquire),
            self.version.load(Ordering::Acquire),
        )
    }

    /// The cached value range slot (see `value_range.rs`).
    pub(crate) fn range_slot(
        &self,
    ) -> &parking_lot::Mutex<Option<crate::value_range::CachedRange>> {
        &self.range
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, ()> {
        self.access.read()
    }

    /// The write lock of a kernel writing this memory; taking it also
    /// invalidates any cached value range.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, ()> {
        self.writes.fetch_add(1, Ordering::AcqRel);
        self.access.write()
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("ptr", &format_args!("{:#x}", self.alloc.ptr()))
            .field("nbytes", &self.nbytes)
            .field("device", &self.device)
            .finish()
    }
}

/// Locks held while a kernel runs: a write lock on the output's storage and
/// read locks on the other storages, taken in address order (no deadlock), each
/// storage once (an op may read and write the same storage). Up to
/// [`INLINE_LOCKS`] storages are handled without a heap allocation (every
/// element-wise op), since this runs on the host path of every small op.
pub(crate) struct AccessGuard<'a> {
    _reads: [Option<RwLockReadGuard<'a, ()>>; INLINE_LOCKS],
    _more: Vec<RwLockReadGuard<'a, ()>>,
    _write: Option<RwLockWriteGuard<'a, ()>>,
}

/// Storages an [`AccessGuard`] locks without allocating.
const INLINE_LOCKS: usize = 4;

impl<'a> AccessGuard<'a> {
    pub(crate) fn lock(write: Option<&'a Storage>, reads: &[&'a Storage]) -> AccessGuard<'a> {
        let total = reads.len() + usize::from(write.is_some());
        let mut inline: [Option<(&'a Storage, bool)>; INLINE_LOCKS + 1] = [None; INLINE_LOCKS + 1];
        let mut heap: Vec<Option<(&'a Storage, bool)>> = Vec::new();
        let all: &mut [Option<(&'a Storage, bool)>] = if total <= INLINE_LOCKS + 1 {
            &mut inline[..]
        } else {
            heap.resize(total, None);
            &mut heap[..]
        };
        let mut len = 0;
        if let Some(w) = write {
            all[0] = Some((w, true));
            len = 1;
        }
        for r in reads {
            if !all[..len]
                .iter()
                .flatten()
                .any(|(s, _)| std::ptr::eq(*s, *r))
            {
                all[len] = Some((r, false));
                len += 1;
            }
        }
        let all = &mut all[..len];
        all.sort_unstable_by_key(|e| e.map_or(0, |(s, _)| s as *const Storage as usize));
        let mut guard = AccessGuard {
            _reads: [const { None }; INLINE_LOCKS],
            _more: Vec::new(),
            _write: None,
        };
        let mut nread = 0;
        for (s, w) in all.iter().flatten() {
            if *w {
                guard._write = Some(s.write());
            } else if nread < INLINE_LOCKS {
                guard._reads[nread] = Some(s.read());
                nread += 1;
            } else {
                guard._more.push(s.read());
            }
        }
        guard
    }
}

/// Locks held while a kernel writes several storages (a fused optimizer
/// step): write locks on `writes` and read locks on the `reads` not among
/// them, taken in address order like [`AccessGuard`]'s.
pub(crate) struct WriteGuard<'a> {
    _writes: Vec<RwLockWriteGuard<'a, ()>>,
    _reads: Vec<RwLockReadGuard<'a, ()>>,
}

impl<'a> WriteGuard<'a> {
    /// Locks `writes` (distinct storages) for writing and `reads` for reading.
    pub(crate) fn lock(writes: &[&'a Storage], reads: &[&'a Storage]) -> WriteGuard<'a> {
        let mut all: Vec<(&'a Storage, bool)> = writes.iter().map(|s| (*s, true)).collect();
        for r in reads {
            if !all.iter().any(|(s, _)| std::ptr::eq(*s, *r)) {
                all.push((r, false));
            }
        }
        all.sort_unstable_by_key(|(s, _)| *s as *const Storage as usize);
        all.dedup_by(|a, b| std::ptr::eq(a.0, b.0));
        let mut guard = WriteGuard {
            _writes: Vec::new(),
            _reads: Vec::new(),
        };
        for (s, w) in all {
            if w {
                guard._writes.push(s.write());
            } else {
                guard._reads.push(s.read());
            }
        }
        guard
    }
}
