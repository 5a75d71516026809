//! Ops along one dim on the CPU: softmax, log-softmax and cumsum.
//!
//! The caller hands a contiguous input and a fresh contiguous output of the
//! same shape, described as `outer x n x inner` (`n` the op's dim). With
//! `inner == 1` every row is contiguous and is one loop; otherwise each outer
//! block is walked along `n` with the `inner` positions as the vectorised
//! inner loop. Work above [`super::PARALLEL_THRESHOLD`] elements is split
//! across rayon's threads by outer block (or by rows when there is one block).

use crate::backend::Arg;
use crate::dtype::{Arith, DType, Element};
use rayon::prelude::*;

/// The `outer x n x inner` view of a contiguous operand along `dim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DimShape {
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
    /// Whether `dim` is the shape's last dim. PyTorch's CPU softmax kernels
    /// are chosen by this, not by `inner == 1`: along a dim followed only by
    /// dims of size 1 (`[.., n, 1]` along -2) it runs its kernel for other
    /// dims, which rounds differently (see [`softmax`] and
    /// [`softmax_backward`]).
    pub last: bool,
}

impl DimShape {
    /// The view of `shape` along `dim` (a 0-d shape is one element).
    pub(crate) fn new(shape: &[usize], dim: usize) -> DimShape {
        if shape.is_empty() {
            return DimShape {
                outer: 1,
                n: 1,
                inner: 1,
                last: true,
            };
        }
        DimShape {
            outer: shape[..dim].iter().product(),
            n: shape[dim],
            inner: shape[dim + 1..].iter().product(),
            last: dim + 1 == shape.len(),
        }
    }
    fn numel(&self) -> usize {
        self.outer * self.n * self.inner
    }
}

/// The elements of a contiguous operand as a slice.
///
/// # Safety
/// `a` must be a contiguous CPU operand of `T` with `len` elements from its
/// offset, whose storage the caller has locked for the slice's lifetime.
pub(super) unsafe fn slice<'a, T>(a: &Arg, len: usize) -> &'a [T] {
    let p = (a.mem.host_ptr() as *const T).add(a.layout.offset);
    std::slice::from_raw_parts(p, len)
}

/// As [`slice`], mutable.
///
/// # Safety
/// As [`slice`], and the caller holds the storage's write lock and no other
/// reference to these elements exists.
pub(super) unsafe fn slice_mut<'a, T>(a: &Arg, len: usize) -> &'a mut [T] {
    let p = (a.mem.host_ptr() as *mut T).add(a.layout.offset);
    std::slice::from_raw_parts_mut(p, len)
}

/// Runs `f(block_in, block_out)` on every outer block of `outer x (n * inner)`
/// elements, in parallel when the work is large.
fn per_block<T: Element>(
    x: &[T],
    y: &mut [T],
    s: DimShape,
    f: impl Fn(&[T], &mut [T]) + Sync + Send,
) {
    let block = s.n * s.inner;
    if block == 0 {
        return;
    }
    if s.numel() >= super::PARALLEL_THRESHOLD && s.outer > 1 {
        y.par_chunks_mut(block)
            .zip(x.par_chunks(block))
            .for_each(|(yo, xo)| f(xo, yo));
    } else {
        for (yo, xo) in y.chunks_mut(block).zip(x.chunks(block)) {
            f(xo, yo);
        }
    }
}

/// How the softmax kernels form each row: log-softmax or softmax, and the
/// fused scale and causal mask of attention (`softmax(mask(x * scale))`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SoftmaxMode {
    /// Log-softmax instead of softmax.
    pub log: bool,
    /// Every input element is multiplied by it first (1 for a plain softmax).
    pub scale: f64,
    /// 0: no mask. Otherwise the rows are those of `[.., causal_rows, n]`
    /// matrices and element `j` of matrix row `i` counts as -inf where
    /// `j > i` (it is not read; its output is 0, or -inf for log-softmax,
    /// unless the row is NaN).
    /// Only rows along the last dim (`inner == 1`) take a mask.
    pub causal_rows: usize,
    /// Log-softmax of an f16/bf16 tensor along its last dim: the sum of
    /// `exp(x - max)` and its log are each rounded to the element type
    /// before the outputs are formed, as PyTorch's CPU kernel for that case
    /// keeps them (`_vec_log_softmax_lastdim` stores both as `scalar_t`).
    /// Its outputs then match PyTorch's bit for bit, where a correctly
    /// rounded log-softmax differs from them in the last place on most rows.
    /// Along any other dim PyTorch's CPU result is correctly rounded, and so
    /// is every CUDA result; the CUDA backend ignores the flag.
    pub round_log_sum: bool,
}

impl SoftmaxMode {
    /// A plain softmax (log-softmax with `log`).
    pub(crate) fn plain(log: bool) -> SoftmaxMode {
        SoftmaxMode {
            log,
            scale: 1.0,
            causal_rows: 0,
            round_log_sum: false,
        }
    }

    /// How many leading elements of contiguous row `row` (of `n`) are kept.
    pub(crate) fn keep(&self, row: usize, n: usize) -> usize {
        if self.causal_rows == 0 {
            n
        } else {
            (row % self.causal_rows + 1).min(n)
        }
    }
}

/// Softmax (or log-softmax with `log`) of one contiguous row, in `T::Acc`,
/// of the first `keep` elements times `scale`, the rest masked to -inf (not
/// read): max, then the sum of `exp(x - max)`, then the outputs. A row
/// holding NaN or +inf, and an all -inf row, give NaN, masked elements
/// included (`exp(-inf - max) / sum`, as PyTorch's `softmax(masked_fill(..,
/// -inf))` computes them); otherwise masked elements are 0 (-inf for
/// log-softmax).
///
/// Along the last dim (`recip`) the exponentials are multiplied by the
/// reciprocal of their sum, as PyTorch's CPU kernel for the last dim does
/// (`tmp_sum = 1 / tmp_sum`, then `x * tmp_sum`); along another dim (a row
/// followed by dims of size 1) they are divided by it, as its kernel for
/// other dims does. Dividing along the last dim differed from PyTorch 2.15
/// on about a quarter of the elements of a `[64, 7]` f32 softmax.
///
/// A plain f32 row along the last dim (no scale, no mask) is PyTorch's
/// vectorised kernel exactly: its lane folds and SLEEF's `exp`/`log`
/// (`sleef.rs`).
fn softmax_row<T: Element>(
    x: &[T],
    y: &mut [T],
    mode: SoftmaxMode,
    scale: T::Acc,
    keep: usize,
    recip: bool,
) {
    let log = mode.log;
    if recip
        && matches!(T::DTYPE, DType::F32)
        && keep == x.len()
        && mode.causal_rows == 0
        && mode.scale == 1.0
    {
        // SAFETY: `T` is f32 (its DTYPE), so both slices are f32 slices of
        // the same lengths; `y` is borrowed mutably for the call only.
        let (xf, yf) = unsafe {
            (
                std::slice::from_raw_parts(x.as_ptr().cast::<f32>(), x.len()),
                std::slice::from_raw_parts_mut(y.as_mut_ptr().cast::<f32>(), y.len()),
            )
        };
        super::sleef::softmax_lastdim_f32(xf, yf, log);
        return;
    }
    let (x, _) = x.split_at(keep);
    let (y, masked) = y.split_at_mut(keep);
    let ninf = T::Acc::ZERO.ln();
    let sc = |v: T| v.to_acc().mul(scale);
    let m = x
        .iter()
        .fold(None::<T::Acc>, |m, &v| {
            let v = sc(v);
            Some(m.map_or(v, |m| m.max_nan(v)))
        })
        .unwrap_or(T::Acc::ZERO);
    // Blocked summation: a long row's rounding error grows with the block
    // count plus the block length, not with the row length.
    let mut s = T::Acc::ZERO;
    for block in x.chunks(256) {
        let mut b = T::Acc::ZERO;
        for &v in block {
            b = b.add(sc(v).sub(m).exp());
        }
        s = s.add(b);
    }
    if log {
        let ls = if mode.round_log_sum {
            let s = T::from_acc(s).to_acc();
            T::from_acc(s.ln()).to_acc()
        } else {
            s.ln()
        };
        for (o, &v) in y.iter_mut().zip(x) {
            *o = T::from_acc(sc(v).sub(m).sub(ls));
        }
        masked.fill(T::from_acc(ninf.sub(m).sub(ls)));
    } else if recip {
        let r = T::Acc::ONE.div(s);
        for (o, &v) in y.iter_mut().zip(x) {
            *o = T::from_acc(sc(v).sub(m).exp().mul(r));
        }
        masked.fill(T::from_acc(ninf.sub(m).exp().mul(r)));
    } else {
        for (o, &v) in y.iter_mut().zip(x) {
            *o = T::from_acc(sc(v).sub(m).exp().div(s));
        }
        masked.fill(T::from_acc(ninf.sub(m).exp().div(s)));
    }
}

/// Softmax of one outer block whose rows are strided by `inner`: the
/// `inner` columns are processed together (contiguous inner loops).
fn softmax_cols<T: Element>(x: &[T], y: &mut [T], n: usize, inner: usize, log: bool) {
    let mut m: Vec<T::Acc> = x[..inner].iter().map(|v| v.to_acc()).collect();
    for k in 1..n {
        for (mi, &v) in m.iter_mut().zip(&x[k * inner..(k + 1) * inner]) {
            *mi = mi.max_nan(v.to_acc());
        }
    }
    let mut s = vec![T::Acc::ZERO; inner];
    for k in 0..n {
        for ((si, &mi), &v) in s.iter_mut().zip(&m).zip(&x[k * inner..(k + 1) * inner]) {
            *si = si.add(v.to_acc().sub(mi).exp());
        }
    }
    if log {
        for si in s.iter_mut() {
            *si = si.ln();
        }
    }
    for k in 0..n {
        let row = k * inner..(k + 1) * inner;
        for (((o, &v), &mi), &si) in y[row.clone()].iter_mut().zip(&x[row]).zip(&m).zip(&s) {
            let d = v.to_acc().sub(mi);
            *o = T::from_acc(if log { d.sub(si) } else { d.exp().div(si) });
        }
    }
}

/// `out = softmax(input)` (or log-softmax, scaled and masked as `mode`
/// says) along the `n` dim of `s`; both contiguous, of float dtype `T`. A
/// scale other than 1 or a mask needs `inner == 1` (the caller checks).
pub(crate) fn softmax<T: Element>(out: &Arg, input: &Arg, s: DimShape, mode: SoftmaxMode) {
    let len = s.numel();
    if len == 0 {
        return;
    }
    let log = mode.log;
    // SAFETY: the caller passes contiguous operands of `T` with `len`
    // elements each, `out` fresh and write-locked, `input` read-locked; they
    // are distinct storages.
    let (x, y) = unsafe { (slice::<T>(input, len), slice_mut::<T>(out, len)) };
    if matches!(T::DTYPE, DType::F32) && log && !s.last && mode == SoftmaxMode::plain(log) {
        // PyTorch's f32 kernel for a dim other than the last, bit for bit
        // (with the C library's `expf` and `logf` throughout, positions in
        // whole vectors of 8 of the dims after it could differ in the last
        // place: 4 of 3,000 draws of `gen_cross_entropy_s54a.py`, through
        // probability targets of (N, C, d1, ...) logits).
        // SAFETY: `T` is f32 (its DTYPE), so both slices are f32 slices of
        // the same lengths; `y` is borrowed mutably for the call only.
        let (xf, yf) = unsafe {
            (
                std::slice::from_raw_parts(x.as_ptr().cast::<f32>(), x.len()),
                std::slice::from_raw_parts_mut(y.as_mut_ptr().cast::<f32>(), y.len()),
            )
        };
        per_block(xf, yf, s, |xo, yo| {
            super::sleef::log_softmax_cols_f32(xo, yo, s.n, s.inner)
        });
        return;
    }
    if s.inner == 1 {
        let n = s.n;
        let scale = T::Acc::from_f64(mode.scale);
        if len >= super::PARALLEL_THRESHOLD {
            // Rows in groups of at least a few thousand elements per task.
            let rows_per_task = (4096 / n.max(1)).max(1);
            y.par_chunks_mut(n * rows_per_task)
                .zip(x.par_chunks(n * rows_per_task))
                .enumerate()
                .for_each(|(c, (yc, xc))| {
                    for (r, (yr, xr)) in yc.chunks_mut(n).zip(xc.chunks(n)).enumerate() {
                        let keep = mode.keep(c * rows_per_task + r, n);
                        softmax_row(xr, yr, mode, scale, keep, s.last);
                    }
                });
        } else {
            for (r, (yr, xr)) in y.chunks_mut(n).zip(x.chunks(n)).enumerate() {
                softmax_row(xr, yr, mode, scale, mode.keep(r, n), s.last);
            }
        }
    } else {
        // Only the last dim (`inner == 1`) takes a scale, a mask or the
        // 2-byte rounding.
        debug_assert!(mode == SoftmaxMode::plain(log));
        per_block(x, y, s, |xo, yo| softmax_cols(xo, yo, s.n, s.inner, log));
    }
}

/// `out = cumsum(input)` along the `n` dim of `s`, the running sum kept in
/// `A` (`widen` and `narrow` convert to and from it; each output is rounded
/// from the sum). PyTorch's CPU kernel keeps it in `acc_type<T, false>`:
/// f64 for f32 and f64, f32 for f16/bf16, and integers wrap.
pub(crate) fn cumsum<T: Element, A: Arith>(
    out: &Arg,
    input: &Arg,
    s: DimShape,
    widen: fn(T) -> A,
    narrow: fn(A) -> T,
) {
    let len = s.numel();
    if len == 0 {
        return;
    }
    // SAFETY: as in `softmax`.
    let (x, y) = unsafe { (slice::<T>(input, len), slice_mut::<T>(out, len)) };
    let (n, inner) = (s.n, s.inner);
    per_block(x, y, s, |xo, yo| {
        if inner == 1 {
            let mut acc = A::ZERO;
            for (o, &v) in yo.iter_mut().zip(xo) {
                acc = acc.add(widen(v));
                *o = narrow(acc);
            }
        } else {
            let mut acc = vec![A::ZERO; inner];
            for k in 0..n {
                let row = k * inner..(k + 1) * inner;
                for ((a, o), &v) in acc.iter_mut().zip(&mut yo[row.clone()]).zip(&xo[row]) {
                    *a = a.add(widen(v));
                    *o = narrow(*a);
                }
            }
        }
    });
}

/// One row (or column set) of the softmax backward, in `T::Acc`:
/// `dx = y (g - sum(g y))`, or `dx = g - exp(y) sum(g)` for log-softmax,
/// the sums along `n` of the `inner`-strided elements.
///
/// Along a dim other than the last (`fused`; also where only dims of size 1
/// follow it, as PyTorch picks its kernel by the dim), softmax's `sum(g y)` is
/// accumulated as PyTorch's CPU kernel does it, one fused multiply-add per
/// element (`s = fma(g, y, s)` in order along the dim; bit for bit with
/// PyTorch 2.15 on f32 and f64, and on f16/bf16, whose products are exact
/// in f32 anyway). strata rounded `g y` first, which, among other
/// differences in the last bit, turned the exact zero gradient PyTorch gets
/// for `sum(softmax(x, 1)) * 0.1875` into a few 1e-9
/// (gradient-oracle program 196:894, where Adam then magnified it). The
/// last dim keeps its plain running sum: PyTorch's
/// vectorized reduction there depends on the vector width.
///
/// Log-softmax's `g - exp(y) sum(g)` is one fused multiply-add along every
/// dim, as PyTorch's CPU kernel computes it (its vectorized `x - y * z`
/// compiles to one): against PyTorch 2.15 with the same sums and a
/// correctly rounded `exp`, rounding `exp(y) sum(g)` first differed on
/// 17-35% of the elements and the fused form on 0-7% (the rest is PyTorch's
/// vectorized `exp`, an ulp from the correctly rounded one now and then), in
/// f32 and f64. Where the sum of the output's gradient is 1 (a log-softmax
/// followed by `exp` and summed along the same dim), the fused form gives
/// `exp(y) (1 - sum)` exactly, as PyTorch, where strata gave multiples of
/// the element's last place (gradient-oracle program 230:279: 7.45e-9 for
/// PyTorch's 6.71e-9, which AdamW then magnified).
fn softmax_backward_block<T: Element>(
    g: &[T],
    y: &[T],
    dx: &mut [T],
    n: usize,
    inner: usize,
    log: bool,
    fused: bool,
) {
    // Along the last dim PyTorch's vectorized reduction starts from the
    // row's first term, not from 0 (its other kernel starts from 0): the
    // sum of a row of -0.0 terms is -0.0 there, and the gradient of a row
    // of -0.0 output gradients +0.0 (`y (g - s)`, `g - exp(y) s`).
    let (mut s, from) = if fused || n == 0 {
        (vec![T::Acc::ZERO; inner], 0)
    } else {
        let first = g[..inner].iter().zip(&y[..inner]).map(|(&gv, &yv)| {
            if log {
                gv.to_acc()
            } else {
                gv.to_acc().mul(yv.to_acc())
            }
        });
        (first.collect(), 1)
    };
    for k in from..n {
        let row = k * inner..(k + 1) * inner;
        for ((si, &gv), &yv) in s.iter_mut().zip(&g[row.clone()]).zip(&y[row]) {
            *si = if log {
                si.add(gv.to_acc())
            } else if fused {
                gv.to_acc().mul_add(yv.to_acc(), *si)
            } else {
                si.add(gv.to_acc().mul(yv.to_acc()))
            };
        }
    }
    for k in 0..n {
        let row = k * inner..(k + 1) * inner;
        for (((o, &gv), &yv), &si) in dx[row.clone()]
            .iter_mut()
            .zip(&g[row.clone()])
            .zip(&y[row])
            .zip(&s)
        {
            let (gv, yv) = (gv.to_acc(), yv.to_acc());
            *o = T::from_acc(if log {
                yv.exp().neg().mul_add(si, gv)
            } else {
                yv.mul(gv.sub(si))
            });
        }
    }
}

/// The gradient of softmax (log-softmax with `log`) along the `n` dim of
/// `s`: `out` from the output gradient `grad` and the forward's output `y`,
/// all contiguous, of float dtype `T`. `out` is fresh or is `grad` itself
/// (then [`softmax_backward_inplace`] runs).
pub(crate) fn softmax_backward<T: Element>(out: &Arg, grad: &Arg, y: &Arg, s: DimShape, log: bool) {
    let len = s.numel();
    if len == 0 {
        return;
    }
    if elements_ptr::<T>(out) == elements_ptr::<T>(grad) {
        softmax_backward_inplace::<T>(out, y, s, log);
        return;
    }
    // SAFETY: the caller passes contiguous operands of `T` with `len`
    // elements each, `out` fresh and write-locked, `grad` and `y` read-locked;
    // `out` is a distinct storage (the same elements as `grad` were sent to
    // the in-place path above).
    let (g, yv, dx) = unsafe {
        (
            slice::<T>(grad, len),
            slice::<T>(y, len),
            slice_mut::<T>(out, len),
        )
    };
    let block = s.n * s.inner;
    let f = |(dxo, (go, yo)): (&mut [T], (&[T], &[T]))| {
        softmax_backward_block(go, yo, dxo, s.n, s.inner, log, !s.last)
    };
    if s.inner == 1 && len >= super::PARALLEL_THRESHOLD {
        let rows_per_task = (4096 / s.n.max(1)).max(1);
        dx.par_chunks_mut(s.n * rows_per_task)
            .zip(
                g.par_chunks(s.n * rows_per_task)
                    .zip(yv.par_chunks(s.n * rows_per_task)),
            )
            .for_each(|(dxc, (gc, yc))| {
                for t in dxc.chunks_mut(s.n).zip(gc.chunks(s.n).zip(yc.chunks(s.n))) {
                    f(t);
                }
            });
    } else if len >= super::PARALLEL_THRESHOLD && s.outer > 1 {
        dx.par_chunks_mut(block)
            .zip(g.par_chunks(block).zip(yv.par_chunks(block)))
            .for_each(f);
    } else {
        dx.chunks_mut(block)
            .zip(g.chunks(block).zip(yv.chunks(block)))
            .for_each(f);
    }
}

/// The address of an operand's first element.
fn elements_ptr<T>(a: &Arg) -> *const T {
    // `wrapping_add`: only compared, never dereferenced here.
    (a.mem.host_ptr() as *const T).wrapping_add(a.layout.offset)
}

/// [`softmax_backward`] with `gdx` holding the output gradient on entry and
/// the result on return: each row (or outer block) of the gradient is copied
/// to a scratch buffer first, so the result can be written over it.
fn softmax_backward_inplace<T: Element>(gdx: &Arg, y: &Arg, s: DimShape, log: bool) {
    let len = s.numel();
    // SAFETY: `gdx` is a contiguous operand of `T` with `len` elements,
    // write-locked by the caller and referenced only through this slice;
    // `y` is a distinct, read-locked operand of `len` elements.
    let (dx, yv) = unsafe { (slice_mut::<T>(gdx, len), slice::<T>(y, len)) };
    let block = s.n * s.inner;
    // One block of `block` elements through the scratch row `tmp`.
    let run = |tmp: &mut Vec<T>, dxo: &mut [T], yo: &[T]| {
        tmp.clear();
        tmp.extend_from_slice(dxo);
        softmax_backward_block(tmp, yo, dxo, s.n, s.inner, log, !s.last);
    };
    if s.inner == 1 && len >= super::PARALLEL_THRESHOLD {
        let rows_per_task = (4096 / s.n.max(1)).max(1);
        dx.par_chunks_mut(s.n * rows_per_task)
            .zip(yv.par_chunks(s.n * rows_per_task))
            .for_each(|(dxc, yc)| {
                let mut tmp = Vec::with_capacity(s.n);
                for (dxr, yr) in dxc.chunks_mut(s.n).zip(yc.chunks(s.n)) {
                    run(&mut tmp, dxr, yr);
                }
            });
    } else if len >= super::PARALLEL_THRESHOLD && s.outer > 1 {
        dx.par_chunks_mut(block)
            .zip(yv.par_chunks(block))
            .for_each_init(Vec::new, |tmp, (dxo, yo)| run(tmp, dxo, yo));
    } else {
        let mut tmp = Vec::with_capacity(block);
        for (dxo, yo) in dx.chunks_mut(block).zip(yv.chunks(block)) {
            run(&mut tmp, dxo, yo);
        }
    }
}
