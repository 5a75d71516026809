//! Reductions: for every output position (the kept dims, row-major), fold the
//! reduced dims in row-major order, so "first" on ties means first in that order.

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
    let inner = Layout {
        shape: red.iter().map(|&d| l.shape[d]).collect(),
        strides: red.iter().map(|&d| l.strides[d]).collect(),
        offset: 0,
    };
    let inner_idx: Vec<usize> = inner.indices().collect();
    let outer_idx: Vec<usize> = outer.indices().collect();
    let ptrs = Ptrs(
        base(input) as *const T,
        values.map_or(std::ptr::null_mut(), base),
        indices.map_or(std::ptr::null_mut(), base),
    );
    let count = <T::Acc as Element>::from_scalar(Scalar::Int(inner_idx.len() as i64));
    let one = |o: usize, start: usize| {
        let (src, vals, idxs) = ptrs.get();
        // SAFETY: `start + r` for r in `inner_idx` are storage indices of the
        // input's own layout (kept index + reduced index), and outputs are
        // contiguous with one element per kept position `o`.
        unsafe {
            let at = |r: usize| *src.add(start + r);
            match op {
                ReduceOp::Sum | ReduceOp::Mean => {
                    let mut acc = <T::Acc as Arith>::ZERO;
                    for &r in &inner_idx {
                        acc = acc.add(at(r).to_acc());
                    }
                    if op == ReduceOp::Mean {
                        acc = acc.div(count);
                    }
                    *(vals as *mut T).add(o) = T::from_acc(acc);
                }
                ReduceOp::Max | ReduceOp::Min => {
                    let mut best = at(inner_idx[0]);
                    let mut best_k = 0usize;
                    let mut best_nan = best.to_acc().is_nan();
                    for (k, &r) in inner_idx.iter().enumerate().skip(1) {
                        if best_nan {
                            break;
                        }
                        let x = at(r);
                        let better = x.to_acc().is_nan()
                            || if op == ReduceOp::Max {
                                x > best
                            } else {
                                x < best
                            };
                        if better {
                            best = x;
                            best_k = k;
                            best_nan = x.to_acc().is_nan();
                        }
                    }
                    if !vals.is_null() {
                        *(vals as *mut T).add(o) = best;
                    }
                    if !idxs.is_null() {
                        *(idxs as *mut i64).add(o) = best_k as i64;
                    }
                }
            }
        }
    };
    let work = outer_idx.len() * inner_idx.len();
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
