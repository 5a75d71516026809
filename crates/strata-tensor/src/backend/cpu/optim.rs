//! Fused optimizer steps on the CPU: one pass over the parameter, its
//! gradient and its moments, in parallel chunks when large.

use super::dimops::{slice, slice_mut};
use crate::dtype::{Arith, DType, Element};
use crate::ops::{AdamItem, AdamStep};
use rayon::prelude::*;

/// The computation types of the float dtypes (f32 for f16/bf16/f32, f64).
trait Real: Arith {
    fn of(x: f64) -> Self;
    fn sqrt(self) -> Self;
    /// `self * b + c` rounded once (PyTorch's kernel computes its
    /// `fmadd`s, and the products-plus-sums its compiler contracts, so).
    fn fma(self, b: Self, c: Self) -> Self;
    fn small_weight(self) -> bool;
}

impl Real for f32 {
    fn of(x: f64) -> f32 {
        x as f32
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn fma(self, b: f32, c: f32) -> f32 {
        // The f64 product of two f32 values is exact, so one f64 sum and the
        // conversion round as a fused multiply-add would (bar a double
        // rounding once in about 2^29 sums), without needing the FMA
        // instruction (`f32::mul_add` falls back to a slow libm call).
        (f64::from(self) * f64::from(b) + f64::from(c)) as f32
    }
    fn small_weight(self) -> bool {
        self.abs() < 0.5
    }
}

impl Real for f64 {
    fn of(x: f64) -> f64 {
        x
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn fma(self, b: f64, c: f64) -> f64 {
        self.mul_add(b, c)
    }
    fn small_weight(self) -> bool {
        self.abs() < 0.5
    }
}

/// The constants of one step, in the computation type.
#[derive(Clone, Copy)]
struct Consts<R> {
    decay: R,
    step_size: R,
    c2_sqrt: R,
    eps: R,
    b2: R,
    one_b1: R,
    one_b2: R,
    one_b1_m1: R,
    small: bool,
    decays: bool,
    maximize: bool,
}

/// `max(a, b)`, NaN if either is NaN: PyTorch's vectorized `maximum`, which
/// its fused kernel's AMSGrad takes for all but a tensor's last few
/// elements.
fn max_nan<R: Arith>(a: R, b: R) -> R {
    if a.is_nan() {
        a
    } else if b.is_nan() || b > a {
        b
    } else {
        a
    }
}

/// `std::max(a, b)`: `b` if `a < b`, else `a` (so `a` when either is
/// NaN), which PyTorch's fused kernel's AMSGrad takes in its scalar tail.
fn max_std<R: Arith>(a: R, b: R) -> R {
    if a < b {
        b
    } else {
        a
    }
}

/// The elements of a vector of PyTorch's fused Adam kernel (AVX2, 32
/// bytes): its scalar loop takes a tensor's last `n % lanes` elements.
fn tail_start<T>(n: usize) -> usize {
    let lanes = 32 / std::mem::size_of::<T>();
    n - n % lanes
}

/// One element's step: `max` is the running maximum of the second moment
/// (AMSGrad), or `None`; `tail` for the elements of PyTorch's scalar loop.
#[inline(always)]
fn adam1<T: Element>(
    pe: &mut T,
    ge: T,
    me: &mut T,
    ve: &mut T,
    max: Option<&mut T>,
    k: &Consts<T::Acc>,
    tail: bool,
) where
    T::Acc: Real,
{
    let mut gr = ge.to_acc();
    if k.maximize {
        // PyTorch: `grad * -1`, exact.
        gr = gr.neg();
    }
    let mut pr = pe.to_acc();
    if k.decays {
        pr = pr.mul(k.decay);
    }
    // The expressions and their rounding are those of PyTorch's fused CPU
    // kernel (`FusedAdamKernel.cpp`, its vectorized loop as compiled, which
    // contracts `v b2 + (1-b2) g g` into one multiply-add): the same bits as
    // `torch.optim.Adam(..., fused=True)` on the CPU, where
    // `m + (1-b1)(g - m)` unfused, `b2 v + (1-b2) (g g)` and
    // `p - lr' (m / denom)` differed from it in the last place for about a
    // third of the elements.
    let mr = me.to_acc();
    let d = gr.sub(mr);
    let mr = if k.small {
        k.one_b1.fma(d, mr)
    } else {
        k.one_b1_m1.fma(d, gr)
    };
    // The scalar tail contracts the other product (its `v * beta2` is a
    // statement of its own): `fma(v, b2, ((1-b2) g) g)`.
    let vr = if tail {
        ve.to_acc().fma(k.b2, k.one_b2.mul(gr).mul(gr))
    } else {
        k.one_b2.mul(gr).fma(gr, ve.to_acc().mul(k.b2))
    };
    // AMSGrad: the maximum of the stored maximum and the new `v`, unrounded
    // (f32 for f16/bf16), as PyTorch's kernel; the stored copy is rounded.
    let root_of = match max {
        Some(xe) => {
            let xr = if tail {
                max_std(xe.to_acc(), vr)
            } else {
                max_nan(xe.to_acc(), vr)
            };
            *xe = T::from_acc(xr);
            xr
        }
        None => vr,
    };
    let denom = root_of.sqrt().div(k.c2_sqrt).add(k.eps);
    pr = pr.sub(k.step_size.mul(mr).div(denom));
    *me = T::from_acc(mr);
    *ve = T::from_acc(vr);
    *pe = T::from_acc(pr);
}

/// One task's parameter, gradient and moment chunks.
type Chunks<'a, T> = (((&'a mut [T], &'a [T]), &'a mut [T]), &'a mut [T]);

/// Elements per parallel task.
const CHUNK: usize = 1 << 14;

fn adam<T: Element>(it: &AdamItem<'_>, n: usize, s: &AdamStep)
where
    T::Acc: Real,
{
    let h = &s.h;
    let (decay, step_size, c2_sqrt) = h.factors();
    let c = |x: f64| <T::Acc as Real>::of(x);
    let one_b1 = c(1.0 - h.beta1);
    // PyTorch's `lerp`: `m + w (g - m)` for a weight below 0.5, else
    // `g + (w - 1) (g - m)`, each one fused multiply-add.
    let k = Consts {
        decay: c(decay),
        step_size: c(step_size),
        c2_sqrt: c(c2_sqrt),
        eps: c(h.eps),
        b2: c(h.beta2),
        one_b1,
        one_b2: c(1.0 - h.beta2),
        one_b1_m1: one_b1.sub(c(1.0)),
        small: one_b1.small_weight(),
        decays: h.weight_decay != 0.0,
        maximize: s.maximize,
    };
    // SAFETY: the caller passes four contiguous operands of `T` with `n`
    // elements each, in four distinct storages: `p`, `m`, `v` write-locked,
    // `g` read-locked.
    let (ps, gs, ms, vs) = unsafe {
        (
            slice_mut::<T>(&it.p, n),
            slice::<T>(&it.g, n),
            slice_mut::<T>(&it.m, n),
            slice_mut::<T>(&it.v, n),
        )
    };
    let xs = match &it.max {
        // SAFETY: for AMSGrad the caller also passes `max`, contiguous with
        // `n` elements of `T`, write-locked, in a fifth storage.
        Some(x) if s.amsgrad => Some(unsafe { slice_mut::<T>(x, n) }),
        _ => None,
    };
    // PyTorch's scalar tail, serially; the vector loop's elements below.
    let t = tail_start::<T>(n);
    let (ps, pt) = ps.split_at_mut(t);
    let (gs, gt) = gs.split_at(t);
    let (ms, mt) = ms.split_at_mut(t);
    let (vs, vt) = vs.split_at_mut(t);
    let (xs, mut xt) = match xs {
        Some(x) => {
            let (a, b) = x.split_at_mut(t);
            (Some(a), Some(b))
        }
        None => (None, None),
    };
    for (i, (((pe, &ge), me), ve)) in pt
        .iter_mut()
        .zip(gt)
        .zip(mt.iter_mut())
        .zip(vt.iter_mut())
        .enumerate()
    {
        let xe = xt.as_mut().map(|x| &mut x[i]);
        adam1(pe, ge, me, ve, xe, &k, true);
    }
    let n = t;
    let f = |(((pc, gc), mc), vc): Chunks<'_, T>, xc: Option<&mut [T]>| match xc {
        Some(xc) => {
            let it = pc.iter_mut().zip(gc).zip(mc.iter_mut()).zip(vc.iter_mut());
            for ((((pe, &ge), me), ve), xe) in it.zip(xc.iter_mut()) {
                adam1(pe, ge, me, ve, Some(xe), &k, false);
            }
        }
        None => {
            let it = pc.iter_mut().zip(gc).zip(mc.iter_mut()).zip(vc.iter_mut());
            for (((pe, &ge), me), ve) in it {
                adam1(pe, ge, me, ve, None, &k, false);
            }
        }
    };
    if n < 2 * CHUNK {
        return f((((ps, gs), ms), vs), xs);
    }
    let chunks = ps
        .par_chunks_mut(CHUNK)
        .zip(gs.par_chunks(CHUNK))
        .zip(ms.par_chunks_mut(CHUNK))
        .zip(vs.par_chunks_mut(CHUNK));
    match xs {
        Some(xs) => chunks
            .zip(xs.par_chunks_mut(CHUNK))
            .for_each(|(c, x)| f(c, Some(x))),
        None => chunks.for_each(|c| f(c, None)),
    }
}

/// One Adam / AdamW step (see [`Backend::adam_step`](crate::backend::Backend::adam_step)).
pub(super) fn adam_step(it: &AdamItem<'_>, n: usize, s: &AdamStep) {
    match it.p.dtype {
        DType::F32 => adam::<f32>(it, n, s),
        DType::F64 => adam::<f64>(it, n, s),
        DType::F16 => adam::<half::f16>(it, n, s),
        DType::BF16 => adam::<half::bf16>(it, n, s),
        d => unreachable!("adam_step on {d}: the tensor layer admits floats only"),
    }
}
