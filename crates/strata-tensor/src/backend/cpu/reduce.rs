//! Reductions: for every output position (the kept dims, row-major), fold the
//! reduced dims in row-major order, so "first" on ties means first in that
//! order. The loops come from the shared [`ReducePlan`] (dims contiguous
//! together merged); the innermost reduced dim is a plain strided loop.
//! Float sums add in the order of PyTorch's CPU kernel, so that values which
//! cancel give PyTorch's answer: a contiguous run per output as 256-bit
//! vectors ([`sum_run`]), one strided run per output along the input's
//! smallest stride (an expanded tensor, a sliced or transposed row) as four
//! interleaved cascades ([`cascade_row_sum`]); a float sum or mean of any
//! other layout (not split among threads) as PyTorch's TensorIterator
//! orders its dims and its `cascade_sum` loops over them ([`sum_as_pytorch`];
//! f16/bf16 on the input converted to f32 where PyTorch converts it,
//! [`widened_as_pytorch`]).

use crate::backend::cpu::elementwise::base;
use crate::backend::{Arg, ReduceOp};
use crate::dtype::{Arith, DType, Element};
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

/// At most this many chunks per output: past `CHUNK * MAX_CHUNKS` elements
/// (2^30) the chunks grow instead, so that the list of partial results stays
/// small whatever the count (an expanded view can present 2^62 elements to
/// reduce, and a list of one partial result per 2^14 of them could not be
/// allocated).
const MAX_CHUNKS: usize = 1 << 16;

/// The ranges `chunked` splits `0 .. count` into: `CHUNK` elements each, or
/// more where that would make more than [`MAX_CHUNKS`] of them.
fn chunk_ranges(count: usize) -> impl Iterator<Item = (usize, usize)> {
    let size = CHUNK.max(count.div_ceil(MAX_CHUNKS));
    (0..count.div_ceil(size)).map(move |c| (c * size, ((c + 1) * size).min(count)))
}

/// `f` applied to the ranges of `0 .. count` ([`chunk_ranges`]), in parallel
/// where `parallel`; the results in range order.
fn chunked<R: Send>(
    count: usize,
    parallel: bool,
    f: impl Fn((usize, usize)) -> R + Sync + Send,
) -> Vec<R> {
    let ranges = chunk_ranges(count);
    if parallel {
        ranges.collect::<Vec<_>>().into_par_iter().map(f).collect()
    } else {
        ranges.map(f).collect()
    }
}

/// The elements `start + range.0 .. start + range.1` of `src` as a slice.
///
/// # Safety
/// They must be readable and not written while the slice lives.
#[inline(always)]
unsafe fn run_slice<'a, T>(src: *const T, start: usize, range: (usize, usize)) -> &'a [T] {
    // SAFETY: forwarded contract.
    unsafe { std::slice::from_raw_parts(src.add(start + range.0), range.1 - range.0) }
}

/// Independent accumulators of the vectorised extreme folds (several
/// vectors' worth, so consecutive compares do not wait on each other).
const LANES: usize = 16;

/// The sum of a contiguous run in `Acc`, added in the order of PyTorch's CPU
/// kernel for contiguous runs (its `vectorized_inner_sum` with 256-bit
/// vectors), so that values which cancel give PyTorch's answer: the run is
/// read as vectors of 32 bytes (4 f64, 8 f32, 16 of the 2-byte floats, whose
/// two halves are widened to f32 and added lane by lane into 8 lanes); each
/// lane is summed over the vectors as [`cascade_row_sum`] sums a strided run;
/// the elements past the last whole vector are added first, then the lanes
/// in order. A run shorter than one vector is summed as a strided run.
/// (Integer sums are exact in any order.) With `widened`, the values are
/// summed as f32 values would be (8 lanes, no halves).
#[inline(always)]
pub(super) fn sum_run<T: Element>(x: &[T], widened: bool) -> T::Acc {
    match std::mem::size_of::<T>() {
        8 => lane_cascade::<T, 4, 1>(x),
        4 => lane_cascade::<T, 8, 1>(x),
        2 if widened => lane_cascade::<T, 8, 1>(x),
        2 => lane_cascade::<T, 8, 2>(x),
        _ => lane_cascade::<T, 32, 1>(x),
    }
}

/// [`sum_run`] with vectors of `W * HALVES` elements folded into `W` lanes
/// (element `l + W h` of a vector goes to lane `l`, the `HALVES` added first).
#[inline(always)]
fn lane_cascade<T: Element, const W: usize, const HALVES: usize>(x: &[T]) -> T::Acc {
    let zero = <T::Acc as Arith>::ZERO;
    let len = W * HALVES;
    if x.len() < len {
        return cascade_row_sum(x.len(), |e| x[e]);
    }
    let vectors = x.len() / len;
    // One vector, its halves added lane by lane.
    let lanes = interleaved_cascade(vectors, |v: usize| -> [T::Acc; W] {
        let at = &x[v * len..(v + 1) * len];
        let mut out = [zero; W];
        for (l, o) in out.iter_mut().enumerate() {
            *o = at[l].to_acc();
            for h in 1..HALVES {
                *o = o.add(at[l + W * h].to_acc());
            }
        }
        out
    });
    let mut s = zero;
    for &e in &x[vectors * len..] {
        s = s.add(e.to_acc());
    }
    for l in lanes {
        s = s.add(l);
    }
    s
}

/// The sum in `Acc` of the `n` elements `x(0) .. x(n - 1)` of a strided run,
/// added in the order of PyTorch's CPU kernel for such a run (its
/// `row_sum`), so that values which cancel (1e30 against -1e30) or sum to a
/// rounding boundary give PyTorch's answer ([`interleaved_cascade`] of the
/// elements).
#[inline(always)]
pub(super) fn cascade_row_sum<T: Element>(n: usize, x: impl Fn(usize) -> T) -> T::Acc {
    interleaved_cascade(n, |e| [x(e).to_acc()])[0]
}

/// log2 of how many items the lowest level of PyTorch's four-level
/// cascade sums before moving up (its `cascade_sum`): 4, or a quarter of
/// `CeilLog2(count)` (1 up to 2, else the bits of `count - 1`) when larger.
fn cascade_power(count: usize) -> u32 {
    let ceil_log2 = if count <= 2 {
        1
    } else {
        64 - (count as u64 - 1).leading_zeros()
    };
    4.max(ceil_log2 / 4)
}

/// The sum of the `count` items `item(0) .. item(count - 1)` of one column,
/// in the order in which PyTorch's CPU `multi_row_sum` adds each of the
/// columns it sums together (its outer reductions, for the columns in whole
/// groups of four or four vectors): one cascade of four levels, without the
/// four interleaved partial sums of [`interleaved_cascade`] (every 2^p items
/// the lowest level moves up, a level moving further up when its bits of
/// the item count are all zero; `p` is 4, or a quarter of the count's log2),
/// the items past the last whole step added to the lowest level, and the
/// levels added lowest first.
pub(super) fn level_cascade<A: Arith>(count: usize, item: impl Fn(usize) -> A) -> A {
    const LEVELS: usize = 4;
    let power = cascade_power(count);
    let step = 1usize << power;
    let mask = step - 1;
    let mut acc = [A::ZERO; LEVELS];
    let mut i = 0;
    while i + step <= count {
        for _ in 0..step {
            acc[0] = acc[0].add(item(i));
            i += 1;
        }
        for j in 1..LEVELS {
            acc[j] = acc[j].add(std::mem::replace(&mut acc[j - 1], A::ZERO));
            if i & (mask << (j as u32 * power)) != 0 {
                break;
            }
        }
    }
    while i < count {
        acc[0] = acc[0].add(item(i));
        i += 1;
    }
    let [mut s, higher @ ..] = acc;
    for a in higher {
        s = s.add(a);
    }
    s
}

/// The `W` lane sums of `count` items of `W` lanes each, in the order of
/// PyTorch's CPU `row_sum` (on elements, `W` = 1, or on vectors): items
/// `4i + k` go to four interleaved partial sums `k`, each a cascade of four
/// levels (every 2^p rows of four the lowest level moves up, and a level
/// moves further up when its bits of the row count are all zero; `p` is 4,
/// or a quarter of the rows' log2 for long runs); the levels are added lowest
/// first, the items past the last whole row go to partial sum 0, and the
/// four partial sums are added in order.
#[inline(always)]
fn interleaved_cascade<A: Arith, const W: usize>(
    count: usize,
    item: impl Fn(usize) -> [A; W],
) -> [A; W] {
    const ILP: usize = 4;
    const LEVELS: usize = 4;
    let zero = A::ZERO;
    let rows = count / ILP;
    let power = cascade_power(rows);
    let step = 1usize << power;
    let mask = step - 1;
    let add = |p: &mut [A; W], v: [A; W]| {
        for (a, e) in p.iter_mut().zip(v) {
            *a = a.add(e);
        }
    };
    let mut acc = [[[zero; W]; ILP]; LEVELS];
    let add_row = |acc: &mut [[A; W]; ILP], i: usize| {
        for (k, p) in acc.iter_mut().enumerate() {
            add(p, item(i * ILP + k));
        }
    };
    let mut i = 0;
    while i + step <= rows {
        for _ in 0..step {
            add_row(&mut acc[0], i);
            i += 1;
        }
        for j in 1..LEVELS {
            let (below, above) = acc.split_at_mut(j);
            for (up, down) in above[0].iter_mut().zip(below[j - 1].iter_mut()) {
                add(up, std::mem::replace(down, [zero; W]));
            }
            if i & (mask << (j as u32 * power)) != 0 {
                break;
            }
        }
    }
    while i < rows {
        add_row(&mut acc[0], i);
        i += 1;
    }
    let [mut p, higher @ ..] = acc;
    for level in higher {
        for (a, b) in p.iter_mut().zip(level) {
            add(a, b);
        }
    }
    for v in rows * ILP..count {
        add(&mut p[0], item(v));
    }
    let [mut lanes, others @ ..] = p;
    for q in others {
        add(&mut lanes, q);
    }
    lanes
}

/// The first NaN of a contiguous run, else its largest (`max`) or smallest
/// element, with the position of its first occurrence where `want_index`
/// (else position 0 for a value that is not NaN: values alone do not need
/// it). `None` for an empty run.
///
/// The extreme is found with `LANES` running extremes (a vectorisable loop of
/// compares and selects that NaNs never win) and a NaN flag; the position is
/// then the first element equal to it (or the first NaN).
#[inline(always)]
fn extreme_run<T: Element>(x: &[T], max: bool, want_index: bool) -> Option<(T, usize)> {
    let first = *x.first()?;
    let mut best = [first; LANES];
    let mut nan = false;
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..LANES {
            let v = c[j];
            nan |= v.to_acc().is_nan();
            let better = if max { v > best[j] } else { v < best[j] };
            best[j] = if better { v } else { best[j] };
        }
    }
    for &v in rest {
        nan |= v.to_acc().is_nan();
        let better = if max { v > best[0] } else { v < best[0] };
        best[0] = if better { v } else { best[0] };
    }
    if nan || first.to_acc().is_nan() {
        let k = x.iter().position(|v| v.to_acc().is_nan()).unwrap_or(0);
        return Some((x[k], k));
    }
    let mut b = best[0];
    for &v in &best[1..] {
        if if max { v > b } else { v < b } {
            b = v;
        }
    }
    // Equal to the extreme: the first such element (`-0.0 == 0.0`, as the
    // one-pass fold keeps the first of equal values).
    if !want_index {
        return Some((b, 0));
    }
    let k = x.iter().position(|&v| v == b).unwrap_or(0);
    Some((x[k], k))
}

/// PyTorch's `max_all`/`min_all` of `n` contiguous floats at `x` (one
/// thread, AVX2), which decides which of equal values (+0.0, -0.0) comes
/// back: `reduce_all_kernel` runs `vec::reduce_all` with the vectorised
/// `maximum(acc, x)`, which keeps `x` unless `acc > x` (`minimum`: unless
/// `acc < x`; NaN wins). Lane `i % L` folds element `i` in order (L = 8 for
/// f32, 4 for f64; f16/bf16 load 16 and widen them to two f32 vectors, lanes
/// `i % 16` and then lane `j` with lane `j + 8`), and the lanes are joined
/// by `vec_reduce_all`: for f32 a tree (lane `j` with `j + 4`, then `j + 2`,
/// then `j + 1`, the AVX2 shuffles), for f64 one after another. Fewer
/// elements than a vector fold one after another (f16/bf16 of 9 to 15: the
/// high half into the low first). This fold keeps the last of the equal
/// extremes in each lane, so lane-aligned chunks fold in parallel to the
/// same result.
///
/// # Safety
/// `x` points to `n` (at least 1) readable elements of `T`.
unsafe fn extreme_all_as_pytorch<T: Element>(
    x: *const T,
    n: usize,
    max: bool,
    parallel: bool,
) -> T {
    // SAFETY: forwarded contract.
    let x = unsafe { std::slice::from_raw_parts(x, n) };
    // NaN wins wherever it is (its payload is not PyTorch's concern here):
    // the first one is returned, as strata's other extremes do.
    #[allow(clippy::eq_op)]
    let is_nan = |v: &T| *v != *v;
    let folded = if max {
        fold_lanes::<T, true>(x, parallel)
    } else {
        fold_lanes::<T, false>(x, parallel)
    };
    folded.unwrap_or_else(|| *x.iter().find(|v| is_nan(v)).expect("a NaN"))
}

/// [`extreme_all_as_pytorch`] of `x`: `MAX` or min, `None` if `x` holds a
/// NaN. Compared in `T` (f16/bf16 compare as their f32 values do).
fn fold_lanes<T: Element, const MAX: bool>(x: &[T], parallel: bool) -> Option<T> {
    // The vectorised op: keeps `acc` only where strictly better.
    #[inline(always)]
    fn f<T: Element, const MAX: bool>(acc: T, v: T) -> T {
        if (MAX && acc > v) || (!MAX && acc < v) {
            acc
        } else {
            v
        }
    }
    let n = x.len();
    let seq = |xs: &mut dyn Iterator<Item = T>| {
        let first = xs.next().expect("one element at least");
        xs.fold(first, f::<T, MAX>)
    };
    let lanes_n = match T::DTYPE {
        DType::F64 => 4,
        DType::F32 => 8,
        _ => 16,
    };
    #[allow(clippy::eq_op)]
    let is_nan = |v: &T| *v != *v;
    if n < lanes_n {
        if x.iter().any(is_nan) {
            return None;
        }
        if lanes_n == 16 && n > 8 {
            let mut lo = (0..8).map(|j| {
                if j + 8 < n {
                    f::<T, MAX>(x[j], x[j + 8])
                } else {
                    x[j]
                }
            });
            return Some(seq(&mut lo));
        }
        return Some(seq(&mut x.iter().copied()));
    }
    // Lane folds of lane-aligned ranges (CHUNK is a multiple of 16).
    let lanes_of = |range: (usize, usize)| -> ([T; 16], bool) {
        let part = &x[range.0..range.1];
        let mut lanes = [part[0]; 16];
        let init = lanes_n.min(part.len());
        lanes[..init].copy_from_slice(&part[..init]);
        let rest = &part[init..];
        let whole = rest.len() - rest.len() % lanes_n;
        let mut nan = part[..init].iter().chain(&rest[whole..]).any(is_nan);
        nan |= match lanes_n {
            4 => fold_chunks::<T, MAX, 4>(&mut lanes, &rest[..whole]),
            8 => fold_chunks::<T, MAX, 8>(&mut lanes, &rest[..whole]),
            _ => fold_chunks::<T, MAX, 16>(&mut lanes, &rest[..whole]),
        };
        for (l, &v) in lanes.iter_mut().zip(&rest[whole..]) {
            *l = f::<T, MAX>(*l, v);
        }
        (lanes, nan)
    };
    // A chunk shorter than a vector happens only last; its lanes beyond its
    // length are untouched (PyTorch's masked `Vec::set`).
    let parts = chunked(n, parallel, |r| (r.1 - r.0, lanes_of(r)));
    if parts.iter().any(|(_, (_, nan))| *nan) {
        return None;
    }
    let parts: Vec<(usize, [T; 16])> = parts.into_iter().map(|(len, (l, _))| (len, l)).collect();
    let mut lanes = parts[0].1;
    for (len, p) in &parts[1..] {
        for j in 0..lanes_n.min(*len) {
            lanes[j] = f::<T, MAX>(lanes[j], p[j]);
        }
    }
    let tree8 = |v: [T; 8]| {
        let w: [T; 4] = std::array::from_fn(|j| f::<T, MAX>(v[j], v[j + 4]));
        f::<T, MAX>(f::<T, MAX>(w[0], w[2]), f::<T, MAX>(w[1], w[3]))
    };
    Some(match lanes_n {
        4 => seq(&mut lanes[..4].iter().copied()),
        8 => tree8(std::array::from_fn(|j| lanes[j])),
        _ => tree8(std::array::from_fn(|j| f::<T, MAX>(lanes[j], lanes[j + 8]))),
    })
}

/// `lanes[j] = f(lanes[j], v)` for every element `v` of `xs` at `j` modulo
/// `L` (`xs` a whole number of `L`-element vectors); whether one was NaN.
#[inline(always)]
fn fold_chunks<T: Element, const MAX: bool, const L: usize>(lanes: &mut [T; 16], xs: &[T]) -> bool {
    let mut acc: [T; L] = std::array::from_fn(|j| lanes[j]);
    let mut nan = [false; L];
    for c in xs.chunks_exact(L) {
        for j in 0..L {
            let (a, v) = (acc[j], c[j]);
            #[allow(clippy::eq_op)]
            let v_nan = v != v;
            nan[j] |= v_nan;
            acc[j] = if (MAX && a > v) || (!MAX && a < v) {
                a
            } else {
                v
            };
        }
    }
    lanes[..L].copy_from_slice(&acc);
    nan.iter().any(|&b| b)
}

/// Columns per task of [`reduce_cols`].
const COL_BLOCK: usize = 256;

/// The kept innermost dim (`ncols` columns, `ks` apart: contiguous, or for
/// sums any stride below `rs`) and every output folds `nrows` elements `rs`
/// apart (a reduction over outer dims): each task folds a block of
/// neighbouring columns row by row (contiguous, vectorisable loads where
/// `ks` is 1), tasks in parallel on large inputs. Row order is kept, so ties
/// go to the first row and the first NaN wins.
///
/// # Safety
/// The input's layout (the plan) must address readable elements of its
/// storage; the outputs in `ptrs` (null where absent) must be contiguous with
/// one element per kept position and not otherwise accessed meanwhile.
unsafe fn reduce_cols<T: Element>(
    op: ReduceOp,
    ptrs: &Ptrs<T>,
    plan: &ReducePlan,
    ncols: usize,
    nrows: usize,
    rs: usize,
    ks: usize,
) where
    T::Acc: Element,
{
    let groups = ReducePlan {
        kept: plan.kept[..plan.kept.len() - 1].to_vec(),
        reduced: Vec::new(),
        outputs: plan.outputs / ncols,
        count: 1,
    };
    let bases: Vec<usize> = groups.output_offsets().collect();
    let blocks = ncols.div_ceil(COL_BLOCK);
    let count = <T::Acc as Element>::from_scalar(Scalar::Int(nrows as i64));
    // PyTorch's sum over the rows (its outer reduction, `cascade_sum`) walks
    // the columns in groups: with at least one vector of them (32 bytes of
    // `T`) in groups of four vectors of the accumulation type, else in
    // groups of four; a group's columns are summed by `multi_row_sum` (one
    // cascade of four levels each, [`level_cascade`]), the columns past the
    // last whole group by `row_sum` ([`cascade_row_sum`]'s order). Summed
    // row by row in order, as before, about a third of the columns of a
    // random f32 `[3, 7, 20]` summed over dim 1 differed from PyTorch 2.15
    // in the last place. (COL_BLOCK is a multiple of every group.) Columns
    // that are not contiguous (`ks` > 1) PyTorch sums in groups of four
    // (`scalar_outer_sum`): 2 in 3 columns of a random f32 [20, 270] view
    // stepping by 2 differed in the last place when summed in row order.
    let grouped = if ks == 1 && ncols >= 32 / std::mem::size_of::<T>().max(1) {
        let group = 4 * (32 / std::mem::size_of::<T::Acc>().max(1));
        ncols / group * group
    } else {
        ncols / 4 * 4
    };
    let power = cascade_power(nrows);
    let step = 1usize << power;
    let mask = step - 1;
    let task = |t: usize| {
        let (src, vals, idxs) = ptrs.get();
        let (g, b) = (t / blocks, t % blocks);
        let c0 = b * COL_BLOCK;
        let cb = COL_BLOCK.min(ncols - c0);
        let start = bases[g] + c0 * ks;
        let out = g * ncols + c0;
        // SAFETY: row r of this block is the `cb` elements `ks` apart at
        // `start + r * rs`, elements of the input's layout (kept position
        // plus reduced offset); copied out where they are not contiguous.
        let row = |r: usize| -> std::borrow::Cow<'_, [T]> {
            unsafe {
                if ks == 1 {
                    std::borrow::Cow::Borrowed(std::slice::from_raw_parts(
                        src.add(start + r * rs),
                        cb,
                    ))
                } else {
                    (0..cb).map(|c| *src.add(start + r * rs + c * ks)).collect()
                }
            }
        };
        match op {
            ReduceOp::Sum | ReduceOp::Mean => {
                let zero = <T::Acc as Arith>::ZERO;
                // The columns of whole groups: PyTorch's `multi_row_sum`, the
                // rows added to all of them at once (`level_cascade` for
                // each); the others one by one as its `row_sum` adds them.
                let g = grouped.saturating_sub(c0).min(cb);
                let mut total = [zero; COL_BLOCK];
                let mut acc = [[zero; COL_BLOCK]; 4];
                let add_row = |a: &mut [T::Acc; COL_BLOCK], r: usize| {
                    for (p, &x) in a[..g].iter_mut().zip(row(r).iter()) {
                        *p = p.add(x.to_acc());
                    }
                };
                let mut i = 0;
                while i + step <= nrows {
                    for _ in 0..step {
                        add_row(&mut acc[0], i);
                        i += 1;
                    }
                    for j in 1..4 {
                        let (below, above) = acc.split_at_mut(j);
                        for (up, down) in above[0][..g].iter_mut().zip(below[j - 1][..g].iter_mut())
                        {
                            *up = up.add(std::mem::replace(down, zero));
                        }
                        if i & (mask << (j as u32 * power)) != 0 {
                            break;
                        }
                    }
                }
                while i < nrows {
                    add_row(&mut acc[0], i);
                    i += 1;
                }
                for (k, t) in total[..g].iter_mut().enumerate() {
                    *t = acc[0][k].add(acc[1][k]).add(acc[2][k]).add(acc[3][k]);
                }
                // The columns past the last whole group (fewer than 32),
                // each as `cascade_row_sum` adds it, side by side: rows
                // `4i + q` go to partial sums `q`, each a cascade of four
                // levels over the groups of four rows.
                let rest = cb - g;
                if rest > 0 {
                    let groups4 = nrows / 4;
                    let lg = if groups4 <= 2 {
                        1
                    } else {
                        64 - (groups4 as u64 - 1).leading_zeros()
                    };
                    let p4 = 4.max(lg / 4);
                    let (step4, mask4) = (1usize << p4, (1usize << p4) - 1);
                    let mut lv = [[[zero; 32]; 4]; 4];
                    let add_group = |a: &mut [[T::Acc; 32]; 4], i: usize| {
                        for (q, part) in a.iter_mut().enumerate() {
                            for (p, &x) in part[..rest].iter_mut().zip(&row(4 * i + q)[g..]) {
                                *p = p.add(x.to_acc());
                            }
                        }
                    };
                    let mut i = 0;
                    while i + step4 <= groups4 {
                        for _ in 0..step4 {
                            add_group(&mut lv[0], i);
                            i += 1;
                        }
                        for j in 1..4 {
                            let (below, above) = lv.split_at_mut(j);
                            for (up, down) in above[0].iter_mut().zip(below[j - 1].iter_mut()) {
                                for (u, d) in up[..rest].iter_mut().zip(down[..rest].iter_mut()) {
                                    *u = u.add(std::mem::replace(d, zero));
                                }
                            }
                            if i & (mask4 << (j as u32 * p4)) != 0 {
                                break;
                            }
                        }
                    }
                    while i < groups4 {
                        add_group(&mut lv[0], i);
                        i += 1;
                    }
                    let [mut p, higher @ ..] = lv;
                    for level in higher {
                        for (a, b) in p.iter_mut().zip(level) {
                            for (x, y) in a[..rest].iter_mut().zip(&b[..rest]) {
                                *x = x.add(*y);
                            }
                        }
                    }
                    for r in groups4 * 4..nrows {
                        for (x, &v) in p[0][..rest].iter_mut().zip(&row(r)[g..]) {
                            *x = x.add(v.to_acc());
                        }
                    }
                    for c in 0..rest {
                        total[g + c] = p[0][c].add(p[1][c]).add(p[2][c]).add(p[3][c]);
                    }
                }
                for (j, &t) in total[..cb].iter().enumerate() {
                    let v = if op == ReduceOp::Mean {
                        t.div(count)
                    } else {
                        t
                    };
                    // SAFETY: output `out + j` is this task's own position.
                    unsafe { *(vals as *mut T).add(out + j) = T::from_acc(v) };
                }
            }
            ReduceOp::Max | ReduceOp::Min => {
                let max = op == ReduceOp::Max;
                let mut best = [row(0)[0]; COL_BLOCK];
                best[..cb].copy_from_slice(&row(0));
                let mut at = [0usize; COL_BLOCK];
                for r in 1..nrows {
                    for ((b, k), &x) in best[..cb].iter_mut().zip(&mut at[..cb]).zip(row(r).iter())
                    {
                        let (xn, bn) = (x.to_acc().is_nan(), b.to_acc().is_nan());
                        let take = !bn && (xn || if max { x > *b } else { x < *b });
                        if take {
                            *b = x;
                            *k = r;
                        }
                    }
                }
                for j in 0..cb {
                    if !vals.is_null() {
                        // SAFETY: as for sums.
                        unsafe { *(vals as *mut T).add(out + j) = best[j] };
                    }
                    if !idxs.is_null() {
                        // SAFETY: as for sums; indices are i64.
                        unsafe { *(idxs as *mut i64).add(out + j) = at[j] as i64 };
                    }
                }
            }
        }
    };
    let tasks = bases.len() * blocks;
    if plan.outputs * nrows >= super::PARALLEL_THRESHOLD && tasks > 1 {
        (0..tasks).into_par_iter().for_each(task);
    } else {
        (0..tasks).for_each(task);
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
    // Each output's reduced elements are contiguous: folded as slices.
    let contiguous = match plan.reduced.as_slice() {
        [] => true,
        [r] => r.stride == 1,
        _ => false,
    };
    let want_index = indices.is_some();
    // f32/f64 sums that `sum_as_pytorch` below takes in PyTorch's order.
    let as_pytorch =
        matches!(op, ReduceOp::Sum | ReduceOp::Mean) && matches!(T::DTYPE, DType::F32 | DType::F64);
    if let (Some(kept), [r]) = (plan.kept.last(), plan.reduced.as_slice()) {
        let sum = matches!(op, ReduceOp::Sum | ReduceOp::Mean);
        // A reduced dim of stride 0 (an expanded input) comes before the
        // columns in PyTorch's loop, which then sums each column as a row
        // (`row_sum`) unless a vector of them is contiguous: left to
        // `sum_as_pytorch` (summed in groups of four columns here, 9 copies
        // of one f32 were an ulp off PyTorch: fuzz_ops.s3601o_sum_order_0676).
        if kept.stride == 1
            && r.stride != 1
            && !(as_pytorch && r.stride == 0)
            && (kept.size >= 8 || sum)
            && kept.size > 0
            && r.size > 0
        {
            // SAFETY: forwarded from the caller (the backend's `reduce`
            // contract: the input's layout addresses its storage, the
            // outputs are contiguous with one element per kept position).
            unsafe { reduce_cols::<T>(op, &ptrs, &plan, kept.size, r.size, r.stride, 1) };
            return;
        }
        // Columns `kept.stride` apart, the reduced dim's stride larger:
        // PyTorch's `scalar_outer_sum` (a 2-byte float's mean excepted,
        // which PyTorch sums widened to f32 as below).
        let widened_mean = op == ReduceOp::Mean && std::mem::size_of::<T>() == 2;
        if sum
            && !widened_mean
            && kept.stride > 1
            && r.stride > kept.stride
            && kept.size > 0
            && r.size > 0
        {
            // SAFETY: as above; the kept dim's elements are `kept.stride`
            // apart.
            unsafe { reduce_cols::<T>(op, &ptrs, &plan, kept.size, r.size, r.stride, kept.stride) };
            return;
        }
    }
    let split = red_count >= 2 * CHUNK && outer_idx.len() < threads;
    // One strided run per output, with the smallest stride of the input (or
    // a single output): summed in PyTorch's order for such runs. (Runs along
    // an outer dim, and runs of several dims, are folded in order.)
    let strided_run = match (
        plan.reduced.as_slice(),
        plan.kept.iter().map(|d| d.stride).min(),
    ) {
        ([r], kept) => {
            r.stride != 1 && !split && kept.is_none_or(|k| r.stride < k || plan.outputs == 1)
        }
        _ => false,
    };
    // PyTorch takes a 2-byte float's mean as the sum of its values widened
    // to f32, in f32's order.
    let widened = op == ReduceOp::Mean && std::mem::size_of::<T>() == 2;
    // An f32/f64 sum whose outputs are not each one contiguous run of at
    // least a vector: in the order of PyTorch's CPU kernel for any layout
    // ([`sum_as_pytorch`]; several reduced dims that do not merge, such as
    // an expanded, stepped or transposed input summed over two dims, were
    // folded in row-major order before, which differed from PyTorch in the
    // last place). A reduction split among threads keeps its chunks.
    let vector = 32 / std::mem::size_of::<T>().max(1);
    if as_pytorch
        && !split
        && !(contiguous && red_count >= vector)
        && red_count > 0
        && !outer_idx.is_empty()
    {
        // SAFETY: the input's layout addresses readable elements of its
        // storage from `ptrs.0` (the backend's `reduce` contract).
        let sums = unsafe { sum_as_pytorch::<T>(ptrs.0, &l.shape, &l.strides, dims, vector) };
        let (_, vals, _) = ptrs.get();
        for (o, mut acc) in sums.into_iter().enumerate() {
            if op == ReduceOp::Mean {
                acc = acc.div(count);
            }
            // SAFETY: outputs are contiguous with one element per kept
            // position, in row-major order of the kept dims.
            unsafe { *(vals as *mut T).add(o) = T::from_acc(acc) };
        }
        return;
    }
    // An f16/bf16 sum or mean that is not one contiguous or strided run per
    // output: as PyTorch's CPU computes it. A mean, and a sum whose first
    // two TensorIterator dims are both reduced (its `should_use_acc_buffer`),
    // sum the input converted to f32 (`self.to(Float)`: the same strides
    // where the input is dense, else dense in the input's stride order) in
    // f32's order, rounding once; any other sum runs `cascade_sum` on the
    // f16/bf16 input, rounding each partial sum it adds into an output. (Folded in
    // row-major order before: an expanded bf16 holding 3.4e38 twice and
    // -inf summed to NaN where PyTorch's order gives -inf,
    // fuzz_ops.s3600o_sum_order_0530.)
    if matches!(op, ReduceOp::Sum | ReduceOp::Mean)
        && matches!(T::DTYPE, DType::F16 | DType::BF16)
        && !split
        && !contiguous
        && !strided_run
        && red_count > 0
        && !outer_idx.is_empty()
    {
        let (it, outputs) = pytorch_reduce_dims(&l.shape, &l.strides, dims);
        let sums = if op == ReduceOp::Mean || (it[0][2] == 0 && it[1][2] == 0) {
            // SAFETY: the input's layout addresses readable elements of its
            // storage from `ptrs.0` (the backend's `reduce` contract).
            let (buf, strides) = unsafe { widened_as_pytorch::<T>(ptrs.0, &l.shape, &l.strides) };
            // SAFETY: `buf` holds every element `strides` address.
            unsafe { sum_as_pytorch::<f32>(buf.as_ptr(), &l.shape, &strides, dims, 8) }
        } else {
            // SAFETY: as above.
            let s = unsafe { sum_over_dims::<T>(ptrs.0, &it, outputs, 16, true) };
            s.into_iter().map(|a| float_of(a.to_scalar())).collect()
        };
        let (_, vals, _) = ptrs.get();
        for (o, mut acc) in sums.into_iter().enumerate() {
            if op == ReduceOp::Mean {
                acc /= red_count as f32;
            }
            // SAFETY: outputs are contiguous with one element per kept
            // position, in row-major order of the kept dims.
            unsafe { *(vals as *mut T).add(o) = T::from_scalar(Scalar::Float(f64::from(acc))) };
        }
        return;
    }
    let one = |o: usize, start: usize| {
        let (_, vals, idxs) = ptrs.get();
        match op {
            ReduceOp::Sum | ReduceOp::Mean => {
                let mut acc = if strided_run {
                    let (src, _, _) = ptrs.get();
                    let stride = rst[0];
                    // SAFETY: `start` plus multiples of the reduced stride
                    // below the count are storage indices of the input's own
                    // layout.
                    let at = |e: usize| unsafe { *src.add(start + e * stride) };
                    if widened {
                        // Widening to f32 copies such a run (never dense)
                        // contiguously.
                        let run: Vec<T> = (0..red_count).map(at).collect();
                        sum_run(&run, true)
                    } else {
                        cascade_row_sum(red_count, at)
                    }
                } else {
                    let parts = chunked(red_count, split, |range| {
                        let (src, _, _) = ptrs.get();
                        if contiguous {
                            // SAFETY: the reduced elements of this output are
                            // the `red_count` contiguous elements from `start`.
                            let run = unsafe { run_slice(src, start, range) };
                            return sum_run(run, widened);
                        }
                        let mut acc = <T::Acc as Arith>::ZERO;
                        // SAFETY: `start` plus the reduced offsets are storage
                        // indices of the input's own layout (kept index +
                        // reduced index).
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
                    acc
                };
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
                if contiguous && !want_index && outer_idx.len() == 1 && T::DTYPE.is_float() {
                    // max()/min() of everything, the caller's input row-major.
                    let (src, _, _) = ptrs.get();
                    // SAFETY: as for sums.
                    let b = unsafe {
                        extreme_all_as_pytorch::<T>(
                            src.add(start),
                            red_count,
                            op == ReduceOp::Max,
                            split,
                        )
                    };
                    // SAFETY: as for sums.
                    unsafe { *(vals as *mut T).add(o) = b };
                    return;
                }
                let parts = chunked(red_count, split, |range| {
                    let (src, _, _) = ptrs.get();
                    if contiguous {
                        // SAFETY: as for sums.
                        let run = unsafe { run_slice(src, start, range) };
                        return extreme_run(run, op == ReduceOp::Max, want_index)
                            .map(|(x, k)| (x, k + range.0));
                    }
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

/// The sums of a float input over `dims` (one per output, in row-major
/// order of the kept dims), added in the order of PyTorch's single-threaded
/// CPU kernel for any layout: its TensorIterator's dims, ordered as
/// `reorder_dimensions` orders a reduction's (reduced dims first; then by
/// the output's strides, then the input's, a stride 0 deciding nothing, an
/// insertion sort from the last dim that stops at the first dim it must not
/// pass) and merged where neighbours walk memory as one dim for both
/// operands (`coalesce_dimensions`); then `cascade_sum`'s loop over the
/// first two dims for every position of the others (the third fastest),
/// each partial sum added into its output in order: a contiguous inner
/// run of at least a vector (`vector` elements) as [`sum_run`]; columns
/// contiguous along the second dim (at least a vector of them) in groups of
/// four vectors by [`level_cascade`], the rest by [`cascade_row_sum`];
/// otherwise rows along the first dim by [`cascade_row_sum`] where its
/// stride is the smaller, else in groups of four rows by [`level_cascade`]
/// (the rest by [`cascade_row_sum`]). Checked against PyTorch 2.15 on the
/// CPU for 1,800 random f32/f64 layouts (permuted, stepped, expanded; every
/// subset of dims), all bit for bit.
///
/// # Safety
/// `src` is the input's first element; every element that `shape` and
/// `strides` address from it must be readable.
unsafe fn sum_as_pytorch<T: Element>(
    src: *const T,
    shape: &[usize],
    strides: &[usize],
    dims: &[usize],
    vector: usize,
) -> Vec<T::Acc> {
    let (it, outputs) = pytorch_reduce_dims(shape, strides, dims);
    // SAFETY: forwarded contract.
    unsafe { sum_over_dims::<T>(src, &it, outputs, vector, false) }
}

/// A float scalar as f32 (its value is one: an f16/bf16 element or an f32
/// sum of them).
fn float_of(s: Scalar) -> f32 {
    match s {
        Scalar::Float(x) => x as f32,
        _ => f32::NAN,
    }
}

/// The input's elements converted to f32 as PyTorch's `self.to(Float)`
/// lays them out (`preserve_format`): with the input's strides where it is
/// dense (non-overlapping, gap-free), else dense in the order of the input's
/// strides (`_to_copy`'s `infer_dense_strides`: an expanded or sliced input
/// keeps its dim order); and those strides.
///
/// # Safety
/// `src` is the input's first element; every element that `shape` and
/// `strides` address from it must be readable.
unsafe fn widened_as_pytorch<T: Element>(
    src: *const T,
    shape: &[usize],
    strides: &[usize],
) -> (Vec<f32>, Vec<usize>) {
    let to = crate::layout::preserve_format_strides(shape, strides);
    let numel: usize = shape.iter().product();
    let mut buf = vec![0f32; numel];
    let nd = shape.len();
    let mut idx = vec![0usize; nd];
    let (mut from, mut at) = (0usize, 0usize);
    for _ in 0..numel {
        // SAFETY: `from` is an element of the input's layout.
        buf[at] = float_of(unsafe { *src.add(from) }.to_scalar());
        let mut d = nd;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            from += strides[d];
            at += to[d];
            if idx[d] < shape[d] {
                break;
            }
            from -= strides[d] * idx[d];
            at -= to[d] * idx[d];
            idx[d] = 0;
        }
    }
    (buf, to)
}

/// The dims of PyTorch's TensorIterator for a reduction of an input of
/// `shape` and `strides` over `dims` into a row-major output (see
/// [`sum_as_pytorch`]): `[size, input stride, output stride]` each, at least
/// two (padded with `[1, 0, 0]`); and the number of outputs.
fn pytorch_reduce_dims(
    shape: &[usize],
    strides: &[usize],
    dims: &[usize],
) -> (Vec<[usize; 3]>, usize) {
    let nd = shape.len();
    // Output strides: the kept dims row-major, the reduced ones 0.
    let mut ostride = vec![0usize; nd];
    let mut outputs = 1usize;
    for d in (0..nd).rev() {
        if !dims.contains(&d) {
            ostride[d] = outputs;
            outputs *= shape[d];
        }
    }
    // [size, input stride, output stride] in TensorIterator's order
    // (`reorder_dimensions` for a reduction, as `pnorm` orders its dims).
    let mut it: Vec<[usize; 3]> = crate::layout::reorder_dims(shape, Some(&ostride), &[strides])
        .into_iter()
        .map(|d| [shape[d], strides[d], ostride[d]])
        .collect();
    if !it.is_empty() {
        let mut prev = 0;
        for d in 1..it.len() {
            let (a, b) = (it[prev], it[d]);
            let walks_on = |k: usize| a[0].checked_mul(a[k]) == Some(b[k]);
            if a[0] == 1 || b[0] == 1 || (walks_on(1) && walks_on(2)) {
                if a[0] == 1 {
                    it[prev][1] = b[1];
                    it[prev][2] = b[2];
                }
                it[prev][0] *= b[0];
            } else {
                prev += 1;
                it[prev] = b;
            }
        }
        it.truncate(prev + 1);
    }
    while it.len() < 2 {
        it.push([1, 0, 0]);
    }
    (it, outputs)
}

/// The sums of [`sum_as_pytorch`] over the iterator dims `it`: contiguous
/// inner runs of at least `vector` elements as vectors; with
/// `round_stores`, each partial sum added into its output is rounded to
/// `T` there, as PyTorch's store into an f16/bf16 output rounds.
///
/// # Safety
/// As [`sum_as_pytorch`], for the layout `it` describes.
unsafe fn sum_over_dims<T: Element>(
    src: *const T,
    it: &[[usize; 3]],
    outputs: usize,
    vector: usize,
    round_stores: bool,
) -> Vec<T::Acc> {
    // Vectors of the accumulation type per group of PyTorch's outer sums.
    let group = 4 * (32 / std::mem::size_of::<T::Acc>().max(1));
    let mut out = vec![<T::Acc as Arith>::ZERO; outputs];
    let outer = &it[2..];
    let mut idx = vec![0usize; outer.len()];
    let (mut ib, mut ob) = (0usize, 0usize);
    loop {
        let [mut s0, mut i0, mut o0] = it[0];
        let [mut s1, mut i1, mut o1] = it[1];
        if o0 != 0 && o1 == 0 {
            (s0, i0, o0, s1, i1, o1) = (s1, i1, o1, s0, i0, o0);
        }
        // SAFETY (every read below): `ib` plus multiples of the iterator's
        // strides within its sizes addresses an element of the input.
        let x = |i: usize, j: usize| unsafe { *src.add(ib + i * i0 + j * i1) }.to_acc();
        let mut store = |j: usize, v: T::Acc| {
            let k = ob + j * o1;
            out[k] = out[k].add(v);
            if round_stores {
                out[k] = T::from_acc(out[k]).to_acc();
            }
        };
        if o0 != 0 {
            // No reduced dim left among these two: element by element.
            for j in 0..s1 {
                for i in 0..s0 {
                    let k = ob + i * o0 + j * o1;
                    out[k] = out[k].add(x(i, j));
                    if round_stores {
                        out[k] = T::from_acc(out[k]).to_acc();
                    }
                }
            }
        } else if i0 == 1 && s0 >= vector {
            for j in 0..s1 {
                // SAFETY: the `s0` contiguous elements of row `j`.
                let run = unsafe { std::slice::from_raw_parts(src.add(ib + j * i1), s0) };
                store(j, sum_run(run, false));
            }
        } else if i1 == 1 && s1 >= vector {
            let grouped = s1 / group * group;
            for j in 0..s1 {
                if j < grouped {
                    store(j, level_cascade(s0, |i| x(i, j)));
                } else {
                    store(j, interleaved_cascade(s0, |i| [x(i, j)])[0]);
                }
            }
        } else if i0 < i1 {
            for j in 0..s1 {
                store(j, interleaved_cascade(s0, |i| [x(i, j)])[0]);
            }
        } else {
            let grouped = s1 / 4 * 4;
            for j in 0..s1 {
                if j < grouped {
                    store(j, level_cascade(s0, |i| x(i, j)));
                } else {
                    store(j, interleaved_cascade(s0, |i| [x(i, j)])[0]);
                }
            }
        }
        // The next position of the outer dims (the first of them fastest).
        let mut d = 0;
        loop {
            if d == outer.len() {
                return out;
            }
            idx[d] += 1;
            ib += outer[d][1];
            ob += outer[d][2];
            if idx[d] < outer[d][0] {
                break;
            }
            ib -= outer[d][1] * idx[d];
            ob -= outer[d][2] * idx[d];
            idx[d] = 0;
            d += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{chunk_ranges, CHUNK, MAX_CHUNKS};
    use crate::{Device, Tensor};

    /// The ranges tile `0 .. count` in order, `CHUNK` at a time up to
    /// `CHUNK * MAX_CHUNKS`, and never number more than `MAX_CHUNKS`.
    #[test]
    fn chunk_ranges_tile_the_count_and_stay_few() {
        for count in [
            0,
            1,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            CHUNK * MAX_CHUNKS,
            CHUNK * MAX_CHUNKS + 1,
            1 << 40,
            (1 << 62) + 12345,
            i64::MAX as usize,
        ] {
            let mut next = 0;
            let mut n = 0usize;
            for (a, b) in chunk_ranges(count) {
                assert_eq!(a, next, "count {count}");
                assert!(b > a && b <= count, "count {count}");
                next = b;
                n += 1;
                assert!(n <= MAX_CHUNKS, "count {count}");
            }
            assert_eq!(next, count);
            if count <= CHUNK * MAX_CHUNKS {
                assert_eq!(n, count.div_ceil(CHUNK), "count {count}");
            }
        }
    }

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
