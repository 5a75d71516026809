//! Matrix products: floats through the `gemm` crate (any strides), integers
//! (which no well-kept GEMM crate covers) through a plain wrapping loop.
//!
//! # f16 and bf16
//!
//! PyTorch multiplies half-precision matrices with f32 accumulation and
//! rounds each result once. The `gemm` crate has an f16 kernel (`gemm::f16`)
//! that packs its operands to f32 and accumulates in f32, but it stores the
//! f16 result between depth blocks of at least 512 and takes matrix-vector
//! (`m` or `n` of 1) and `k <= 2` shortcuts that round after every step. So
//! f16 goes through it where it rounds once (`m, n >= 2`, `3 <= k <= 512`),
//! and every other f16 product, and every bf16 product (the crate has no bf16
//! kernel), goes through [`gemm_half_tiled`]: tiles of at most
//! `MB x KB` of A and `KB x NB` of B are converted to f32 into per-thread
//! buffers, multiplied with the f32 kernel into an f32 `MB x NB` tile of the
//! result that accumulates over the whole depth, and rounded once into the
//! output. Whole tensors are never converted: the extra memory is
//! `MB*KB + KB*NB + MB*NB` f32 per thread (896 KiB), and the conversion work
//! is `1/NB + 1/MB` of the multiply's.

use crate::backend::cpu::elementwise::base;
use crate::backend::cpu::nn::Ptr;
use crate::backend::{AddOut, Arg, SeqOrder};
use crate::dtype::{Arith, Element};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use rayon::prelude::*;

/// Batched `out[b] = a[b] @ b[b]` for f32/f64 (and f16 where `gemm_f16`
/// sends it), operands `[B, m, k]`, `[B, k, n]`; with `accumulate`,
/// `out[b] += a[b] @ b[b]` (the crate reads the destination and adds it to
/// the product before storing).
pub(crate) fn gemm<T: Element + Default>(out: &Arg, a: &Arg, b: &Arg, accumulate: bool) {
    let (bs, m, k) = (a.layout.shape[0], a.layout.shape[1], a.layout.shape[2]);
    let n = b.layout.shape[2];
    let (sa, sb, so) = (&a.layout.strides, &b.layout.strides, &out.layout.strides);
    let threads = rayon::current_num_threads();
    let par = if m * n * k >= 64 * 64 * 64 && threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    let (pa, pb, po) = (
        base(a) as *const T,
        base(b) as *const T,
        base(out) as *mut T,
    );
    for i in 0..bs {
        // SAFETY: every pointer/stride combination stays inside the operand's
        // layout (indices < shape), out is a fresh contiguous tensor that
        // aliases neither input, and T is f32 or f64 as `gemm` requires.
        unsafe {
            let dst = po.add(i * so[0]);
            if k == 0 {
                if !accumulate {
                    for r in 0..m * n {
                        *dst.add(r) = T::default();
                    }
                }
                continue;
            }
            // The destination's -0.0s: the crate adds its sum of the
            // products (formed from +0.0) to them, so -0.0 plus products
            // that are all -0.0 comes out +0.0; accumulating into the
            // destination (PyTorch's BLAS with beta = 1 for k = 1, its
            // `gemm_transb_` for f16/bf16) keeps -0.0. Restored below.
            let neg_zeros: Vec<(usize, usize)> = if accumulate {
                (0..m)
                    .flat_map(|r| (0..n).map(move |c| (r, c)))
                    .filter(|&(r, c)| is_neg_zero((*dst.add(r * so[1] + c * so[2])).to_acc()))
                    .collect()
            } else {
                Vec::new()
            };
            gemm::gemm(
                m,
                n,
                k,
                dst,
                so[2] as isize,
                so[1] as isize,
                accumulate,
                pa.add(i * sa[0]),
                sa[2] as isize,
                sa[1] as isize,
                pb.add(i * sb[0]),
                sb[2] as isize,
                sb[1] as isize,
                if accumulate { one::<T>() } else { T::default() },
                one::<T>(),
                false,
                false,
                false,
                par,
            );
            for (r, c) in neg_zeros {
                let e = dst.add(r * so[1] + c * so[2]);
                if (*e).to_acc() == <T::Acc as Arith>::ZERO
                    && products_all_neg_zero(
                        (pa.add(i * sa[0]), (sa[1], sa[2])),
                        (pb.add(i * sb[0]), (sb[1], sb[2])),
                        r,
                        c,
                        k,
                    )
                {
                    *e = T::from_acc(<T::Acc as Arith>::ZERO.neg());
                }
            }
            if !accumulate {
                // PyTorch's CPU sums of products start from +0.0, so a sum
                // of -0.0 products is +0.0 (PyTorch 2.15: `full((2, 2),
                // -1.) @ zeros(2, 2)` is +0.0); the `gemm` crate starts
                // from the first product and keeps -0.0. Adding +0.0
                // changes nothing else.
                let zero = <T::Acc as Arith>::ZERO;
                for r in 0..m {
                    for c in 0..n {
                        let e = dst.add(r * so[1] + c * so[2]);
                        *e = T::from_acc((*e).to_acc().add(zero));
                    }
                }
            }
        }
    }
}

/// `out[b] = a[b] @ b[b]` for f32/f64 with each result element one sum
/// over `k` in order, as PyTorch's CPU forms small products (its own loop
/// for a `bmm` of fewer than 400 multiply-adds per matrix, MKL's kernels
/// for an `mm` of inner size 192 or less: see `ops/matmul.rs`,
/// `sequential_fma`): from +0.0, or from `out`'s value (`AddOut::First`),
/// each product rounded then added, or fused into the sum with
/// `order.fma`; with `AddOut::Last` `out`'s value is added to the finished
/// sum. Four rows of sums at a time (in parallel over blocks of rows for
/// larger products: each element's sum is the same whatever the thread),
/// `b`'s rows read contiguously (copied so first), so the sums vectorise
/// across a row; the fused form runs in a copy compiled with FMA where the
/// CPU has it (the same bits: `mul_add` is one rounding either way).
pub(crate) fn sequential<T: Element>(out: &Arg, a: &Arg, b: &Arg, order: SeqOrder) {
    let (bs, m, k) = (a.layout.shape[0], a.layout.shape[1], a.layout.shape[2]);
    let n = b.layout.shape[2];
    let (sb, pb) = (&b.layout.strides, base(b) as *const T);
    #[cfg(target_arch = "x86_64")]
    let fma_cpu = order.fma && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let fma_cpu = false;
    let geo = RowGeometry {
        a: Ptr(base(a) as *mut T),
        sa: [
            a.layout.strides[0],
            a.layout.strides[1],
            a.layout.strides[2],
        ],
        out: Ptr(base(out) as *mut T),
        so: [
            out.layout.strides[0],
            out.layout.strides[1],
            out.layout.strides[2],
        ],
        k,
        n,
        order,
    };
    let par = m.saturating_mul(n).saturating_mul(k) >= 1 << 18 && rayon::current_num_threads() > 1;
    // `b[i]` in the accumulator type, row-major `[k, n]`: rebuilt per
    // matrix (for a batch stride of 0, once).
    let mut bm: Vec<T::Acc> = Vec::with_capacity(k * n);
    for i in 0..bs {
        if i == 0 || sb[0] != 0 {
            bm.clear();
            for l in 0..k {
                for c in 0..n {
                    // SAFETY: l < k, c < n, i < bs index inside b's layout;
                    // b is read-locked by the caller.
                    bm.push(unsafe { (*pb.add(i * sb[0] + l * sb[1] + c * sb[2])).to_acc() });
                }
            }
        }
        let block = |blk: usize| {
            let rows = blk * ROWS..((blk + 1) * ROWS).min(m);
            #[cfg(target_arch = "x86_64")]
            if fma_cpu {
                // SAFETY: the CPU has FMA (checked above); the rows are
                // this task's alone (see `sequential_rows`).
                unsafe { sequential_rows_fma::<T>(&geo, &bm, i, rows) };
                return;
            }
            // SAFETY: as above, without FMA.
            unsafe { sequential_rows::<T>(&geo, &bm, i, rows) };
        };
        let blocks = m.div_ceil(ROWS);
        if par {
            (0..blocks).into_par_iter().for_each(block);
        } else {
            (0..blocks).for_each(block);
        }
    }
}

/// Rows of the result [`sequential`] forms together (each reads a row of
/// `b` once for all of them).
const ROWS: usize = 4;

/// What [`sequential_rows`] needs of `a` and `out`.
struct RowGeometry<T> {
    a: Ptr<T>,
    sa: [usize; 3],
    out: Ptr<T>,
    so: [usize; 3],
    k: usize,
    n: usize,
    order: SeqOrder,
}

/// [`sequential_rows`] compiled with the FMA instructions.
///
/// # Safety
/// The CPU must support FMA; otherwise as [`sequential_rows`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn sequential_rows_fma<T: Element>(
    g: &RowGeometry<T>,
    bm: &[T::Acc],
    i: usize,
    rows: std::ops::Range<usize>,
) {
    // SAFETY: the caller's guarantees, passed on.
    unsafe { sequential_rows::<T>(g, bm, i, rows) }
}

/// Rows `rows` of matrix `i` of [`sequential`]'s result, from `b[i]` as
/// `bm` (row-major `[k, n]`): each element one sum over `k` in order.
///
/// # Safety
/// `g` describes `a` and `out` of the kernel (every `i`, row, `l < k`,
/// `c < n` inside their layouts, `out` write-locked and aliasing neither
/// input); no other thread touches these rows of `out`.
#[inline(always)]
unsafe fn sequential_rows<T: Element>(
    g: &RowGeometry<T>,
    bm: &[T::Acc],
    i: usize,
    rows: std::ops::Range<usize>,
) {
    let (k, n, order) = (g.k, g.n, g.order);
    let zero = <T::Acc as Arith>::ZERO;
    let (pa, po) = (g.a.0 as *const T, g.out.0);
    let (sa, so) = (g.sa, g.so);
    let nr = rows.len();
    let mut acc = vec![zero; nr * n];
    // SAFETY (every access below): the caller's guarantees.
    let out_at = |r: usize, c: usize| unsafe { po.add(i * so[0] + r * so[1] + c * so[2]) };
    if order.add_out == AddOut::First {
        for (rr, r) in rows.clone().enumerate() {
            for c in 0..n {
                acc[rr * n + c] = unsafe { (*out_at(r, c)).to_acc() };
            }
        }
    }
    for l in 0..k {
        let brow = &bm[l * n..(l + 1) * n];
        for (rr, r) in rows.clone().enumerate() {
            let x = unsafe { (*pa.add(i * sa[0] + r * sa[1] + l * sa[2])).to_acc() };
            let s = &mut acc[rr * n..(rr + 1) * n];
            if order.fma {
                for (s, &y) in s.iter_mut().zip(brow) {
                    *s = x.mul_add(y, *s);
                }
            } else {
                for (s, &y) in s.iter_mut().zip(brow) {
                    *s = s.add(x.mul(y));
                }
            }
        }
    }
    for (rr, r) in rows.enumerate() {
        for c in 0..n {
            let e = out_at(r, c);
            let s = acc[rr * n + c];
            unsafe {
                *e = T::from_acc(if order.add_out == AddOut::Last {
                    s.add((*e).to_acc())
                } else {
                    s
                });
            }
        }
    }
}

/// Whether `x` is -0.0 (floats; never for integers).
fn is_neg_zero<A: Arith>(x: A) -> bool {
    x == A::ZERO && A::ONE.div(x) < A::ZERO
}

/// Whether every product `a[r, l] * b[l, c]`, `l < k`, formed in the
/// accumulator type, is -0.0 (a row `r` of `a` at `pa` with strides `sa`,
/// a column `c` of `b` at `pb` with strides `sb`).
///
/// # Safety
/// `pa + r*sa.0 + l*sa.1` and `pb + l*sb.0 + c*sb.1` must be readable `T`s
/// for every `l < k`.
unsafe fn products_all_neg_zero<T: Element>(
    (pa, sa): (*const T, (usize, usize)),
    (pb, sb): (*const T, (usize, usize)),
    r: usize,
    c: usize,
    k: usize,
) -> bool {
    (0..k).all(|l| {
        // SAFETY: in range by the caller's contract.
        let (x, y) = unsafe { (*pa.add(r * sa.0 + l * sa.1), *pb.add(l * sb.0 + c * sb.1)) };
        is_neg_zero(x.to_acc().mul(y.to_acc()))
    })
}

fn one<T: Element>() -> T {
    T::from_acc(<T::Acc as Arith>::ONE)
}

/// Integer matmul with wrapping arithmetic (PyTorch's integer matmul wraps
/// too); with `accumulate` the sum starts from `out`'s value.
pub(crate) fn integer<T: Element>(out: &Arg, a: &Arg, b: &Arg, accumulate: bool) {
    let (bs, m, k) = (a.layout.shape[0], a.layout.shape[1], a.layout.shape[2]);
    let n = b.layout.shape[2];
    let (sa, sb, so) = (&a.layout.strides, &b.layout.strides, &out.layout.strides);
    let (pa, pb, po) = (
        base(a) as *const T,
        base(b) as *const T,
        base(out) as *mut T,
    );
    for bi in 0..bs {
        for i in 0..m {
            for j in 0..n {
                let at = bi * so[0] + i * so[1] + j * so[2];
                let mut acc = if accumulate {
                    // SAFETY: out is a [B, m, n] tensor; the index is in range.
                    unsafe { *po.add(at) }.to_acc()
                } else {
                    <T::Acc as Arith>::ZERO
                };
                for p in 0..k {
                    // SAFETY: indices are within each operand's shape, so the
                    // addresses lie inside its layout over its storage.
                    unsafe {
                        let x = *pa.add(bi * sa[0] + i * sa[1] + p * sa[2]);
                        let y = *pb.add(bi * sb[0] + p * sb[1] + j * sb[2]);
                        acc = acc.add(x.to_acc().mul(y.to_acc()));
                    }
                }
                // SAFETY: out is a [B, m, n] tensor; the index is in range.
                unsafe { *po.add(at) = T::from_acc(acc) };
            }
        }
    }
}

/// Rows of the f32 result tile of the tiled half-precision product.
const MB: usize = 128;
/// Columns of the result tile.
const NB: usize = 256;
/// Depth of one converted A/B tile.
const KB: usize = 512;

/// A half-precision element type with slice conversions to and from f32
/// (vectorised by `half` where the CPU allows).
pub(crate) trait Half: Element + Copy + Send + Sync {
    /// Converts `src` into `dst` (same length).
    fn to_f32s(src: &[Self], dst: &mut [f32]);
    /// Rounds `src` into `dst` (same length), to nearest even.
    fn from_f32s(src: &[f32], dst: &mut [Self]);
    /// One element to f32.
    fn widen(self) -> f32;
}

impl Half for f16 {
    fn to_f32s(src: &[Self], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst)
    }
    fn from_f32s(src: &[f32], dst: &mut [Self]) {
        dst.convert_from_f32_slice(src)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

impl Half for bf16 {
    fn to_f32s(src: &[Self], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst)
    }
    fn from_f32s(src: &[f32], dst: &mut [Self]) {
        dst.convert_from_f32_slice(src)
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
}

/// f16 product: `gemm`'s own f16 kernel where it rounds once, else tiles
/// (always tiles when accumulating: the tile starts from `out` in f32).
pub(crate) fn gemm_f16(out: &Arg, a: &Arg, b: &Arg, accumulate: bool) {
    let (m, k, n) = (a.layout.shape[1], a.layout.shape[2], b.layout.shape[2]);
    if !accumulate && m >= 2 && n >= 2 && (3..=512).contains(&k) {
        gemm::<f16>(out, a, b, false)
    } else {
        gemm_half_tiled::<f16>(out, a, b, accumulate)
    }
}

/// Converts the `rows x cols` tile at `src` (element strides `rs`, `cs`)
/// into `dst`, laid out to keep the source's unit-stride direction
/// contiguous; returns the buffer's `(row stride, col stride)`.
///
/// # Safety
/// Every `src + i*rs + j*cs` for `i < rows`, `j < cols` must be a readable `T`.
unsafe fn load_tile<T: Half>(
    src: *const T,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
    dst: &mut [f32],
) -> (isize, isize) {
    if cs == 1 || cols == 1 {
        for i in 0..rows {
            // SAFETY: row i's `cols` elements are contiguous (cs == 1) and
            // readable (the caller's contract).
            let row = unsafe { std::slice::from_raw_parts(src.add(i * rs), cols) };
            T::to_f32s(row, &mut dst[i * cols..(i + 1) * cols]);
        }
        (cols as isize, 1)
    } else if rs == 1 {
        for j in 0..cols {
            // SAFETY: column j's `rows` elements are contiguous (rs == 1).
            let col = unsafe { std::slice::from_raw_parts(src.add(j * cs), rows) };
            T::to_f32s(col, &mut dst[j * rows..(j + 1) * rows]);
        }
        (1, rows as isize)
    } else {
        for i in 0..rows {
            for j in 0..cols {
                // SAFETY: in range by the caller's contract.
                dst[i * cols + j] = unsafe { *src.add(i * rs + j * cs) }.widen();
            }
        }
        (cols as isize, 1)
    }
}

/// Addresses shared by the tile tasks (read-only inputs, disjoint output tiles).
#[derive(Clone, Copy)]
struct Ptrs {
    a: usize,
    b: usize,
    out: usize,
}

/// f16/bf16 product through f32 tiles (see the module docs), in parallel
/// over result tiles; each result is accumulated in f32 over the whole
/// depth (from `out`'s value with `accumulate`, else from 0) and rounded once.
pub(crate) fn gemm_half_tiled<T: Half>(out: &Arg, a: &Arg, b: &Arg, accumulate: bool) {
    half_tiled::<T>(out, a, b, accumulate, false)
}

/// `out + a @ b` for f16/bf16 as PyTorch 2.15's CPU dot-product kernels
/// form it (`gemm_notrans_`, `gemm_transa_`, `gemm_transab_`): the products
/// summed in f32 from +0.0, then `out` added, rounded once. It differs from
/// [`gemm_half_tiled`]'s accumulation (from `out`, PyTorch's
/// `gemm_transb_`) only in a zero result: where `out` and every product are
/// -0.0 the dot-product kernels give +0.0 (a sum from +0.0 is never -0.0).
pub(crate) fn addmm_half_sum_first<T: Half>(out: &Arg, a: &Arg, b: &Arg) {
    half_tiled::<T>(out, a, b, true, true)
}

/// [`gemm_half_tiled`]; with `sum_first` (and `accumulate`), a -0.0 sum in
/// f32 becomes +0.0 before the rounding (see [`addmm_half_sum_first`]).
fn half_tiled<T: Half>(out: &Arg, a: &Arg, b: &Arg, accumulate: bool, sum_first: bool) {
    let (bs, m, k) = (a.layout.shape[0], a.layout.shape[1], a.layout.shape[2]);
    let n = b.layout.shape[2];
    if bs == 0 || m == 0 || n == 0 {
        return;
    }
    let (sa, sb, so) = (
        a.layout.strides.clone(),
        b.layout.strides.clone(),
        out.layout.strides.clone(),
    );
    let p = Ptrs {
        a: base(a) as usize,
        b: base(b) as usize,
        out: base(out) as usize,
    };
    let (mt, nt) = (m.div_ceil(MB), n.div_ceil(NB));
    let tasks = bs * mt * nt;
    let task = move |bufs: &mut (Vec<f32>, Vec<f32>, Vec<f32>), t: usize| {
        let (bi, rest) = (t / (mt * nt), t % (mt * nt));
        let (i0, j0) = ((rest / nt) * MB, (rest % nt) * NB);
        let (mh, nw) = (MB.min(m - i0), NB.min(n - j0));
        let (abuf, bbuf, cbuf) = bufs;
        let c = &mut cbuf[..mh * nw];
        if accumulate {
            for i in 0..mh {
                // SAFETY: out is a contiguous [B, m, n] tensor (unit column
                // stride); this task alone reads and writes its tile's rows.
                let src = unsafe {
                    std::slice::from_raw_parts(
                        (p.out as *const T).add(bi * so[0] + (i0 + i) * so[1] + j0),
                        nw,
                    )
                };
                T::to_f32s(src, &mut c[i * nw..(i + 1) * nw]);
            }
        } else {
            c.fill(0.0);
        }
        // As in `gemm`: -0.0s of the destination that the crate's sum
        // (from +0.0) turns into +0.0, restored after the product where
        // PyTorch accumulates into the destination (not `sum_first`).
        let neg_zeros: Vec<usize> = if accumulate && !sum_first && k > 0 {
            (0..mh * nw).filter(|&e| is_neg_zero(c[e])).collect()
        } else {
            Vec::new()
        };
        let mut p0 = 0;
        while p0 < k {
            let kw = KB.min(k - p0);
            // SAFETY: the tiles lie inside the operands' [B, m, k] / [B, k, n]
            // layouts (indices below their shapes), which address their storages.
            let (ars, acs, brs, bcs) = unsafe {
                let pa = (p.a as *const T).add(bi * sa[0] + i0 * sa[1] + p0 * sa[2]);
                let (ars, acs) = load_tile(pa, mh, kw, sa[1], sa[2], &mut abuf[..mh * kw]);
                let pb = (p.b as *const T).add(bi * sb[0] + p0 * sb[1] + j0 * sb[2]);
                let (brs, bcs) = load_tile(pb, kw, nw, sb[1], sb[2], &mut bbuf[..kw * nw]);
                (ars, acs, brs, bcs)
            };
            // SAFETY: the buffers hold the tiles at the strides returned by
            // `load_tile`; `c` is an `mh x nw` row-major f32 tile.
            unsafe {
                gemm::gemm(
                    mh,
                    nw,
                    kw,
                    c.as_mut_ptr(),
                    1,
                    nw as isize,
                    true,
                    abuf.as_ptr(),
                    acs,
                    ars,
                    bbuf.as_ptr(),
                    bcs,
                    brs,
                    1.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
            p0 += kw;
        }
        if sum_first && k > 0 {
            // Only a -0.0 changes: -0.0 + 0.0 is +0.0. (With k = 0 there
            // is no sum, and PyTorch keeps the destination as it is.)
            for x in c.iter_mut() {
                *x += 0.0;
            }
        }
        for e in neg_zeros {
            let (i, j) = (e / nw, e % nw);
            // SAFETY: row i0 + i of `a` and column j0 + j of `b` lie inside
            // their [B, m, k] / [B, k, n] layouts for every depth < k.
            let all = unsafe {
                products_all_neg_zero(
                    ((p.a as *const T).add(bi * sa[0]), (sa[1], sa[2])),
                    ((p.b as *const T).add(bi * sb[0]), (sb[1], sb[2])),
                    i0 + i,
                    j0 + j,
                    k,
                )
            };
            if c[e] == 0.0 && all {
                c[e] = -0.0;
            }
        }
        for i in 0..mh {
            let row = &c[i * nw..(i + 1) * nw];
            // SAFETY: out is a fresh contiguous [B, m, n] tensor (unit column
            // stride); this task alone writes its tile's rows.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    (p.out as *mut T).add(bi * so[0] + (i0 + i) * so[1] + j0),
                    nw,
                )
            };
            T::from_f32s(row, dst);
        }
    };
    let new_bufs = || {
        (
            vec![0.0f32; MB * KB],
            vec![0.0f32; KB * NB],
            vec![0.0f32; MB * NB],
        )
    };
    if tasks > 1 && m * n * k.max(1) >= 64 * 64 * 64 && rayon::current_num_threads() > 1 {
        (0..tasks).into_par_iter().for_each_init(new_bufs, task);
    } else {
        let mut bufs = new_bufs();
        for t in 0..tasks {
            task(&mut bufs, t);
        }
    }
}
