//! Counter-based random numbers for `rand`/`randn`: Philox 4x32-10
//! (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
//! the generator cuRAND and PyTorch's CUDA generator use.
//!
//! # Seed and offset semantics
//!
//! A counter-based generator computes any element of the stream directly from
//! (seed, position), so every device produces the same numbers for the same
//! seed and shape, in any order and in parallel, without a host buffer:
//!
//! * the key is the 64-bit seed (low word first);
//! * element `i` (row-major position in the new tensor) of a **uniform**
//!   tensor uses Philox block `i / 2` of stream 0 (counter words
//!   `[block_lo, block_hi, 0, 0]`) and its words `2*(i%2)` (high half) and
//!   `2*(i%2)+1` (low half) as a 64-bit integer `x`; the value is the top `p`
//!   bits of `x` times `2^-p`, where `p` is the dtype's precision (53 for f64,
//!   24 for f32, 11 for f16, 8 for bf16), so it lies in `[0, 1)` and is exact
//!   in the dtype;
//! * element `i` of a **normal** tensor uses block `i / 2` of stream 1
//!   (counter `[block_lo, block_hi, 1, 0]`): words 0–1 give `u1` and words 2–3
//!   give `u2` (53 bits each), and Box–Muller gives `r cos(2π u2)` for even
//!   `i` and `r sin(2π u2)` for odd `i`, with `r = sqrt(-2 ln(1 - u1))`,
//!   computed in f64 and rounded once to the dtype.
//!
//! So a tensor's numbers depend on the seed and the element positions only: a
//! smaller tensor drawn with the same seed is a prefix of a larger one (in
//! row-major order). Uniform values are bit-identical on the CPU and the GPU;
//! normal values go through `ln`, `cos` and `sin`, whose last bit may differ
//! between the host's math library and CUDA's (within 2 ulp in f64).

/// Philox multipliers and Weyl key increments.
pub(crate) const PHILOX_M: [u32; 2] = [0xD251_1F53, 0xCD9E_8D57];
pub(crate) const PHILOX_W: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];

/// One Philox 4x32-10 block: the four words for `counter` under `key`.
pub(crate) fn philox(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(PHILOX_W[0]);
            k[1] = k[1].wrapping_add(PHILOX_W[1]);
        }
        let p0 = u64::from(PHILOX_M[0]) * u64::from(c[0]);
        let p1 = u64::from(PHILOX_M[1]) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The key of a seed.
fn key(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// Block `block` of stream `stream`.
fn block(seed: u64, block: u64, stream: u32) -> [u32; 4] {
    philox([block as u32, (block >> 32) as u32, stream, 0], key(seed))
}

/// Two words as a 64-bit integer, the first one high.
fn join(hi: u32, lo: u32) -> u64 {
    (u64::from(hi) << 32) | u64::from(lo)
}

/// The top `bits` bits of `x` as a fraction in `[0, 1)`.
fn fraction(x: u64, bits: u32) -> f64 {
    // 2^-bits exactly (bits <= 64), so the product is exact.
    (x >> (64 - bits)) as f64 * f64::from_bits((1023 - u64::from(bits)) << 52)
}

/// Which distribution a generated tensor follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dist {
    /// Uniform in `[0, 1)` with `bits` bits of precision.
    Uniform { bits: u32 },
    /// Standard normal.
    Normal,
}

/// Element `i` of the stream of `dist` for `seed`, as an f64.
pub(crate) fn sample(dist: Dist, seed: u64, i: u64) -> f64 {
    match dist {
        Dist::Uniform { bits } => {
            let w = block(seed, i / 2, 0);
            let j = 2 * (i % 2) as usize;
            fraction(join(w[j], w[j + 1]), bits)
        }
        Dist::Normal => {
            let w = block(seed, i / 2, 1);
            let u1 = fraction(join(w[0], w[1]), 53);
            let u2 = fraction(join(w[2], w[3]), 53);
            let r = (-2.0 * (1.0 - u1).ln()).sqrt();
            let theta = std::f64::consts::TAU * u2;
            if i.is_multiple_of(2) {
                r * theta.cos()
            } else {
                r * theta.sin()
            }
        }
    }
}

/// Bits of precision of the uniform values of a float dtype.
pub(crate) fn uniform_bits(dtype: crate::DType) -> u32 {
    match dtype {
        crate::DType::F64 => 53,
        crate::DType::F16 => 11,
        crate::DType::BF16 => 8,
        _ => 24,
    }
}

/// Element `i` of `randint`'s stream: `low + (x mod range)` (wrapping in
/// i64), `x` the 64 bits of half a Philox block of stream 2.
pub(crate) fn randint(seed: u64, i: u64, low: i64, range: u64) -> i64 {
    let w = block(seed, i / 2, 2);
    let j = 2 * (i % 2) as usize;
    low.wrapping_add((join(w[j], w[j + 1]) % range.max(1)) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer tests of Random123's `kat_vectors` for philox4x32_10.
    #[test]
    fn philox_matches_the_reference_vectors() {
        assert_eq!(
            philox([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn uniform_values_lie_in_the_unit_interval_at_the_dtype_precision() {
        for bits in [8, 11, 24, 53] {
            for i in 0..1000 {
                let u = sample(Dist::Uniform { bits }, 42, i);
                assert!((0.0..1.0).contains(&u));
                let scaled = u * (bits as f64).exp2();
                assert_eq!(scaled, scaled.trunc(), "not on the {bits}-bit grid");
            }
        }
        assert_eq!(fraction(u64::MAX, 24), 1.0 - (-24f64).exp2());
    }
}
