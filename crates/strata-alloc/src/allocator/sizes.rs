//! Request sizes: the rounding of a request (512 bytes, or PyTorch's
//! `roundup_power2_divisions`) and the size of the segment a request gets.

use super::*;

impl CachingAllocator {
    /// PyTorch's `round_size`: 512-byte multiples, or power-of-two divisions.
    /// Never wraps: a size whose rounding does not fit a `u64` (1 EiB or
    /// more, which [`allocate`](Self::allocate) refuses with
    /// [`AllocError::TooLarge`]) gives `u64::MAX`.
    pub fn round_size(&self, size: u64) -> u64 {
        round_size(&self.state.lock().settings.config, size)
    }

    /// Segment size for a rounded request (ordinary segments).
    pub(super) fn allocation_size(config: &AllocatorConfig, rounded: u64) -> u64 {
        if rounded <= SMALL_SIZE {
            SMALL_BUFFER
        } else if rounded < MIN_LARGE_ALLOC {
            config.large_segment_size
        } else {
            rounded.div_ceil(ROUND_LARGE) * ROUND_LARGE
        }
    }
}

/// [`round_size`] under a configuration without a division count above 1:
/// a multiple of [`MIN_BLOCK_SIZE`], at least one.
#[inline]
pub(super) fn round_plain(size: u64) -> u64 {
    size.max(1)
        .div_ceil(MIN_BLOCK_SIZE)
        .saturating_mul(MIN_BLOCK_SIZE)
}

/// PyTorch's `round_size` under `config`. The arithmetic saturates where
/// PyTorch's wraps: a division count of 2^55 or more (512·d past `u64::MAX`)
/// never applies, and a size whose rounding does not fit a `u64` (only sizes
/// of 1 EiB or more, which `allocate_raw` refuses first) gives `u64::MAX`.
#[inline]
pub(super) fn round_size(config: &AllocatorConfig, size: u64) -> u64 {
    if size < MIN_BLOCK_SIZE {
        return MIN_BLOCK_SIZE;
    }
    let d = config.divisions_for(size);
    if d > 1 && size > MIN_BLOCK_SIZE.saturating_mul(d) {
        if size.is_power_of_two() {
            return size;
        }
        let p = 1u64 << (63 - size.leading_zeros());
        let step = p >> d.trailing_zeros();
        if step == 0 {
            return p.saturating_mul(2);
        }
        return size.div_ceil(step).saturating_mul(step);
    }
    size.div_ceil(MIN_BLOCK_SIZE).saturating_mul(MIN_BLOCK_SIZE)
}

#[cfg(test)]
mod rounding_tests {
    use super::*;

    /// The hot path's rounding without division counts is `round_size`'s.
    #[test]
    fn plain_rounding_is_round_size_without_divisions() {
        let ones = AllocatorConfig {
            roundup_power2_divisions: [1; crate::config::ROUNDUP_INTERVALS],
            ..AllocatorConfig::default()
        };
        for config in &[AllocatorConfig::default(), ones] {
            let mut sizes: Vec<u64> = (0..5000).collect();
            for shift in 9..64 {
                let p = 1u64 << shift;
                sizes.extend([p - 1, p, p + 1, p + 511, p + 512, p + 513]);
            }
            sizes.extend([u64::MAX - 511, u64::MAX - 1, u64::MAX]);
            for size in sizes {
                assert_eq!(round_plain(size), round_size(config, size), "{size}");
            }
        }
    }
}
