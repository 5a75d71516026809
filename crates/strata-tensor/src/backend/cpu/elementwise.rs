//! Typed element-wise kernels: one generic inner loop per arity, with
//! contiguous and scalar-broadcast fast paths written as plain indexed loops
//! that LLVM vectorises, and a strided fallback.

use super::loops;
use crate::backend::Arg;
use crate::iter_plan::IterPlan;
use std::mem::size_of;

/// Address of the first element of an operand.
pub(crate) fn base(a: &Arg) -> *mut u8 {
    a.storage
        .host_ptr()
        .wrapping_add(a.layout.offset * a.dtype.size())
}

fn plan<const N: usize>(args: [&Arg; N]) -> IterPlan<N> {
    let shape = &args[0].layout.shape;
    IterPlan::new(
        shape,
        std::array::from_fn(|i| args[i].layout.strides.as_slice()),
        std::array::from_fn(|i| args[i].dtype.size()),
    )
}

/// out[i] = f(a[i]).
pub(crate) fn map1<A: Copy, O: Copy>(out: &Arg, a: &Arg, f: impl Fn(A) -> O + Sync) {
    let p = plan([out, a]);
    let row = |n: usize, p: [*mut u8; 2], s: [isize; 2]| {
        let (o, x) = (p[0] as *mut O, p[1] as *const A);
        let (eo, ea) = (size_of::<O>() as isize, size_of::<A>() as isize);
        // SAFETY: `loops::run` passes rows inside both operands' layouts; the
        // caller checked the dtypes match `A`/`O` and that writes do not
        // clobber inputs still to be read (overlap checks or full aliasing).
        unsafe {
            if s == [eo, ea] && o as *const u8 == x as *const u8 {
                // In place: one pointer, so LLVM's runtime alias check
                // (which fails for identical ranges) does not block vectorising.
                let xo = o as *mut A;
                for i in 0..n {
                    *o.add(i) = f(*xo.add(i));
                }
            } else if s == [eo, ea] {
                for i in 0..n {
                    *o.add(i) = f(*x.add(i));
                }
            } else if s == [eo, 0] {
                let v = f(*x);
                for i in 0..n {
                    *o.add(i) = v;
                }
            } else {
                for i in 0..n as isize {
                    *o.byte_offset(i * s[0]) = f(*x.byte_offset(i * s[1]));
                }
            }
        }
    };
    // SAFETY: the plan is built from the operands' own layouts over their storages.
    unsafe { loops::run(&p, [base(out), base(a)], row) };
}

/// out[i] = f(a[i], b[i]).
pub(crate) fn map2<A: Copy, B: Copy, O: Copy>(
    out: &Arg,
    a: &Arg,
    b: &Arg,
    f: impl Fn(A, B) -> O + Sync,
) {
    let p = plan([out, a, b]);
    let row = |n: usize, p: [*mut u8; 3], s: [isize; 3]| {
        let (o, x, y) = (p[0] as *mut O, p[1] as *const A, p[2] as *const B);
        let (eo, ea, eb) = (
            size_of::<O>() as isize,
            size_of::<A>() as isize,
            size_of::<B>() as isize,
        );
        // SAFETY: as in `map1`.
        unsafe {
            let in_place = o as *const u8 == x as *const u8;
            if s == [eo, ea, eb] && in_place {
                // In place: read and write through one pointer so that only
                // `y` needs LLVM's runtime alias check (see `map1`).
                let xo = o as *mut A;
                for i in 0..n {
                    *o.add(i) = f(*xo.add(i), *y.add(i));
                }
            } else if s == [eo, ea, eb] {
                for i in 0..n {
                    *o.add(i) = f(*x.add(i), *y.add(i));
                }
            } else if s == [eo, ea, 0] && in_place {
                let (yv, xo) = (*y, o as *mut A);
                for i in 0..n {
                    *o.add(i) = f(*xo.add(i), yv);
                }
            } else if s == [eo, ea, 0] {
                let yv = *y;
                for i in 0..n {
                    *o.add(i) = f(*x.add(i), yv);
                }
            } else if s == [eo, 0, eb] {
                let xv = *x;
                for i in 0..n {
                    *o.add(i) = f(xv, *y.add(i));
                }
            } else if s == [2 * eo, 2 * ea, 2 * eb] && in_place {
                // Every other element (`a[:, ::2] += b[:, ::2]`): a constant
                // stride lets LLVM vectorise with interleaved loads.
                let xo = o as *mut A;
                for i in 0..n {
                    *o.add(2 * i) = f(*xo.add(2 * i), *y.add(2 * i));
                }
            } else {
                for i in 0..n as isize {
                    *o.byte_offset(i * s[0]) =
                        f(*x.byte_offset(i * s[1]), *y.byte_offset(i * s[2]));
                }
            }
        }
    };
    // SAFETY: the plan is built from the operands' own layouts over their storages.
    unsafe { loops::run(&p, [base(out), base(a), base(b)], row) };
}

/// out[i] = f(a[i], b[i], c[i]).
pub(crate) fn map3<A: Copy, B: Copy, C: Copy, O: Copy>(
    out: &Arg,
    a: &Arg,
    b: &Arg,
    c: &Arg,
    f: impl Fn(A, B, C) -> O + Sync,
) {
    let p = plan([out, a, b, c]);
    let row = |n: usize, p: [*mut u8; 4], s: [isize; 4]| {
        let (o, x, y, z) = (
            p[0] as *mut O,
            p[1] as *const A,
            p[2] as *const B,
            p[3] as *const C,
        );
        let e = [
            size_of::<O>(),
            size_of::<A>(),
            size_of::<B>(),
            size_of::<C>(),
        ]
        .map(|e| e as isize);
        // SAFETY: as in `map1`.
        unsafe {
            if s == e && o as *const u8 == x as *const u8 {
                let xo = o as *mut A;
                for i in 0..n {
                    *o.add(i) = f(*xo.add(i), *y.add(i), *z.add(i));
                }
            } else if s == e {
                for i in 0..n {
                    *o.add(i) = f(*x.add(i), *y.add(i), *z.add(i));
                }
            } else {
                for i in 0..n as isize {
                    *o.byte_offset(i * s[0]) = f(
                        *x.byte_offset(i * s[1]),
                        *y.byte_offset(i * s[2]),
                        *z.byte_offset(i * s[3]),
                    );
                }
            }
        }
    };
    // SAFETY: the plan is built from the operands' own layouts over their storages.
    unsafe { loops::run(&p, [base(out), base(a), base(b), base(c)], row) };
}

/// out[i] = v.
pub(crate) fn fill<O: Copy + Send + Sync>(out: &Arg, v: O) {
    let p = plan([out]);
    let row = |n: usize, p: [*mut u8; 1], s: [isize; 1]| {
        let o = p[0] as *mut O;
        // SAFETY: rows lie inside the output's layout, which the caller has
        // stripped of stride-0 dims, so every address is written once.
        unsafe {
            if s[0] == size_of::<O>() as isize {
                for i in 0..n {
                    *o.add(i) = v;
                }
            } else {
                for i in 0..n as isize {
                    *o.byte_offset(i * s[0]) = v;
                }
            }
        }
    };
    // SAFETY: the plan is built from the output's layout over its storage.
    unsafe { loops::run(&p, [base(out)], row) };
}
