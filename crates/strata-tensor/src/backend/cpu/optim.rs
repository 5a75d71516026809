//! Fused optimizer steps on the CPU: one pass over the parameter, its
//! gradient and its moments, in parallel chunks when large.

use super::dimops::{slice, slice_mut};
use crate::backend::Arg;
use crate::dtype::{Arith, DType, Element};
use crate::ops::AdamHyper;
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

/// One task's parameter, gradient and moment chunks.
type Chunks<'a, T> = (((&'a mut [T], &'a [T]), &'a mut [T]), &'a mut [T]);

/// Elements per parallel task.
const CHUNK: usize = 1 << 14;

fn adam<T: Element>(p: &Arg, g: &Arg, m: &Arg, v: &Arg, n: usize, h: &AdamHyper)
where
    T::Acc: Real,
{
    let (decay, step_size, c2_sqrt) = h.factors();
    let c = |x: f64| <T::Acc as Real>::of(x);
    let (decay, step_size, c2_sqrt, eps) = (c(decay), c(step_size), c(c2_sqrt), c(h.eps));
    let b2 = c(h.beta2);
    let (one_b1, one_b2) = (c(1.0 - h.beta1), c(1.0 - h.beta2));
    // PyTorch's `lerp`: `m + w (g - m)` for a weight below 0.5, else
    // `g + (w - 1) (g - m)`, each one fused multiply-add.
    let (small, one_b1_m1) = (one_b1.small_weight(), one_b1.sub(c(1.0)));
    let decays = h.weight_decay != 0.0;
    // SAFETY: the caller passes four contiguous operands of `T` with `n`
    // elements each, in four distinct storages: `p`, `m`, `v` write-locked,
    // `g` read-locked.
    let (ps, gs, ms, vs) = unsafe {
        (
            slice_mut::<T>(p, n),
            slice::<T>(g, n),
            slice_mut::<T>(m, n),
            slice_mut::<T>(v, n),
        )
    };
    let f = |(((pc, gc), mc), vc): Chunks<'_, T>| {
        for (((pe, &ge), me), ve) in pc.iter_mut().zip(gc).zip(mc.iter_mut()).zip(vc.iter_mut()) {
            let gr = ge.to_acc();
            let mut pr = pe.to_acc();
            if decays {
                pr = pr.mul(decay);
            }
            // The expressions and their rounding are those of PyTorch's
            // fused CPU kernel (`FusedAdamKernel.cpp`, its vectorized loop
            // as compiled, which contracts `v b2 + (1-b2) g g` into one
            // multiply-add): the same bits as `torch.optim.Adam(...,
            // fused=True)` on the CPU, where `m + (1-b1)(g - m)` unfused,
            // `b2 v + (1-b2) (g g)` and `p - lr' (m / denom)` differed from
            // it in the last place for about a third of the elements.
            let mr = me.to_acc();
            let d = gr.sub(mr);
            let mr = if small {
                one_b1.fma(d, mr)
            } else {
                one_b1_m1.fma(d, gr)
            };
            let vr = one_b2.mul(gr).fma(gr, ve.to_acc().mul(b2));
            let denom = vr.sqrt().div(c2_sqrt).add(eps);
            pr = pr.sub(step_size.mul(mr).div(denom));
            *me = T::from_acc(mr);
            *ve = T::from_acc(vr);
            *pe = T::from_acc(pr);
        }
    };
    if n >= 2 * CHUNK {
        ps.par_chunks_mut(CHUNK)
            .zip(gs.par_chunks(CHUNK))
            .zip(ms.par_chunks_mut(CHUNK))
            .zip(vs.par_chunks_mut(CHUNK))
            .for_each(f);
    } else {
        f((((ps, gs), ms), vs));
    }
}

/// One Adam / AdamW step (see [`Backend::adam_step`](crate::backend::Backend::adam_step)).
pub(super) fn adam_step(p: &Arg, g: &Arg, m: &Arg, v: &Arg, n: usize, h: &AdamHyper) {
    match p.dtype {
        DType::F32 => adam::<f32>(p, g, m, v, n, h),
        DType::F64 => adam::<f64>(p, g, m, v, n, h),
        DType::F16 => adam::<half::f16>(p, g, m, v, n, h),
        DType::BF16 => adam::<half::bf16>(p, g, m, v, n, h),
        d => unreachable!("adam_step on {d}: the tensor layer admits floats only"),
    }
}
