//! [`PinnedBuffer`]: a pinned block held by a caller.

use super::cache::PinnedAllocator;
use super::{PinnedBackend, PinnedError};
use crate::driver::StreamId;
use std::sync::Arc;

/// A pinned host buffer; returns its block to the cache when dropped (after the
/// events of the streams recorded with [`record_stream`](Self::record_stream)).
pub struct PinnedBuffer<B: PinnedBackend> {
    pub(super) allocator: Arc<PinnedAllocator<B>>,
    pub(super) ptr: u64,
    pub(super) len: u64,
    pub(super) capacity: u64,
}

impl<B: PinnedBackend> PinnedBuffer<B> {
    /// The address (0 for an empty buffer).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The size asked for.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the block behind the buffer (its size class or a little more).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The address as a host pointer.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr as usize as *const u8
    }

    /// The address as a mutable host pointer.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr as usize as *mut u8
    }

    /// The bytes of the buffer.
    ///
    /// # Safety
    /// No asynchronous copy may be writing the buffer while the slice lives
    /// (synchronise the stream first), and the backend must hand out real host
    /// memory (the CUDA backend and [`SimPinnedBackend`](super::SimPinnedBackend) do).
    pub unsafe fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the block is `capacity >= len` bytes of host memory owned by this
        // buffer until it is dropped (the backend's contract); the caller rules out
        // concurrent device writes.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len as usize) }
    }

    /// The bytes of the buffer, mutably.
    ///
    /// # Safety
    /// No asynchronous copy may be reading or writing the buffer while the slice
    /// lives, and the backend must hand out real host memory.
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as for `as_slice`; `&mut self` makes the slice unique on the host.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr(), self.len as usize) }
    }

    /// Marks the buffer as used by work queued on `stream` (an asynchronous copy):
    /// after the buffer is dropped, its block is reused only once that work has
    /// run.
    pub fn record_stream(&self, stream: StreamId) -> Result<(), PinnedError> {
        if self.ptr == 0 {
            return Ok(());
        }
        self.allocator.record_event(self.ptr, stream)
    }

    /// The allocator the buffer came from.
    pub fn allocator(&self) -> &Arc<PinnedAllocator<B>> {
        &self.allocator
    }
}

impl<B: PinnedBackend> Drop for PinnedBuffer<B> {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // A failure to record an event has already been made safe inside
            // `free` (the stream was synchronised, or the block withheld).
            let _ = self.allocator.free(self.ptr);
        }
    }
}

impl<B: PinnedBackend> std::fmt::Debug for PinnedBuffer<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}
