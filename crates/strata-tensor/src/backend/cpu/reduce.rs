//! Reductions: for every output position (the kept dims, row-major), fold the
//! reduced dims in row-major order, so "first" on ties means first in that
//! order. The loops come from the shared [`ReducePlan`] (dims contiguous
//! together merged); the innermost reduced dim is a plain strided loop.

use crate::backend::cpu::elementwise::base;
use crate::backend::{Arg, ReduceOp};
use crate::dtype::{Arith, Element};
use crate::reduce_plan::ReducePlan;
use crate::scalar::Scalar;
use rayon::prelude::*;

struct Ptrs<T>(*const T, *mut u8, *mut u8);
// SAFETY: workers read the input and write disjoint output positions (one
// per kept index) while the caller holds the storages' locks.
unsafe impl<T> Sync for Ptrs<T> {}

impl<T> Ptrs<T> {
    fn get(&self) -> (*const T, *mut u8, *mut u8) {
        (self.0, self.1, self.2)
    }
}

/// Calls `f(k, x)` for the elements at `src + start + (reduced offsets)` with
/// `k` in `k0 .. k1`, `k` counting in row-major order of the reduced dims;
/// stops early where `f` returns false.
///
/// # Safety
/// Every such element must be readable.
#[inline(always)]
unsafe fn fold<T: Copy>(
    src: *const T,
    start: usize,
    shape: &[usize],
    strides: &[usize],
    (k0, k1): (usize, usize),
    mut f: impl FnMut(usize, T) -> bool,
) {
    let nd = shape.len();
    if nd == 0 {
        if k0 == 0 && k1 > 0 {
            // SAFETY: forwarded contract (a single element).
            f(0, unsafe { *src.add(start) });
        }
        return;
    }
    // The multi-index of element k0 and its storage position.
    let mut idx = vec![0usize; nd];
    let mut rem = k0;
    for d in (0..nd).rev() {
        idx[d] = rem % shape[d];
        rem /= shape[d];
    }
    let mut pos = start + (0..nd).map(|d| idx[d] * strides[d]).sum::<usize>();
    let (inner_n, inner_s) = (shape[nd - 1], strides[nd - 1]);
    let mut k = k0;
    while k < k1 {
        let i0 = idx[nd - 1];
        let run = (inner_n - i0).min(k1 - k);
        for i in 0..run {
            // SAFETY: forwarded contract.
            if !f(k, unsafe { *src.add(pos + i * inner_s) }) {
                return;
            }
            k += 1;
        }
        // Move to the start of the next inner row.
        pos -= i0 * inner_s;
        idx[nd - 1] = 0;
        let mut d = nd - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            pos += strides[d];
            if idx[d] < shape[d] {
                break;
            }
            pos -= strides[d] * shape[d];
            idx[d] = 0;
        }
    }
}

/// Reductions of at least this many elements per output are folded in chunks
/// of this size, in parallel where there are fewer outputs than threads, and
/// the chunks' results combined in order (for sums, a blocked summation: also
/// more accurate than one long running sum).
const CHUNK: usize = 1 << 14;

/// `f` applied to the `CHUNK`-sized ranges of `0 .. count`, in parallel where
/// `parallel`; the results in range order.
fn chunked<R: Send>(
    count: usize,
    parallel: bool,
    f: impl Fn((usize, usize)) -> R + Sync + Send,
) -> Vec<R> {
    let ranges = (0..count.div_ceil(CHUNK)).map(|c| (c * CHUNK, ((c + 1) * CHUNK).min(count)));
    if parallel {
        ranges.collect::<Vec<_>>().into_par_iter().map(f).collect()
    } else {
        ranges.map(f).collect()
    }
}

pub(crate) fn reduce<T: Element>(
    op: ReduceOp,
    values: Option<&Arg>,
    indices: Option<&Arg>,
    input: &Arg,
    dims: &[usize],
) where
    T::Acc: Element,
{
    let l = &input.layout;
    let plan = ReducePlan::new(&l.shape, &l.strides, dims);
    let red_count = plan.count;
    let rs: Vec<usize> = plan.reduced.iter().map(|d| d.size).collect();
    let rst: Vec<usize> = plan.reduced.iter().map(|d| d.stride).collect();
    let outer_idx: Vec<usize> = plan.output_offsets().collect();
    let ptrs = Ptrs(
        base(input) as *const T,
        values.map_or(std::ptr::null_mut(), base),
        indices.map_or(std::ptr::null_mut(), base),
    );
    let count = <T::Acc as Element>::from_scalar(Scalar::Int(red_count as i64));
    let threads = rayon::current_num_threads();
    let split = red_count >= 2 * CHUNK && outer_idx.len() < threads;
    let one = |o: usize, start: usize| {
        let (_, vals, idxs) = ptrs.get();
        match op {
            ReduceOp::Sum | ReduceOp::Mean => {
                let parts = chunked(red_count, split, |range| {
                    let (src, _, _) = ptrs.get();
                    let mut acc = <T::Acc as Arith>::ZERO;
                    // SAFETY: `start` plus the reduced offsets are storage
                    // indices of the input's own layout (kept index + reduced
                    // index).
                    unsafe {
                        fold(src, start, &rs, &rst, range, |_, x: T| {
                            acc = acc.add(x.to_acc());
                            true
                        })
                    };
                    acc
                });
                let mut acc = <T::Acc as Arith>::ZERO;
                for s in parts {
                    acc = acc.add(s);
                }
                if op == ReduceOp::Mean {
                    acc = acc.div(count);
                }
                // SAFETY: outputs are contiguous with one element per kept
                // position `o`.
                unsafe { *(vals as *mut T).add(o) = T::from_acc(acc) };
            }
            ReduceOp::Max | ReduceOp::Min => {
                // Offers element `k` to the best so far: it wins if it is NaN
                // (the first NaN is the extreme) or strictly better, so ties
                // keep the first. False once a NaN has won: stop there.
                let step = |best: &mut Option<(T, usize)>, k: usize, x: T| {
                    let take = best.is_none_or(|(b, _)| {
                        x.to_acc().is_nan() || if op == ReduceOp::Max { x > b } else { x < b }
                    });
                    if take {
                        *best = Some((x, k));
                    }
                    !x.to_acc().is_nan() || !take
                };
                let parts = chunked(red_count, split, |range| {
                    let (src, _, _) = ptrs.get();
                    let mut best = None;
                    // SAFETY: as for sums.
                    unsafe {
                        fold(src, start, &rs, &rst, range, |k, x: T| {
                            step(&mut best, k, x)
                        })
                    };
                    best
                });
                // The chunks' winners, in order, through the same rule.
                let mut best = None;
                for (x, k) in parts.into_iter().flatten() {
                    if !step(&mut best, k, x) {
                        break;
                    }
                }
                let (b, k) = best.expect("callers reject empty reductions");
                if !vals.is_null() {
                    // SAFETY: as for sums.
                    unsafe { *(vals as *mut T).add(o) = b };
                }
                if !idxs.is_null() {
                    // SAFETY: as for sums; indices are i64.
                    unsafe { *(idxs as *mut i64).add(o) = k as i64 };
                }
            }
        }
    };
    let work = outer_idx.len() * red_count;
    if work >= super::PARALLEL_THRESHOLD && outer_idx.len() > 1 {
        outer_idx
            .par_iter()
            .enumerate()
            .for_each(|(o, &start)| one(o, start));
    } else {
        for (o, &start) in outer_idx.iter().enumerate() {
            one(o, start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CHUNK;
    use crate::{Device, Tensor};

    /// Reductions long enough to be folded in chunks (and in parallel where
    /// there are spare threads) give what one sequential pass gives: the
    /// first index among ties, the first NaN, exact integer sums.
    #[test]
    fn chunked_reductions_match_one_pass() {
        let n = 5 * CHUNK + 123;
        // Stored as [cols, rows] and viewed transposed, so the reduced
        // elements are not contiguous.
        let (rows, cols) = (n / 3, 3);
        let mut data: Vec<f64> = (0..rows * cols)
            .map(|i| ((i * 7919) % 1000) as f64)
            .collect();
        let max = 5000.0;
        let (first, second) = (CHUNK + 17, 4 * CHUNK + 5); // row-major indices of the view
        let at = |k: usize| (k % cols) * rows + k / cols; // storage index of view element k
        data[at(second)] = max;
        data[at(first)] = max;
        let t = Tensor::from_vec(data.clone(), &[cols, rows], Device::Cpu)
            .unwrap()
            .t()
            .unwrap();
        assert!(!t.is_contiguous());
        let view: Vec<f64> = t.to_vec::<f64>().unwrap();
        let total: f64 = view.iter().sum();
        assert_eq!(t.sum(None, false).unwrap().item::<f64>().unwrap(), total);
        assert_eq!(t.max().unwrap().item::<f64>().unwrap(), max);
        assert_eq!(
            t.argmax(None, false).unwrap().item::<i64>().unwrap(),
            first as i64
        );
        let min = view.iter().cloned().fold(f64::INFINITY, f64::min);
        assert_eq!(t.min().unwrap().item::<f64>().unwrap(), min);

        // A NaN in a late chunk is the maximum, and the first NaN's index wins.
        let mut with_nan = data.clone();
        with_nan[at(4 * CHUNK + 9)] = f64::NAN;
        with_nan[at(5 * CHUNK)] = f64::NAN;
        let t = Tensor::from_vec(with_nan, &[cols, rows], Device::Cpu)
            .unwrap()
            .t()
            .unwrap();
        assert!(t.max().unwrap().item::<f64>().unwrap().is_nan());
        assert_eq!(
            t.argmax(None, false).unwrap().item::<i64>().unwrap(),
            (4 * CHUNK + 9) as i64
        );

        // Integer sums are exact whatever the grouping.
        let ints: Vec<i64> = (0..n as i64).map(|i| i * i - 3 * i).collect();
        let t = Tensor::from_vec(ints.clone(), &[n], Device::Cpu).unwrap();
        assert_eq!(
            t.sum(None, false).unwrap().item::<i64>().unwrap(),
            ints.iter().sum::<i64>()
        );
    }
}
