//! The CPU kernels of the sliding-window ops ([`WindowKernel::Im2col`] and its
//! adjoint, max and average pooling and their backwards): parallel over
//! the `[N, C]` planes (rayon), each plane walked with the three spatial
//! dims of [`Windows`] (unit dims in front) by [`Geom`]'s walkers. Sums
//! follow PyTorch's CPU loops: a window's elements in scan order; a
//! gradient's contributions to an input element in the order its kernel
//! adds them (by kernel offset for columns, by window for pooling).
//!
//! [`WindowKernel::Im2col`]: crate::backend::WindowKernel::Im2col

use super::nn::{base, Ptr};
use crate::backend::{Arg, WindowKernel};
use crate::dispatch_dtype;
use crate::dtype::{Arith, DType, Element};
use crate::ops::{AvgMode, Windows};
use rayon::prelude::*;

/// A window geometry in i64.
struct Geom {
    l: [i64; 3],
    o: [i64; 3],
    k: [i64; 3],
    s: [i64; 3],
    p: [i64; 3],
    d: [i64; 3],
}

/// A position along the three spatial dims.
type Pos = [i64; 3];

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

    /// Calls `f` with every position of `sizes`, row-major.
    fn each(sizes: Pos, mut f: impl FnMut(Pos)) {
        for a in 0..sizes[0] {
            for b in 0..sizes[1] {
                for c in 0..sizes[2] {
                    f([a, b, c]);
                }
            }
        }
    }

    /// The input element at kernel offset `k` of window `o`, if inside.
    fn element(&self, o: Pos, k: Pos) -> Option<Pos> {
        let (i0, in0) = self.at(0, o[0], k[0]);
        let (i1, in1) = self.at(1, o[1], k[1]);
        let (i2, in2) = self.at(2, o[2], k[2]);
        (in0 && in1 && in2).then_some([i0, i1, i2])
    }

    /// The kernel offsets of window `o` along `dim` that land inside the
    /// input, `lo..hi` (PyTorch's clipped window: the work is bounded by
    /// the input, however large the kernel or the padding).
    fn inside(&self, dim: usize, o: i64) -> (i64, i64) {
        let (d, start) = (self.d[dim], o * self.s[dim] - self.p[dim]);
        let lo = if start < 0 { (-start + d - 1) / d } else { 0 };
        let room = self.l[dim] - start;
        let hi = if room > 0 {
            ((room + d - 1) / d).min(self.k[dim])
        } else {
            0
        };
        (lo, hi.max(lo))
    }

    /// Calls `f` with every input element of window `o`, in scan order.
    fn each_element(&self, o: Pos, mut f: impl FnMut(Pos)) {
        let r = [0, 1, 2].map(|dim| self.inside(dim, o[dim]));
        let at = |dim: usize, k: i64| o[dim] * self.s[dim] - self.p[dim] + k * self.d[dim];
        for k0 in r[0].0..r[0].1 {
            for k1 in r[1].0..r[1].1 {
                for k2 in r[2].0..r[2].1 {
                    f([at(0, k0), at(1, k1), at(2, k2)]);
                }
            }
        }
    }

    /// The windows along `dim` that can hold input coordinate `l`,
    /// `lo..=hi` (each holds it where `(l + pad - o * stride)` is a multiple
    /// of the dilation): at most the number of windows.
    fn holding(&self, dim: usize, l: i64) -> (i64, i64) {
        let (q, s) = (l + self.p[dim], self.s[dim]);
        let reach = (self.k[dim] - 1) * self.d[dim];
        let lo = if q > reach {
            (q - reach + s - 1) / s
        } else {
            0
        };
        (lo, (q / s).min(self.o[dim] - 1))
    }

    /// Calls `f` with every window that holds input element `l`, in output
    /// order.
    fn each_window_of(&self, l: Pos, mut f: impl FnMut(Pos)) {
        let r = [0, 1, 2].map(|dim| self.holding(dim, l[dim]));
        let holds =
            |dim: usize, o: i64| (l[dim] + self.p[dim] - o * self.s[dim]) % self.d[dim] == 0;
        for o0 in (r[0].0..=r[0].1).filter(|&o| holds(0, o)) {
            for o1 in (r[1].0..=r[1].1).filter(|&o| holds(1, o)) {
                for o2 in (r[2].0..=r[2].1).filter(|&o| holds(2, o)) {
                    f([o0, o1, o2]);
                }
            }
        }
    }

    /// The flat index of input position `i` in a plane.
    fn flat_input(&self, i: Pos) -> i64 {
        (i[0] * self.l[1] + i[1]) * self.l[2] + i[2]
    }

    /// The flat index of window `o` in a plane.
    fn flat_out(&self, o: Pos) -> usize {
        ((o[0] * self.o[1] + o[1]) * self.o[2] + o[2]) as usize
    }

    /// Average pooling's divisor of window `o` (PyTorch's).
    fn divisor(&self, o: Pos, mode: AvgMode) -> i64 {
        if let Some(d) = mode.divisor_override {
            return d;
        }
        let (mut padded, mut inside) = (1i64, 1i64);
        for (dim, &od) in o.iter().enumerate() {
            let start = od * self.s[dim] - self.p[dim];
            let end = (start + self.k[dim]).min(self.l[dim] + self.p[dim]);
            padded *= end - start;
            inside *= end.min(self.l[dim]) - start.max(0);
        }
        if mode.count_include_pad {
            padded
        } else {
            inside
        }
    }
}

/// An `[N, C, L...]` operand read through its strides: its base pointer and
/// the offset of each plane and spatial position.
struct Strided<T> {
    ptr: Ptr<T>,
    c: usize,
    sb: usize,
    sc: usize,
    sx: [usize; 3],
}

impl<T: Copy> Strided<T> {
    fn of(a: &Arg, spatial: usize) -> Self {
        let st = &a.layout.strides;
        let mut sx = [0usize; 3];
        sx[3 - spatial..].copy_from_slice(&st[2..]);
        Strided {
            ptr: base(a),
            c: a.layout.shape[1],
            sb: st[0],
            sc: st[1],
            sx,
        }
    }

    /// The element of plane `bc` at position `i` (inside the operand).
    fn read(&self, bc: usize, i: Pos) -> T {
        let off = (bc / self.c) * self.sb
            + (bc % self.c) * self.sc
            + i[0] as usize * self.sx[0]
            + i[1] as usize * self.sx[1]
            + i[2] as usize * self.sx[2];
        // SAFETY: callers pass positions inside the operand's shape, so the
        // offset addresses one of its elements.
        unsafe { *self.ptr.get().add(off) }
    }
}

/// The number of `[N, C]` planes of an operand.
fn planes(a: &Arg) -> usize {
    a.layout.shape[0] * a.layout.shape[1]
}

/// Writes `v` at index `i` of the contiguous output `p`.
fn write<T>(p: Ptr<T>, i: usize, v: T) {
    // SAFETY: callers write each plane's own elements of a contiguous
    // output (planes are disjoint between tasks).
    unsafe { *p.get().add(i) = v };
}

/// Reads index `i` of the contiguous operand `p`.
fn read<T: Copy>(p: Ptr<T>, i: usize) -> T {
    // SAFETY: callers read indices inside the contiguous operand.
    unsafe { *p.get().add(i) }
}

/// Runs the window kernel `op` over `windows`.
pub(crate) fn run(windows: &Windows, op: WindowKernel) {
    macro_rules! float {
        ($d:expr, $f:ident ( $($a:expr),* )) => {
            match $d {
                DType::F32 => $f::<f32>($($a),*),
                DType::F64 => $f::<f64>($($a),*),
                DType::F16 => $f::<half::f16>($($a),*),
                _ => $f::<half::bf16>($($a),*),
            }
        };
    }
    match op {
        WindowKernel::Im2col { cols, x } => match x.dtype.size() {
            1 => im2col::<u8>(cols, x, windows),
            2 => im2col::<u16>(cols, x, windows),
            4 => im2col::<u32>(cols, x, windows),
            _ => im2col::<u64>(cols, x, windows),
        },
        WindowKernel::Col2im { x, cols } if x.dtype == DType::Bool => {
            col2im::<bool>(x, cols, windows)
        }
        WindowKernel::Col2im { x, cols } if x.dtype == DType::I64 => {
            col2im::<i64>(x, cols, windows)
        }
        WindowKernel::Col2im { x, cols } => float!(x.dtype, col2im(x, cols, windows)),
        WindowKernel::MaxPool { values, indices, x } => {
            let lowest = crate::ops::windows::lowest(x.dtype);
            dispatch_dtype!(x.dtype, T => max_pool::<T>(
                values,
                indices,
                x,
                windows,
                T::from_scalar(lowest),
            ))
        }
        WindowKernel::MaxPoolBackward { dx, dy, indices } => {
            float!(dx.dtype, max_pool_backward(dx, dy, indices, windows))
        }
        WindowKernel::AvgPool { out, x, mode } if x.dtype == DType::I64 => {
            avg_pool::<i64>(out, x, windows, mode)
        }
        WindowKernel::AvgPool { out, x, mode } => float!(x.dtype, avg_pool(out, x, windows, mode)),
        WindowKernel::AvgPoolBackward { dx, dy, mode } => {
            float!(dx.dtype, avg_pool_backward(dx, dy, windows, mode))
        }
    }
}

/// Columns `[N, C * K, O]` (contiguous) of `x` (`[N, C, L...]`, any
/// strides), element bits copied, zeros outside the input.
fn im2col<T: Copy + Default + Send + Sync>(cols: &Arg, x: &Arg, w: &Windows) {
    let g = Geom::of(w);
    let (kn, on) = (w.kernel_numel(), w.out_numel());
    let src = Strided::<T>::of(x, w.spatial);
    let pc: Ptr<T> = base(cols);
    (0..planes(x)).into_par_iter().for_each(|bc| {
        let mut j = bc * kn * on;
        Geom::each(g.k, |k| {
            Geom::each(g.o, |o| {
                let v = g.element(o, k).map_or_else(T::default, |i| src.read(bc, i));
                write(pc, j, v);
                j += 1;
            });
        });
    });
}

/// The adjoint of [`im2col`]: `x` (`[N, C, L...]`, contiguous) gets each
/// input position's sum of the column entries (`cols` contiguous
/// `[N, C * K, O]`) that read it, by kernel offset, in the computation
/// type (bool: or).
fn col2im<T: Element>(x: &Arg, cols: &Arg, w: &Windows) {
    let g = Geom::of(w);
    let (kn, on, ln) = (w.kernel_numel(), w.out_numel(), w.input_numel());
    let (pxo, pc): (Ptr<T>, Ptr<T>) = (base(x), base(cols));
    (0..planes(x)).into_par_iter().for_each(|bc| {
        let mut acc = vec![<T::Acc as Arith>::ZERO; ln];
        let mut j = bc * kn * on;
        Geom::each(g.k, |k| {
            Geom::each(g.o, |o| {
                if let Some(i) = g.element(o, k) {
                    let at = g.flat_input(i) as usize;
                    acc[at] = acc[at].add(read(pc, j).to_acc());
                }
                j += 1;
            });
        });
        for (i, a) in acc.into_iter().enumerate() {
            write(pxo, bc * ln + i, T::from_acc(a));
        }
    });
}

/// PyTorch's max pooling of `x` (`[N, C, L...]`, any strides): `values`
/// and `indices` contiguous `[N, C, O...]`. A window's first element inside
/// the input starts the scan; a later one takes over where it is greater
/// or NaN. A window without an input element gives `lowest` and the index
/// of its first position past the left padding.
fn max_pool<T: Element>(values: &Arg, indices: &Arg, x: &Arg, w: &Windows, lowest: T) {
    let g = Geom::of(w);
    let on = w.out_numel();
    let src = Strided::<T>::of(x, w.spatial);
    let (pv, pi): (Ptr<T>, Ptr<i64>) = (base(values), base(indices));
    (0..planes(x)).into_par_iter().for_each(|bc| {
        Geom::each(g.o, |o| {
            let first = |dim: usize| {
                let start = o[dim] * g.s[dim] - g.p[dim];
                if start < 0 {
                    start + (-start + g.d[dim] - 1) / g.d[dim] * g.d[dim]
                } else {
                    start
                }
            };
            let mut index = g.flat_input([first(0), first(1), first(2)]);
            let mut best: Option<T::Acc> = None;
            g.each_element(o, |i| {
                let v = src.read(bc, i).to_acc();
                if best.is_none_or(|b| v > b || v.is_nan()) {
                    best = Some(v);
                    index = g.flat_input(i);
                }
            });
            let j = bc * on + g.flat_out(o);
            write(pv, j, best.map_or(lowest, T::from_acc));
            write(pi, j, index);
        });
    });
}

/// The input gradient of max pooling: `dx` (contiguous `[N, C, L...]`,
/// float) sums, in the computation type and in window order, `dy[o]` over
/// the windows `o` holding the element whose index (`indices`, contiguous
/// `[N, C, O...]`) names it (`dy` contiguous `[N, C, O...]`). A window
/// without an input element holds nothing, so passes nothing.
fn max_pool_backward<T: Element>(dx: &Arg, dy: &Arg, indices: &Arg, w: &Windows) {
    let g = Geom::of(w);
    let (on, ln) = (w.out_numel(), w.input_numel());
    let (pdx, pdy, pi): (Ptr<T>, Ptr<T>, Ptr<i64>) = (base(dx), base(dy), base(indices));
    (0..planes(dx)).into_par_iter().for_each(|bc| {
        Geom::each(g.l, |l| {
            let at = g.flat_input(l);
            let mut acc = <T::Acc as Arith>::ZERO;
            g.each_window_of(l, |o| {
                let j = bc * on + g.flat_out(o);
                if read(pi, j) == at {
                    acc = acc.add(read(pdy, j).to_acc());
                }
            });
            write(pdx, bc * ln + at as usize, T::from_acc(acc));
        });
    });
}

/// The quotient of an average pooling's sum by its divisor: a float's in
/// its computation type, an integer's truncated.
trait Mean: Element {
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
fn avg_pool<T: Mean>(out: &Arg, x: &Arg, w: &Windows, mode: AvgMode) {
    let g = Geom::of(w);
    let on = w.out_numel();
    let src = Strided::<T>::of(x, w.spatial);
    let po: Ptr<T> = base(out);
    (0..planes(x)).into_par_iter().for_each(|bc| {
        Geom::each(g.o, |o| {
            let mut sum = <T::Acc as Arith>::ZERO;
            g.each_element(o, |i| sum = sum.add(src.read(bc, i).to_acc()));
            let m = T::mean(sum, g.divisor(o, mode));
            write(po, bc * on + g.flat_out(o), T::from_acc(m));
        });
    });
}

/// The input gradient of average pooling: `dx` (contiguous `[N, C, L...]`,
/// float) sums, in the computation type and in window order, each holding
/// window's gradient (`dy` contiguous `[N, C, O...]`) over its divisor.
fn avg_pool_backward<T: Mean>(dx: &Arg, dy: &Arg, w: &Windows, mode: AvgMode) {
    let g = Geom::of(w);
    let (on, ln) = (w.out_numel(), w.input_numel());
    let (pdx, pdy): (Ptr<T>, Ptr<T>) = (base(dx), base(dy));
    (0..planes(dx)).into_par_iter().for_each(|bc| {
        Geom::each(g.l, |l| {
            let mut acc = <T::Acc as Arith>::ZERO;
            g.each_window_of(l, |o| {
                let gy = read(pdy, bc * on + g.flat_out(o)).to_acc();
                acc = acc.add(T::mean(gy, g.divisor(o, mode)));
            });
            write(pdx, bc * ln + g.flat_input(l) as usize, T::from_acc(acc));
        });
    });
}
