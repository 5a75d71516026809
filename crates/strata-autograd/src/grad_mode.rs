//! Grad mode: a thread-local switch. While a [`NoGradGuard`] lives (or inside
//! [`no_grad`]), operations on [`Var`](crate::Var)s record nothing and save
//! nothing; their results do not require grad.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether operations on this thread record a graph (PyTorch's `is_grad_enabled`).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Sets grad mode on this thread, returning the previous mode.
pub fn set_grad_enabled(enabled: bool) -> bool {
    GRAD_ENABLED.with(|g| g.replace(enabled))
}

/// Disables gradient recording on this thread until dropped, then restores the
/// previous mode (guards nest).
///
/// ```
/// use strata_autograd::{is_grad_enabled, NoGradGuard};
/// {
///     let _g = NoGradGuard::new();
///     assert!(!is_grad_enabled());
/// }
/// assert!(is_grad_enabled());
/// ```
#[must_use = "grad mode is restored as soon as the guard is dropped"]
pub struct NoGradGuard {
    prev: bool,
    // Grad mode is per thread: the guard must be dropped on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl NoGradGuard {
    /// Disables grad mode until the guard is dropped.
    pub fn new() -> NoGradGuard {
        NoGradGuard {
            prev: set_grad_enabled(false),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Default for NoGradGuard {
    fn default() -> Self {
        NoGradGuard::new()
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        set_grad_enabled(self.prev);
    }
}

/// Runs `f` with grad mode disabled on this thread.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = NoGradGuard::new();
    f()
}

/// Enables gradient recording on this thread until dropped, then restores the
/// previous mode (PyTorch's `enable_grad`; used by checkpointing to record the
/// recomputed forward inside a backward pass). It has no effect in inference mode.
#[must_use = "grad mode is restored as soon as the guard is dropped"]
pub struct EnableGradGuard {
    prev: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl EnableGradGuard {
    /// Enables grad mode until the guard is dropped.
    pub fn new() -> EnableGradGuard {
        EnableGradGuard {
            prev: set_grad_enabled(true),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Default for EnableGradGuard {
    fn default() -> Self {
        EnableGradGuard::new()
    }
}

impl Drop for EnableGradGuard {
    fn drop(&mut self) {
        set_grad_enabled(self.prev);
    }
}

/// Runs `f` with grad mode enabled on this thread.
pub fn enable_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = EnableGradGuard::new();
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_nest_and_restore() {
        assert!(is_grad_enabled());
        let outer = NoGradGuard::new();
        {
            let _inner = NoGradGuard::new();
            assert!(!is_grad_enabled());
        }
        assert!(!is_grad_enabled());
        drop(outer);
        assert!(is_grad_enabled());
        assert!(!no_grad(is_grad_enabled));
        assert!(is_grad_enabled());
    }

    #[test]
    fn grad_mode_is_per_thread() {
        let _g = NoGradGuard::new();
        let other = std::thread::spawn(is_grad_enabled).join().unwrap();
        assert!(other);
        assert!(!is_grad_enabled());
    }
}
