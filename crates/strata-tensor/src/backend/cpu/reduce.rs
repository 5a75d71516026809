//! Reductions: for every output position (the kept dims, row-major), fold the
//! reduced dims in row-major order, so "first" on ties means first in that
//! order. Reduced dims that are contiguous together are merged (which keeps
//! that order), and the innermost one is a plain strided loop.

use crate::backend::cpu::elementwise::base;
use crate::backend::{Arg, ReduceOp};
use crate::dtype::{Arith, Element};
use crate::layout::Layout;
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

/// Merges neighbouring dims `d`, `d + 1` where `stride[d] == stride[d + 1] * shape[d + 1]`
/// (row-major order is preserved); size-1 dims are dropped.
fn merge_row_major(shape: &[usize], strides: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let (mut sh, mut st): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for (&n, &s) in shape.iter().zip(strides) {
        if n == 1 {
            continue;
        }
        if let (Some(ln), Some(&ls)) = (sh.last_mut(), st.last()) {
            if ls == s * n {
                *ln *= n;
                *st.last_mut().unwrap() = s;
                continue;
            }
        }
        sh.push(n);
        st.push(s);
    }
    (sh, st)
}

/// Calls `f(k, x)` for the elements at `src + start + (reduced offsets)`, `k`
/// counting in row-major order of the reduced dims.
///
/// # Safety
/// Every such element must be readable.
#[inline(always)]
unsafe fn fold<T: Copy>(
    src: *const T,
    start: usize,
    shape: &[usize],
    strides: &[usize],
    mut f: impl FnMut(usize, T) -> bool,
) {
    let nd = shape.len();
    if nd == 0 {
        // SAFETY: forwarded contract (a single element).
        f(0, unsafe { *src.add(start) });
        return;
    }
    let (inner_n, inner_s) = (shape[nd - 1], strides[nd - 1]);
    let outer: usize = shape[..nd - 1].iter().product();
    let mut idx = vec![0usize; nd - 1];
    let mut pos = start;
    let mut k = 0;
    for _ in 0..outer {
        for i in 0..inner_n {
            // SAFETY: forwarded contract.
            if !f(k, unsafe { *src.add(pos + i * inner_s) }) {
                return;
            }
            k += 1;
        }
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
    let kept: Vec<usize> = (0..l.ndim()).filter(|d| !dims.contains(d)).collect();
    let red: Vec<usize> = (0..l.ndim()).filter(|d| dims.contains(d)).collect();
    let outer = Layout {
        shape: kept.iter().map(|&d| l.shape[d]).collect(),
        strides: kept.iter().map(|&d| l.strides[d]).collect(),
        offset: 0,
    };
    let red_shape: Vec<usize> = red.iter().map(|&d| l.shape[d]).collect();
    let red_strides: Vec<usize> = red.iter().map(|&d| l.strides[d]).collect();
    let red_count: usize = red_shape.iter().product();
    let (rs, rst) = merge_row_major(&red_shape, &red_strides);
    let outer_idx: Vec<usize> = outer.indices().collect();
    let ptrs = Ptrs(
        base(input) as *const T,
        values.map_or(std::ptr::null_mut(), base),
        indices.map_or(std::ptr::null_mut(), base),
    );
    let count = <T::Acc as Element>::from_scalar(Scalar::Int(red_count as i64));
    let one = |o: usize, start: usize| {
        let (src, vals, idxs) = ptrs.get();
        // SAFETY: `start` plus the reduced offsets are storage indices of the
        // input's own layout (kept index + reduced index), and outputs are
        // contiguous with one element per kept position `o`.
        unsafe {
            match op {
                ReduceOp::Sum | ReduceOp::Mean => {
                    let mut acc = <T::Acc as Arith>::ZERO;
                    fold(src, start, &rs, &rst, |_, x: T| {
                        acc = acc.add(x.to_acc());
                        true
                    });
                    if op == ReduceOp::Mean {
                        acc = acc.div(count);
                    }
                    *(vals as *mut T).add(o) = T::from_acc(acc);
                }
                ReduceOp::Max | ReduceOp::Min => {
                    let mut best: Option<(T, usize)> = None;
                    fold(src, start, &rs, &rst, |k, x: T| {
                        let better = match best {
                            None => true,
                            Some((b, _)) => {
                                x.to_acc().is_nan()
                                    || if op == ReduceOp::Max { x > b } else { x < b }
                            }
                        };
                        if better {
                            best = Some((x, k));
                        }
                        // The first NaN is the extreme: stop there.
                        !x.to_acc().is_nan() || !better
                    });
                    let (b, k) = best.expect("callers reject empty reductions");
                    if !vals.is_null() {
                        *(vals as *mut T).add(o) = b;
                    }
                    if !idxs.is_null() {
                        *(idxs as *mut i64).add(o) = k as i64;
                    }
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
    use super::merge_row_major;

    #[test]
    fn merging_keeps_row_major_order() {
        assert_eq!(
            merge_row_major(&[2, 3, 4], &[12, 4, 1]),
            (vec![24], vec![1])
        );
        assert_eq!(merge_row_major(&[3, 4], &[1, 3]), (vec![3, 4], vec![1, 3]));
        assert_eq!(
            merge_row_major(&[3, 1, 4], &[8, 99, 2]),
            (vec![12], vec![2])
        );
    }
}
