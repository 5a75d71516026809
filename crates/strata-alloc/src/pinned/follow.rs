//! Pinned allocators that follow the process-wide allocator settings.
//!
//! PyTorch's host allocator reads its settings (`pinned_max_round_threshold_mb`,
//! `pinned_max_cached_size_mb`) where it uses them, so a
//! `torch.cuda.memory._set_allocator_settings` call reaches it at once. A
//! [`PinnedAllocator`] keeps the [`PinnedLimits`] it was given; one made to
//! follow the settings ([`PinnedAllocator::follow_allocator_settings`]; every
//! allocator of `cuda_allocator` does) takes those of each later
//! [`set_allocator_settings`](crate::set_allocator_settings) too.

use super::{PinnedAllocator, PinnedBackend, PinnedLimits};
use crate::AllocatorConfig;
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock, Weak};

/// A pinned allocator of any backend, as the settings see it.
trait Follower: Send + Sync {
    fn take(&self, limits: PinnedLimits);
}

impl<B: PinnedBackend> Follower for PinnedAllocator<B> {
    fn take(&self, limits: PinnedLimits) {
        self.set_limits(limits);
    }
}

/// The allocators that follow the settings (dropped ones are forgotten at
/// the next [`apply`]).
fn followers() -> &'static Mutex<Vec<Weak<dyn Follower>>> {
    static F: OnceLock<Mutex<Vec<Weak<dyn Follower>>>> = OnceLock::new();
    F.get_or_init(|| Mutex::new(Vec::new()))
}

/// Gives `config`'s pinned limits to every following allocator still alive.
/// Called by [`set_allocator_settings`](crate::set_allocator_settings) once
/// the string has been accepted, under the settings lock.
pub(crate) fn apply(config: &AllocatorConfig) {
    let limits = PinnedLimits::of(config);
    followers().lock().retain(|w| match w.upgrade() {
        Some(a) => {
            a.take(limits);
            true
        }
        None => false,
    });
}

impl<B: PinnedBackend + 'static> PinnedAllocator<B> {
    /// Makes this allocator take the pinned limits of the allocator settings
    /// in force now (the last string given to
    /// [`set_allocator_settings`](crate::set_allocator_settings), else
    /// `STRATA_ALLOC_CONF`; a bad environment string leaves the limits as
    /// they are) and of every later `set_allocator_settings`, as PyTorch's
    /// host allocator reads its settings where it uses them. The allocators
    /// of `cuda_allocator` follow the settings from their creation.
    ///
    /// ```
    /// use strata_alloc::pinned::{PinnedAllocator, SimPinnedBackend};
    ///
    /// let pinned = PinnedAllocator::new(SimPinnedBackend::new(None));
    /// pinned.follow_allocator_settings();
    /// strata_alloc::set_allocator_settings("pinned_max_cached_size_mb:64").unwrap();
    /// assert_eq!(pinned.limits().max_cached_size, 64 << 20);
    /// ```
    pub fn follow_allocator_settings(self: &Arc<Self>) {
        crate::registry::with_current_config(|config| {
            if let Some(c) = config {
                self.set_limits(PinnedLimits::of(c));
            }
            let follower: Weak<dyn Follower> = Arc::downgrade(self) as Weak<dyn Follower>;
            followers().lock().push(follower);
        });
    }
}
