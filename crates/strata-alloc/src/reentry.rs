//! Per-thread markers that stop the allocator's callbacks (trace trackers,
//! out-of-memory observers) from being re-entered by the calls they make,
//! usable while the thread's locals are being destroyed.
//!
//! An allocation can be freed, or made, from the destructor of a thread
//! local (a per-thread cache of tensors dropped when its thread exits). The
//! set of allocators a thread is running callbacks for is itself a thread
//! local with a destructor, which may already have run by then: reading it
//! with `with` panicked, and a panic in a thread-local destructor aborts the
//! process. Once the set is gone, one flag without a destructor (so always
//! readable) stands in for it: the thread runs one allocator's callbacks at a
//! time, and a call made from inside them runs none.

use std::cell::{Cell, RefCell};
use std::thread::LocalKey;

/// A thread's set of allocator ids whose callbacks it is running.
pub(crate) type Running = RefCell<Vec<u64>>;

/// The stand-in for a [`Running`] set that has been destroyed: whether the
/// thread is running any allocator's callbacks.
pub(crate) type RunningLate = Cell<bool>;

/// Marks allocator `id` as running its callbacks on this thread until
/// dropped (also when a callback panics).
pub(crate) struct Entered {
    running: &'static LocalKey<Running>,
    late: &'static LocalKey<RunningLate>,
    id: u64,
    /// Entered through the stand-in flag (the set was gone).
    through_late: bool,
}

impl Entered {
    /// `None` when this thread is already running allocator `id`'s
    /// callbacks (or, its set gone, any allocator's).
    pub(crate) fn enter(
        running: &'static LocalKey<Running>,
        late: &'static LocalKey<RunningLate>,
        id: u64,
    ) -> Option<Entered> {
        let entered = |through_late| Entered {
            running,
            late,
            id,
            through_late,
        };
        match running.try_with(|r| {
            let mut r = r.borrow_mut();
            if r.contains(&id) {
                false
            } else {
                r.push(id);
                true
            }
        }) {
            Ok(true) => Some(entered(false)),
            Ok(false) => None,
            // The set's destructor has run (the thread is exiting).
            Err(_) => match late.try_with(|l| l.replace(true)) {
                Ok(false) => Some(entered(true)),
                _ => None,
            },
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.through_late {
            let _ = self.late.try_with(|l| l.set(false));
        } else {
            let id = self.id;
            let _ = self
                .running
                .try_with(|r| r.borrow_mut().retain(|&i| i != id));
        }
    }
}
