//! Sorting along one dim on the CPU: `sort`, `topk`, `kthvalue`, `median`.
//!
//! The caller hands a contiguous input of `rows x n` elements (the sorted
//! dim last) and contiguous outputs of `rows x m` values and i64 indices
//! (see [`SortKernel`]). Every element becomes an unsigned key whose
//! unsigned order is PyTorch's order of the values ([`SortKey`]: NaN above
//! +inf, -0.0 equal to 0.0; complemented for a descending sort), packed
//! with its position in the row into one integer (key in the high bits,
//! position in the low bits). Integers that are all distinct sort the same
//! whatever the algorithm, and the position breaks every tie in input
//! order: `sort_unstable` on them is a stable sort of the values, and
//! `select_nth_unstable` picks the element a stable sort would put there.
//! Rows are spread across rayon's threads (one reused buffer per thread);
//! a single long row is sorted with rayon's parallel sort.

use super::dimops::{slice, slice_mut};
use crate::backend::Arg;
use crate::dispatch_dtype;
use crate::dtype::Element;
use crate::error::{Result, TensorError};
use rayon::prelude::*;

/// What [`SortKernel`] writes for each row, of the row's elements in the
/// kernel's order (stable: equal elements in input order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SortPick {
    /// The first `k` (`1 <= k <= n`) in order: `m = k` outputs per row.
    Head(usize),
    /// The element at position `p < n` of the order (`kthvalue`'s `k - 1`):
    /// one output per row.
    Nth(usize),
    /// The lower median (ascending order only): one output per row. With a
    /// NaN in the row and not `skip_nan`, the row's first NaN (PyTorch's
    /// `median`); with `skip_nan`, position `(m - 1) / 2` of the `m`
    /// non-NaN elements, or the first NaN when all are NaN (PyTorch's
    /// `nanmedian`).
    Median {
        /// Ignore NaNs (`nanmedian`).
        skip_nan: bool,
    },
}

impl SortPick {
    /// Outputs per row.
    pub(crate) fn width(self) -> usize {
        match self {
            SortPick::Head(k) => k,
            SortPick::Nth(_) | SortPick::Median { .. } => 1,
        }
    }
}

/// One sort along rows: `input` is contiguous `[rows, n]` (`n >= 1`,
/// `rows >= 1`); `values` (input's dtype) and `indices` (i64, positions in
/// the row) are fresh contiguous `[rows, pick.width()]` (width >= 1).
pub(crate) struct SortKernel<'a> {
    pub values: &'a Arg<'a>,
    pub indices: &'a Arg<'a>,
    pub input: &'a Arg<'a>,
    pub rows: usize,
    pub n: usize,
    /// Largest first (NaN first); equal elements still in input order.
    pub descending: bool,
    pub pick: SortPick,
}

/// The order-preserving unsigned key of an element type (`u64` whose low
/// [`SortKey::BITS`] bits are used): `a < b` in PyTorch's sort order
/// exactly when `key(a) < key(b)`, and equal keys for elements it holds
/// equal. For floats: NaN (any payload or sign) is the largest key,
/// `2^BITS - 1`; -0.0 has 0.0's key; otherwise the sign bit is flipped for
/// positive values and every bit for negative ones. Signed integers flip
/// their sign bit; u8 and bool are their own keys.
pub(crate) trait SortKey: Element {
    /// Bits of the key.
    const BITS: u32;
    /// The key.
    fn key(self) -> u64;
    /// Whether this is a NaN.
    fn nan(self) -> bool;
}

macro_rules! float_key {
    ($t:ty, $u:ty, $bits:expr, $to_bits:expr, $is_nan:expr, $is_zero:expr) => {
        impl SortKey for $t {
            const BITS: u32 = $bits;
            fn key(self) -> u64 {
                if $is_nan(self) {
                    return u64::MAX >> (64 - $bits);
                }
                let b: $u = if $is_zero(self) { 0 } else { $to_bits(self) };
                let sign: $u = 1 << ($bits - 1);
                (if b & sign != 0 { !b } else { b | sign }) as u64
            }
            fn nan(self) -> bool {
                $is_nan(self)
            }
        }
    };
}
float_key!(f32, u32, 32, f32::to_bits, f32::is_nan, |x: f32| x == 0.0);
float_key!(f64, u64, 64, f64::to_bits, f64::is_nan, |x: f64| x == 0.0);
float_key!(
    half::f16,
    u16,
    16,
    half::f16::to_bits,
    half::f16::is_nan,
    |x: half::f16| x.to_bits() & 0x7fff == 0
);
float_key!(
    half::bf16,
    u16,
    16,
    half::bf16::to_bits,
    half::bf16::is_nan,
    |x: half::bf16| x.to_bits() & 0x7fff == 0
);

impl SortKey for i32 {
    const BITS: u32 = 32;
    fn key(self) -> u64 {
        u64::from((self as u32) ^ (1 << 31))
    }
    fn nan(self) -> bool {
        false
    }
}
impl SortKey for i64 {
    const BITS: u32 = 64;
    fn key(self) -> u64 {
        (self as u64) ^ (1 << 63)
    }
    fn nan(self) -> bool {
        false
    }
}
impl SortKey for u8 {
    const BITS: u32 = 8;
    fn key(self) -> u64 {
        u64::from(self)
    }
    fn nan(self) -> bool {
        false
    }
}
impl SortKey for bool {
    const BITS: u32 = 1;
    fn key(self) -> u64 {
        u64::from(self)
    }
    fn nan(self) -> bool {
        false
    }
}

/// A key and a position in one integer: ordered by key, then position.
trait Packed: Copy + Ord + Send + Sync {
    fn pack(key: u64, pos: usize) -> Self;
    fn pos(self) -> usize;
}
/// Keys of up to 32 bits and positions below 2^32.
impl Packed for u64 {
    fn pack(key: u64, pos: usize) -> u64 {
        (key << 32) | pos as u64
    }
    fn pos(self) -> usize {
        (self & 0xffff_ffff) as usize
    }
}
/// Any key and position.
impl Packed for u128 {
    fn pack(key: u64, pos: usize) -> u128 {
        (u128::from(key) << 64) | pos as u128
    }
    fn pos(self) -> usize {
        self as u64 as usize
    }
}

/// Runs `k` (see [`SortKernel`]).
pub(crate) fn sort(k: &SortKernel) -> Result<()> {
    dispatch_dtype!(k.input.dtype, T => typed::<T>(k))
}

fn typed<T: SortKey>(k: &SortKernel) -> Result<()> {
    if T::BITS <= 32 && k.n <= 1 << 32 {
        rows::<T, u64>(k)
    } else {
        rows::<T, u128>(k)
    }
}

fn rows<T: SortKey, P: Packed>(k: &SortKernel) -> Result<()> {
    let (rows, n, m) = (k.rows, k.n, k.pick.width());
    if rows == 0 || n == 0 || m == 0 {
        return Ok(());
    }
    // SAFETY: the caller hands contiguous operands of these sizes (see
    // `SortKernel`) whose storages it has locked (read for the input,
    // write for the fresh outputs, which alias nothing).
    let (x, vals, idx) = unsafe {
        (
            slice::<T>(k.input, rows * n),
            slice_mut::<T>(k.values, rows * m),
            slice_mut::<i64>(k.indices, rows * m),
        )
    };
    let flip = if k.descending {
        u64::MAX >> (64 - T::BITS)
    } else {
        0
    };
    let one = |buf: &mut Vec<P>, xr: &[T], vr: &mut [T], ir: &mut [i64], par: bool| {
        row(buf, xr, flip, k.pick, vr, ir, par)
    };
    if rows == 1 {
        let mut buf = Vec::new();
        return one(&mut buf, x, vals, idx, n >= super::PARALLEL_THRESHOLD);
    }
    if rows * n >= super::PARALLEL_THRESHOLD {
        vals.par_chunks_mut(m)
            .zip(idx.par_chunks_mut(m))
            .zip(x.par_chunks(n))
            .try_for_each_init(Vec::new, |buf, ((vr, ir), xr)| one(buf, xr, vr, ir, false))
    } else {
        let mut buf = Vec::new();
        for ((vr, ir), xr) in vals.chunks_mut(m).zip(idx.chunks_mut(m)).zip(x.chunks(n)) {
            one(&mut buf, xr, vr, ir, false)?;
        }
        Ok(())
    }
}

/// One row: `x` (n elements) into `vals`/`idx` (the pick's width).
fn row<T: SortKey, P: Packed>(
    buf: &mut Vec<P>,
    x: &[T],
    flip: u64,
    pick: SortPick,
    vals: &mut [T],
    idx: &mut [i64],
    par: bool,
) -> Result<()> {
    let n = x.len();
    let mut put = |j: usize, p: usize| {
        vals[j] = x[p];
        idx[j] = p as i64;
    };
    if let SortPick::Median { skip_nan } = pick {
        // PyTorch's median returns the row's first NaN; nanmedian of a row
        // of NaNs returns its first.
        if let Some(p) = x.iter().position(|v| v.nan()) {
            if !skip_nan || x.iter().all(|v| v.nan()) {
                put(0, p);
                return Ok(());
            }
        }
    }
    buf.clear();
    buf.try_reserve_exact(n).map_err(|_| {
        TensorError::value(
            "sort",
            format!(
                "cannot allocate a host buffer of {} bytes to sort a row of {n} elements",
                n.saturating_mul(std::mem::size_of::<P>())
            ),
        )
    })?;
    buf.extend(
        x.iter()
            .enumerate()
            .map(|(i, v)| P::pack(v.key() ^ flip, i)),
    );
    match pick {
        SortPick::Head(k) => {
            if k < n / 2 {
                // The k first in order, then only those sorted.
                buf.select_nth_unstable(k - 1);
                buf[..k - 1].sort_unstable();
            } else if par {
                buf.par_sort_unstable();
            } else {
                buf.sort_unstable();
            }
            for (j, p) in buf[..k].iter().enumerate() {
                put(j, p.pos());
            }
        }
        SortPick::Nth(p) => {
            let (_, e, _) = buf.select_nth_unstable(p);
            put(0, e.pos());
        }
        SortPick::Median { .. } => {
            // NaNs (the largest keys) sort after the `m` others.
            let m = x.iter().filter(|v| !v.nan()).count();
            let (_, e, _) = buf.select_nth_unstable((m - 1) / 2);
            put(0, e.pos());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::SortKey;

    #[test]
    fn keys_follow_pytorchs_order() {
        let xs = [
            f32::NEG_INFINITY,
            -1.0,
            -f32::MIN_POSITIVE / 2.0,
            0.0,
            f32::MIN_POSITIVE / 2.0,
            1.0,
            f32::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(w[0].key() < w[1].key(), "{w:?}");
        }
        assert_eq!((-0.0f32).key(), 0.0f32.key());
        assert_eq!(f32::NAN.key(), (-f32::NAN).key());
        assert!(f32::NAN.key() > f32::INFINITY.key());
        let h = |v: f32| half::f16::from_f32(v).key();
        assert!(h(-2.0) < h(-1.0) && h(-1.0) < h(0.0) && h(0.0) < h(f32::INFINITY));
        assert_eq!(h(-0.0), h(0.0));
        assert!(h(f32::NAN) > h(f32::INFINITY));
        assert!(i32::MIN.key() < (-1i32).key() && (-1i32).key() < 0i32.key());
        assert!(i64::MIN.key() < 0i64.key() && 0i64.key() < i64::MAX.key());
    }
}
