//! The CPU kernels of the sliding-window ops ([`NnKernel::Im2col`] and its
//! adjoint, max and average pooling and the latter's backward): parallel
//! over the `[N, C]` planes (rayon), each plane's windows walked in
//! row-major order with the three spatial dims of [`Windows`] (unit dims in
//! front). Sums follow PyTorch's CPU loops: a window's elements in scan
//! order; a gradient's contributions to an input element in the order its
//! kernel adds them (by kernel offset for columns, by output position for
//! average pooling).
//!
//! [`NnKernel::Im2col`]: crate::backend::NnKernel::Im2col

use super::nn::{base, Ptr};
use crate::backend::Arg;
use crate::dtype::{Arith, Element};
use crate::ops::{AvgMode, Windows};
use rayon::prelude::*;

/// A window's geometry in i64, the spatial strides of an input (0 for the
/// unit dims) and its batch and channel strides.
struct Geom {
    l: [i64; 3],
    o: [i64; 3],
    k: [i64; 3],
    s: [i64; 3],
    p: [i64; 3],
    d: [i64; 3],
}

impl Geom {
    fn of(w: &Windows) -> Geom {
        let i = |a: [usize; 3]| a.map(|v| v as i64);
        Geom {
            l: i(w.input),
            o: i(w.out),
            k: i(w.kernel),
            s: i(w.stride),
            p: i(w.pad),
            d: i(w.dilation),
        }
    }

    /// The input coordinate of kernel offset `k` in window `o` along `dim`,
    /// and whether it lies inside the input.
    fn at(&self, dim: usize, o: i64, k: i64) -> (i64, bool) {
        let i = o * self.s[dim] - self.p[dim] + k * self.d[dim];
        (i, i >= 0 && i < self.l[dim])
    }
}

/// `[sb, sc, s0, s1, s2]`: an `[N, C, L...]` operand's strides with zeros
/// for the unit spatial dims.
fn strides(a: &Arg, spatial: usize) -> ([usize; 2], [usize; 3]) {
    let st = &a.layout.strides;
    let mut sp = [0usize; 3];
    sp[3 - spatial..].copy_from_slice(&st[2..]);
    ([st[0], st[1]], sp)
}

/// Columns `[N, C * K, O]` (contiguous) of `x` (`[N, C, L...]`, any
/// strides), element bits copied, zeros outside the input.
pub(crate) fn im2col(cols: &Arg, x: &Arg, w: &Windows) {
    match x.dtype.size() {
        1 => im2col_t::<u8>(cols, x, w),
        2 => im2col_t::<u16>(cols, x, w),
        4 => im2col_t::<u32>(cols, x, w),
        _ => im2col_t::<u64>(cols, x, w),
    }
}

fn im2col_t<T: Copy + Default + Send + Sync>(cols: &Arg, x: &Arg, w: &Windows) {
    let g = Geom::of(w);
    let (kn, on) = (w.kernel_numel(), w.out_numel());
    let c = cols.layout.shape[1] / kn;
    let planes = cols.layout.shape[0] * c;
    let ([sb, sc], sx) = strides(x, w.spatial);
    let (pc, px): (Ptr<T>, Ptr<T>) = (base(cols), base(x));
    (0..planes).into_par_iter().for_each(|bc| {
        let xo = (bc / c) * sb + (bc % c) * sc;
        let mut row = 0usize;
        for k0 in 0..g.k[0] {
            for k1 in 0..g.k[1] {
                for k2 in 0..g.k[2] {
                    let mut j = (bc * kn + row) * on;
                    for o0 in 0..g.o[0] {
                        let (i0, in0) = g.at(0, o0, k0);
                        for o1 in 0..g.o[1] {
                            let (i1, in1) = g.at(1, o1, k1);
                            for o2 in 0..g.o[2] {
                                let (i2, in2) = g.at(2, o2, k2);
                                // SAFETY: `j` counts this plane's columns
                                // (inside cols, planes disjoint between
                                // tasks); a read happens only at coordinates
                                // inside x's shape.
                                unsafe {
                                    *pc.get().add(j) = if in0 && in1 && in2 {
                                        *px.get().add(
                                            xo + i0 as usize * sx[0]
                                                + i1 as usize * sx[1]
                                                + i2 as usize * sx[2],
                                        )
                                    } else {
                                        T::default()
                                    };
                                }
                                j += 1;
                            }
                        }
                    }
                    row += 1;
                }
            }
        }
    });
}

/// The adjoint of [`im2col`]: `x` (`[N, C, L...]`, contiguous, float) gets
/// each input position's sum of the column entries (`cols` contiguous
/// `[N, C * K, O]`) that read it, by kernel offset, in the computation
/// type.
pub(crate) fn col2im<T: Element>(x: &Arg, cols: &Arg, w: &Windows) {
    let g = Geom::of(w);
    let (kn, on, ln) = (w.kernel_numel(), w.out_numel(), w.input_numel());
    let c = x.layout.shape[1];
    let planes = x.layout.shape[0] * c;
    let (pxo, pc): (Ptr<T>, Ptr<T>) = (base(x), base(cols));
    let lst = [g.l[1] * g.l[2], g.l[2], 1];
    (0..planes).into_par_iter().for_each(|bc| {
        let mut acc = vec![<T::Acc as Arith>::ZERO; ln];
        let mut j = bc * kn * on;
        for k0 in 0..g.k[0] {
            for k1 in 0..g.k[1] {
                for k2 in 0..g.k[2] {
                    for o0 in 0..g.o[0] {
                        let (i0, in0) = g.at(0, o0, k0);
                        for o1 in 0..g.o[1] {
                            let (i1, in1) = g.at(1, o1, k1);
                            for o2 in 0..g.o[2] {
                                let (i2, in2) = g.at(2, o2, k2);
                                if in0 && in1 && in2 {
                                    let at = (i0 * lst[0] + i1 * lst[1] + i2) as usize;
                                    // SAFETY: `j` indexes this plane's columns.
                                    let v = unsafe { *pc.get().add(j) };
                                    acc[at] = acc[at].add(v.to_acc());
                                }
                                j += 1;
                            }
                        }
                    }
                }
            }
        }
        for (i, a) in acc.into_iter().enumerate() {
            // SAFETY: x is contiguous `[N, C, L...]`; this plane's elements
            // are written by this task only.
            unsafe { *pxo.get().add(bc * ln + i) = T::from_acc(a) };
        }
    });
}

/// PyTorch's max pooling of `x` (`[N, C, L...]`, any strides): `values`
/// and `indices` contiguous `[N, C, O...]`. A window's first element inside
/// the input starts the scan; a later one takes over where it is greater
/// or NaN. A window without an input element gives `lowest` and the index
/// of its first position past the left padding.
pub(crate) fn max_pool<T: Element>(values: &Arg, indices: &Arg, x: &Arg, w: &Windows, lowest: T) {
    let g = Geom::of(w);
    let on = w.out_numel();
    let c = values.layout.shape[1];
    let planes = values.layout.shape[0] * c;
    let ([sb, sc], sx) = strides(x, w.spatial);
    let (pv, pi, px): (Ptr<T>, Ptr<i64>, Ptr<T>) = (base(values), base(indices), base(x));
    (0..planes).into_par_iter().for_each(|bc| {
        let xo = (bc / c) * sb + (bc % c) * sc;
        let mut j = bc * on;
        for o0 in 0..g.o[0] {
            for o1 in 0..g.o[1] {
                for o2 in 0..g.o[2] {
                    let o = [o0, o1, o2];
                    let first = |dim: usize| {
                        let start = o[dim] * g.s[dim] - g.p[dim];
                        if start < 0 {
                            start + (-start + g.d[dim] - 1) / g.d[dim] * g.d[dim]
                        } else {
                            start
                        }
                    };
                    let mut index = (first(0) * g.l[1] + first(1)) * g.l[2] + first(2);
                    let mut best: Option<T::Acc> = None;
                    for k0 in 0..g.k[0] {
                        let (i0, in0) = g.at(0, o0, k0);
                        if !in0 {
                            continue;
                        }
                        for k1 in 0..g.k[1] {
                            let (i1, in1) = g.at(1, o1, k1);
                            if !in1 {
                                continue;
                            }
                            for k2 in 0..g.k[2] {
                                let (i2, in2) = g.at(2, o2, k2);
                                if !in2 {
                                    continue;
                                }
                                let off = xo
                                    + i0 as usize * sx[0]
                                    + i1 as usize * sx[1]
                                    + i2 as usize * sx[2];
                                // SAFETY: coordinates inside x's shape.
                                let v = unsafe { *px.get().add(off) }.to_acc();
                                let take = match best {
                                    None => true,
                                    Some(b) => v > b || v.is_nan(),
                                };
                                if take {
                                    best = Some(v);
                                    index = (i0 * g.l[1] + i1) * g.l[2] + i2;
                                }
                            }
                        }
                    }
                    // SAFETY: `j` indexes this plane's outputs (contiguous).
                    unsafe {
                        *pv.get().add(j) = best.map_or(lowest, T::from_acc);
                        *pi.get().add(j) = index;
                    }
                    j += 1;
                }
            }
        }
    });
}

/// The divisor of window `o` (PyTorch's average pooling).
fn divisor(g: &Geom, o: [i64; 3], mode: AvgMode) -> i64 {
    if let Some(d) = mode.divisor_override {
        return d;
    }
    let (mut padded, mut inside) = (1i64, 1i64);
    for (dim, &od) in o.iter().enumerate() {
        let start = od * g.s[dim] - g.p[dim];
        let end = (start + g.k[dim]).min(g.l[dim] + g.p[dim]);
        padded *= end - start;
        inside *= end.min(g.l[dim]) - start.max(0);
    }
    if mode.count_include_pad {
        padded
    } else {
        inside
    }
}

/// The quotient of an average pooling's sum by its divisor: a float's in
/// its computation type, an integer's truncated.
pub(crate) trait Mean: Element {
    fn mean(sum: Self::Acc, divisor: i64) -> Self::Acc;
}

macro_rules! float_mean {
    ($($t:ty),*) => {$(
        impl Mean for $t {
            fn mean(sum: Self::Acc, divisor: i64) -> Self::Acc {
                sum.div(<Self::Acc as Arith>::from_f64(divisor as f64))
            }
        }
    )*};
}
float_mean!(f32, f64, half::f16, half::bf16);

impl Mean for i64 {
    fn mean(sum: i64, divisor: i64) -> i64 {
        // A divisor of -1 wraps i64::MIN as PyTorch's kernel does; 0 never
        // reaches here (`divisor_override` 0 is refused, a window holds an
        // input element).
        if divisor == 0 {
            0
        } else {
            sum.wrapping_div(divisor)
        }
    }
}

/// PyTorch's average pooling of `x` (`[N, C, L...]`, any strides) into the
/// contiguous `out` (`[N, C, O...]`): each window's input elements summed in
/// scan order in the computation type, divided by its divisor.
pub(crate) fn avg_pool<T: Mean>(out: &Arg, x: &Arg, w: &Windows, mode: AvgMode) {
    let g = Geom::of(w);
    let on = w.out_numel();
    let c = out.layout.shape[1];
    let planes = out.layout.shape[0] * c;
    let ([sb, sc], sx) = strides(x, w.spatial);
    let (po, px): (Ptr<T>, Ptr<T>) = (base(out), base(x));
    (0..planes).into_par_iter().for_each(|bc| {
        let xo = (bc / c) * sb + (bc % c) * sc;
        let mut j = bc * on;
        for o0 in 0..g.o[0] {
            for o1 in 0..g.o[1] {
                for o2 in 0..g.o[2] {
                    let mut sum = <T::Acc as Arith>::ZERO;
                    for k0 in 0..g.k[0] {
                        let (i0, in0) = g.at(0, o0, k0);
                        if !in0 {
                            continue;
                        }
                        for k1 in 0..g.k[1] {
                            let (i1, in1) = g.at(1, o1, k1);
                            if !in1 {
                                continue;
                            }
                            for k2 in 0..g.k[2] {
                                let (i2, in2) = g.at(2, o2, k2);
                                if in2 {
                                    let off = xo
                                        + i0 as usize * sx[0]
                                        + i1 as usize * sx[1]
                                        + i2 as usize * sx[2];
                                    // SAFETY: coordinates inside x's shape.
                                    sum = sum.add(unsafe { *px.get().add(off) }.to_acc());
                                }
                            }
                        }
                    }
                    let m = T::mean(sum, divisor(&g, [o0, o1, o2], mode));
                    // SAFETY: `j` indexes this plane's outputs (contiguous).
                    unsafe { *po.get().add(j) = T::from_acc(m) };
                    j += 1;
                }
            }
        }
    });
}

/// The input gradient of average pooling: `dx` (contiguous `[N, C, L...]`,
/// float) gets, for each window in output order, the window's gradient
/// (`dy` contiguous `[N, C, O...]`) over its divisor, added to each of its
/// input elements in the computation type.
pub(crate) fn avg_pool_backward<T: Mean>(dx: &Arg, dy: &Arg, w: &Windows, mode: AvgMode) {
    let g = Geom::of(w);
    let (on, ln) = (w.out_numel(), w.input_numel());
    let c = dx.layout.shape[1];
    let planes = dx.layout.shape[0] * c;
    let (pdx, pdy): (Ptr<T>, Ptr<T>) = (base(dx), base(dy));
    (0..planes).into_par_iter().for_each(|bc| {
        let mut acc = vec![<T::Acc as Arith>::ZERO; ln];
        let mut j = bc * on;
        for o0 in 0..g.o[0] {
            for o1 in 0..g.o[1] {
                for o2 in 0..g.o[2] {
                    // SAFETY: `j` indexes this plane's gradients.
                    let gy = unsafe { *pdy.get().add(j) }.to_acc();
                    let share = T::mean(gy, divisor(&g, [o0, o1, o2], mode));
                    j += 1;
                    for k0 in 0..g.k[0] {
                        let (i0, in0) = g.at(0, o0, k0);
                        if !in0 {
                            continue;
                        }
                        for k1 in 0..g.k[1] {
                            let (i1, in1) = g.at(1, o1, k1);
                            if !in1 {
                                continue;
                            }
                            for k2 in 0..g.k[2] {
                                let (i2, in2) = g.at(2, o2, k2);
                                if in2 {
                                    let at = ((i0 * g.l[1] + i1) * g.l[2] + i2) as usize;
                                    acc[at] = acc[at].add(share);
                                }
                            }
                        }
                    }
                }
            }
        }
        for (i, a) in acc.into_iter().enumerate() {
            // SAFETY: dx is contiguous; this plane is written by this task.
            unsafe { *pdx.get().add(bc * ln + i) = T::from_acc(a) };
        }
    });
}

/// The window `o` of kernel offset `k` along `dim` that reads input
/// coordinate `i`, if any.
fn window_of(g: &Geom, dim: usize, i: i64, k: i64) -> Option<i64> {
    let q = i + g.p[dim] - k * g.d[dim];
    (q >= 0 && q % g.s[dim] == 0 && q / g.s[dim] < g.o[dim]).then(|| q / g.s[dim])
}

/// The input gradient of max pooling: `dx` (contiguous `[N, C, L...]`,
/// float) sums, in the computation type and in window order, `dy[o]` over
/// the windows `o` holding the element whose index (`indices`, contiguous
/// `[N, C, O...]`) names it (`dy` contiguous `[N, C, O...]`). A window
/// without an input element holds nothing, so passes nothing.
pub(crate) fn max_pool_backward<T: Element>(dx: &Arg, dy: &Arg, indices: &Arg, w: &Windows) {
    let g = Geom::of(w);
    let (on, ln) = (w.out_numel(), w.input_numel());
    let c = dx.layout.shape[1];
    let planes = dx.layout.shape[0] * c;
    let (pdx, pdy, pi): (Ptr<T>, Ptr<T>, Ptr<i64>) = (base(dx), base(dy), base(indices));
    (0..planes).into_par_iter().for_each(|bc| {
        let mut l = 0usize;
        for l0 in 0..g.l[0] {
            for l1 in 0..g.l[1] {
                for l2 in 0..g.l[2] {
                    let mut acc = <T::Acc as Arith>::ZERO;
                    for k0 in (0..g.k[0]).rev() {
                        let Some(o0) = window_of(&g, 0, l0, k0) else {
                            continue;
                        };
                        for k1 in (0..g.k[1]).rev() {
                            let Some(o1) = window_of(&g, 1, l1, k1) else {
                                continue;
                            };
                            for k2 in (0..g.k[2]).rev() {
                                let Some(o2) = window_of(&g, 2, l2, k2) else {
                                    continue;
                                };
                                let j = bc * on + ((o0 * g.o[1] + o1) * g.o[2] + o2) as usize;
                                // SAFETY: `j` indexes this plane's windows
                                // (inside dy and indices, both contiguous).
                                unsafe {
                                    if *pi.get().add(j) == l as i64 {
                                        acc = acc.add((*pdy.get().add(j)).to_acc());
                                    }
                                }
                            }
                        }
                    }
                    // SAFETY: dx is contiguous; this plane is this task's.
                    unsafe { *pdx.get().add(bc * ln + l) = T::from_acc(acc) };
                    l += 1;
                }
            }
        }
    });
}
