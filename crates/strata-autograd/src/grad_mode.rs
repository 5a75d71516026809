//! Grad mode: a thread-local switch. While a [`NoGradGuard`] lives (or inside
//! [`no_grad`]), operations on [`Var`](crate::Var)s record nothing and save
//! nothing; their results do not require grad.

use std::cell::{Cell, RefCell};
use std::thread::LocalKey;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
    /// The live grad-mode guards of this thread (no_grad, enable_grad,
    /// inference mode), innermost last, each with the mode it restores.
    static GRAD_GUARDS: GuardStack = const { RefCell::new(Vec::new()) };
    static NEXT_GUARD: Cell<u64> = const { Cell::new(0) };
}

/// Live guards of one thread-local switch, innermost last: `(id, the value
/// to restore when the guard ends)`.
pub(crate) type GuardStack = RefCell<Vec<(u64, bool)>>;

/// Records a guard entered with `prev` as the switch's value before it;
/// returns the guard's id for [`end_guard`].
pub(crate) fn enter_guard(stack: &'static LocalKey<GuardStack>, prev: bool) -> u64 {
    let id = NEXT_GUARD.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1));
        id
    });
    stack.with(|s| s.borrow_mut().push((id, prev)));
    id
}

/// Ends guard `id`: the value to restore when it is the innermost live
/// guard. A guard dropped out of order (`drop(outer)` before
/// `drop(inner)`) must not restore a value that a live guard no longer
/// wants: it hands its value to the guard entered just after it (which
/// restores it when it ends) and changes nothing now.
pub(crate) fn end_guard(stack: &'static LocalKey<GuardStack>, id: u64) -> Option<bool> {
    stack.with(|s| {
        let mut s = s.borrow_mut();
        let i = s.iter().position(|&(g, _)| g == id)?;
        let (_, prev) = s.remove(i);
        match s.get_mut(i) {
            Some(next) => {
                next.1 = prev;
                None
            }
            None => Some(prev),
        }
    })
}

/// [`enter_guard`] for a guard that sets grad mode to `enabled`.
pub(crate) fn enter_grad_guard(enabled: bool) -> u64 {
    enter_guard(&GRAD_GUARDS, set_grad_enabled(enabled))
}

/// [`end_guard`] for a grad-mode guard, restoring the mode where due.
pub(crate) fn end_grad_guard(id: u64) {
    if let Some(prev) = end_guard(&GRAD_GUARDS, id) {
        set_grad_enabled(prev);
    }
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
    id: u64,
    // Grad mode is per thread: the guard must be dropped on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl NoGradGuard {
    /// Disables grad mode until the guard is dropped.
    pub fn new() -> NoGradGuard {
        NoGradGuard {
            id: enter_grad_guard(false),
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
        end_grad_guard(self.id);
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
    id: u64,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl EnableGradGuard {
    /// Enables grad mode until the guard is dropped.
    pub fn new() -> EnableGradGuard {
        EnableGradGuard {
            id: enter_grad_guard(true),
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
        end_grad_guard(self.id);
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
