//! The default random generator: a process-wide Philox (seed, offset) pair,
//! PyTorch's `torch.manual_seed` / `get_rng_state` / `set_rng_state`.
//!
//! strata's random tensors are counter-based ([`Tensor::rand`](crate::Tensor::rand)
//! takes a seed and every element is a pure function of (seed, position)).
//! Code that wants "the next random numbers" without threading seeds through
//! (dropout, parameter initialisation) draws a fresh seed here with
//! [`next_seed`]: the seed of draw `n` is the Philox block `n` under the
//! generator's key, so a sequence of draws is determined by the generator's
//! state alone. Saving the state with [`rng_state`] and restoring it with
//! [`set_rng_state`] replays the same draws: gradient checkpointing does this
//! so a recomputed forward sees the same dropout masks.
//!
//! ```
//! use strata_tensor::generator::{manual_seed, next_seed, rng_state, set_rng_state};
//! manual_seed(7);
//! let saved = rng_state();
//! let (a, b) = (next_seed(), next_seed());
//! assert_ne!(a, b);
//! set_rng_state(saved);
//! assert_eq!((next_seed(), next_seed()), (a, b));
//! ```

use parking_lot::Mutex;

/// The state of the default generator: its seed and how many seeds were drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RngState {
    /// The seed set by [`manual_seed`] (0 at start-up, as a fixed default).
    pub seed: u64,
    /// The number of draws since the seed was set.
    pub offset: u64,
}

static DEFAULT: Mutex<RngState> = Mutex::new(RngState { seed: 0, offset: 0 });

/// Seeds the default generator (and resets its offset).
pub fn manual_seed(seed: u64) {
    *DEFAULT.lock() = RngState { seed, offset: 0 };
}

/// The default generator's current state.
pub fn rng_state() -> RngState {
    *DEFAULT.lock()
}

/// Restores a state returned by [`rng_state`]: the following draws repeat
/// the ones made after it was saved.
pub fn set_rng_state(state: RngState) {
    *DEFAULT.lock() = state;
}

/// Draws the next seed from the default generator (advancing its offset by
/// one): Philox block `offset` of stream 2 under the generator's seed, so
/// draws are independent of each other and of `rand`/`randn` with the seed
/// itself (those use streams 0 and 1).
pub fn next_seed() -> u64 {
    let mut s = DEFAULT.lock();
    let n = s.offset;
    s.offset = s.offset.wrapping_add(1);
    let key = [s.seed as u32, (s.seed >> 32) as u32];
    let w = crate::random::philox([n as u32, (n >> 32) as u32, 2, 0], key);
    (u64::from(w[0]) << 32) | u64::from(w[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_replayed_from_a_saved_state_and_differ_between_seeds() {
        // One test touches the process-wide state, so no other test races it.
        manual_seed(3);
        let first: Vec<u64> = (0..4).map(|_| next_seed()).collect();
        let mut sorted = first.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 4, "draws repeat: {first:?}");
        manual_seed(3);
        let st = rng_state();
        assert_eq!(st, RngState { seed: 3, offset: 0 });
        assert_eq!(next_seed(), first[0]);
        let mid = rng_state();
        assert_eq!(mid.offset, 1);
        assert_eq!(next_seed(), first[1]);
        set_rng_state(mid);
        assert_eq!(next_seed(), first[1]);
        manual_seed(4);
        assert_ne!(next_seed(), first[0]);
    }
}
