//! Matrix products: floats through the `gemm` crate (any strides), integers
//! (which no well-kept GEMM crate covers) through a plain wrapping loop.

use crate::backend::cpu::elementwise::base;
use crate::backend::Arg;
use crate::dtype::{Arith, Element};

/// Batched `out[b] = a[b] @ b[b]` for f32/f64, operands `[B, m, k]`, `[B, k, n]`.
pub(crate) fn gemm<T: Element + Default>(out: &Arg, a: &Arg, b: &Arg) {
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
                for r in 0..m * n {
                    *dst.add(r) = T::default();
                }
                continue;
            }
            gemm::gemm(
                m,
                n,
                k,
                dst,
                so[2] as isize,
                so[1] as isize,
                false,
                pa.add(i * sa[0]),
                sa[2] as isize,
                sa[1] as isize,
                pb.add(i * sb[0]),
                sb[2] as isize,
                sb[1] as isize,
                T::default(),
                one::<T>(),
                false,
                false,
                false,
                par,
            );
        }
    }
}

fn one<T: Element>() -> T {
    T::from_acc(<T::Acc as Arith>::ONE)
}

/// Integer matmul with wrapping arithmetic (PyTorch's integer matmul wraps too).
pub(crate) fn integer<T: Element>(out: &Arg, a: &Arg, b: &Arg) {
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
                let mut acc = <T::Acc as Arith>::ZERO;
                for p in 0..k {
                    // SAFETY: indices are within each operand's shape, so the
                    // addresses lie inside its layout over its storage.
                    unsafe {
                        let x = *pa.add(bi * sa[0] + i * sa[1] + p * sa[2]);
                        let y = *pb.add(bi * sb[0] + p * sb[1] + j * sb[2]);
                        acc = acc.add(x.to_acc().mul(y.to_acc()));
                    }
                }
                // SAFETY: out is a fresh [B, m, n] tensor; the index is in range.
                unsafe { *po.add(bi * so[0] + i * so[1] + j * so[2]) = T::from_acc(acc) };
            }
        }
    }
}
