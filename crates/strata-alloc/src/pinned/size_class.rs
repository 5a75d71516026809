//! The size classes of pinned blocks: one page up to 4 KiB, then eight classes
//! per power of two, never finer than a page (see the [module
//! documentation](super)).

/// Pinned blocks are whole pages.
pub const PAGE: u64 = 4096;
/// Size classes per power of two.
pub const DIVISIONS: u64 = 8;
/// A cached block may serve a request whose class is at most this fraction
/// (1/`REUSE_SLACK`) smaller than the block.
pub const REUSE_SLACK: u64 = 8;
/// Requests of this size or more fail at once.
pub(crate) const MAX_REQUEST: u64 = 1 << 56;

/// The size of the block that serves a request of `size` bytes (see the module
/// documentation): one page up to 4 KiB, then eight classes per power of two,
/// never finer than a page.
///
/// ```
/// use strata_alloc::pinned::size_class;
/// const MIB: u64 = 1 << 20;
/// assert_eq!(size_class(1), 4096);
/// assert_eq!(size_class(5000), 8192);
/// assert_eq!(size_class(129 * MIB + MIB / 2), 144 * MIB); // PyTorch: 256 MiB
/// assert_eq!(size_class(128 * MIB), 128 * MIB);
/// ```
pub fn size_class(size: u64) -> u64 {
    if size <= PAGE {
        return PAGE;
    }
    let size = size.min(MAX_REQUEST);
    let k = 63 - (size - 1).leading_zeros();
    let step = ((1u64 << k) / DIVISIONS).max(PAGE);
    size.div_ceil(step) * step
}
