//! Typed element-wise kernels: one generic loop nest per arity over blocks of
//! rows ([`Rows`]), with contiguous and broadcast fast paths written as plain
//! indexed loops that LLVM vectorises, and a strided fallback. Each kernel is
//! compiled twice: for the target's baseline and, on x86_64, with AVX2
//! enabled; [`simd`] picks one per call.

use super::loops::{self, Rows};
use super::simd;
use crate::backend::Arg;
use crate::iter_plan::IterPlan;
use std::mem::size_of;

/// Address of the first element of an operand.
pub(crate) fn base(a: &Arg) -> *mut u8 {
    // An empty view's offset is not bounded by its storage (`as_strided` of
    // shape [0] at offset 2^62 is valid, as in PyTorch) and nothing is
    // accessed through it; a non-empty view's offset in bytes lies inside
    // its storage, so the multiplication wraps only for the former.
    a.mem
        .host_ptr()
        .wrapping_add(a.layout.offset.wrapping_mul(a.dtype.size()))
}

fn plan<const N: usize>(args: [&Arg; N]) -> IterPlan<N> {
    let shape = &args[0].layout.shape;
    IterPlan::new(
        shape,
        std::array::from_fn(|i| args[i].layout.strides.as_slice()),
        std::array::from_fn(|i| args[i].dtype.size()),
    )
}

/// Byte sizes of the operands' element types.
macro_rules! sizes {
    ($($t:ty),+) => { [$(size_of::<$t>() as isize),+] };
}

/// Runs `$body` for every row of `$r`, with `$p` bound to the row's operand
/// pointers cast to `$t`s.
macro_rules! each_row {
    ($r:expr, [$($p:ident: $t:ty),+] => $body:block) => {{
        let r = $r;
        for row in 0..r.m {
            let q = r.row(row);
            let mut k = 0usize;
            $(
                let $p = q[k] as $t;
                k += 1;
            )+
            let _ = k;
            $body
        }
    }};
}

/// Calls the AVX2 and FMA copy where the CPU has them, the baseline kernel otherwise.
macro_rules! dispatch {
    ($avx:ident, $generic:ident, $rows:expr, $f:expr) => {{
        #[cfg(target_arch = "x86_64")]
        if simd::avx2() {
            // SAFETY: the kernel's contract is the caller's (see `loops::run`);
            // the CPU has AVX2 and FMA.
            unsafe { $avx($rows, $f) };
            return;
        }
        // SAFETY: as above.
        unsafe { $generic($rows, $f) };
    }};
}

/// out = f(a) over a block of rows.
///
/// # Safety
/// The rows must lie inside both operands' storages with element types `O`
/// and `A`, and writes must not clobber inputs still to be read (the callers
/// check overlap or require full aliasing).
#[inline(always)]
unsafe fn rows1<A: Copy, O: Copy>(r: Rows<2>, f: &impl Fn(A) -> O) {
    let e = sizes!(O, A);
    let s = r.inner;
    let in_place = r.ptrs[0] == r.ptrs[1] && r.outer[0] == r.outer[1];
    let n = r.n;
    // SAFETY (every loop): forwarded contract.
    unsafe {
        if s == e && in_place {
            // In place: one pointer, so LLVM's runtime alias check (which
            // fails for identical ranges) does not block vectorising.
            each_row!(r, [o: *mut O] => {
                let xo = o as *mut A;
                for i in 0..n {
                    *o.add(i) = f(*xo.add(i));
                }
            })
        } else if s == e {
            each_row!(r, [o: *mut O, x: *const A] => {
                for i in 0..n {
                    *o.add(i) = f(*x.add(i));
                }
            })
        } else if s == [e[0], 0] {
            each_row!(r, [o: *mut O, x: *const A] => {
                let v = f(*x);
                for i in 0..n {
                    *o.add(i) = v;
                }
            })
        } else {
            each_row!(r, [o: *mut O, x: *const A] => {
                for i in 0..n as isize {
                    *o.byte_offset(i * s[0]) = f(*x.byte_offset(i * s[1]));
                }
            })
        }
    }
}
/// [`rows1`] compiled with AVX2 and FMA enabled: the same source, so the same
/// results; only the instructions differ.
///
/// # Safety
/// As [`rows1`]; the CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows1_avx2<A: Copy, O: Copy>(r: Rows<2>, f: &impl Fn(A) -> O) {
    // SAFETY: forwarded contract.
    unsafe { rows1(r, f) }
}

/// out = f(a, b) over a block of rows.
///
/// # Safety
/// As [`rows1`].
#[inline(always)]
unsafe fn rows2<A: Copy, B: Copy, O: Copy>(r: Rows<3>, f: &impl Fn(A, B) -> O) {
    let e = sizes!(O, A, B);
    let s = r.inner;
    let in_place = r.ptrs[0] == r.ptrs[1] && r.outer[0] == r.outer[1];
    let n = r.n;
    // SAFETY (every loop): forwarded contract.
    unsafe {
        if s == e && in_place {
            // In place: read and write through one pointer so that only `y`
            // needs LLVM's runtime alias check (see `rows1`).
            each_row!(r, [o: *mut O, _x: *const A, y: *const B] => {
                let xo = o as *mut A;
                for i in 0..n {
                    *o.add(i) = f(*xo.add(i), *y.add(i));
                }
            })
        } else if s == e {
            each_row!(r, [o: *mut O, x: *const A, y: *const B] => {
                for i in 0..n {
                    *o.add(i) = f(*x.add(i), *y.add(i));
                }
            })
        } else if s == [e[0], e[1], 0] && in_place {
            each_row!(r, [o: *mut O, _x: *const A, y: *const B] => {
                let (yv, xo) = (*y, o as *mut A);
                for i in 0..n {
                    *o.add(i) = f(*xo.add(i), yv);
                }
            })
        } else if s == [e[0], e[1], 0] {
            each_row!(r, [o: *mut O, x: *const A, y: *const B] => {
                let yv = *y;
                for i in 0..n {
                    *o.add(i) = f(*x.add(i), yv);
                }
            })
        } else if s == [e[0], 0, e[2]] {
            each_row!(r, [o: *mut O, x: *const A, y: *const B] => {
                let xv = *x;
                for i in 0..n {
                    *o.add(i) = f(xv, *y.add(i));
                }
            })
        } else if s == [2 * e[0], 2 * e[1], 2 * e[2]] && in_place {
            // Every other element (`a[:, ::2] += b[:, ::2]`): a constant
            // stride lets LLVM vectorise with interleaved loads.
            each_row!(r, [o: *mut O, _x: *const A, y: *const B] => {
                let xo = o as *mut A;
                for i in 0..n {
                    *o.add(2 * i) = f(*xo.add(2 * i), *y.add(2 * i));
                }
            })
        } else {
            each_row!(r, [o: *mut O, x: *const A, y: *const B] => {
                for i in 0..n as isize {
                    *o.byte_offset(i * s[0]) =
                        f(*x.byte_offset(i * s[1]), *y.byte_offset(i * s[2]));
                }
            })
        }
    }
}
/// [`rows2`] compiled with AVX2 and FMA enabled: the same source, so the same
/// results; only the instructions differ.
///
/// # Safety
/// As [`rows2`]; the CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows2_avx2<A: Copy, B: Copy, O: Copy>(r: Rows<3>, f: &impl Fn(A, B) -> O) {
    // SAFETY: forwarded contract.
    unsafe { rows2(r, f) }
}

/// out = f(a, b, c) over a block of rows.
///
/// # Safety
/// As [`rows1`].
#[inline(always)]
unsafe fn rows3<A: Copy, B: Copy, C: Copy, O: Copy>(r: Rows<4>, f: &impl Fn(A, B, C) -> O) {
    let e = sizes!(O, A, B, C);
    let s = r.inner;
    let in_place = r.ptrs[0] == r.ptrs[1] && r.outer[0] == r.outer[1];
    let n = r.n;
    // SAFETY (every loop): forwarded contract.
    unsafe {
        if s == e && in_place {
            each_row!(r, [o: *mut O, _x: *const A, y: *const B, z: *const C] => {
                let xo = o as *mut A;
                for i in 0..n {
                    *o.add(i) = f(*xo.add(i), *y.add(i), *z.add(i));
                }
            })
        } else if s == e {
            each_row!(r, [o: *mut O, x: *const A, y: *const B, z: *const C] => {
                for i in 0..n {
                    *o.add(i) = f(*x.add(i), *y.add(i), *z.add(i));
                }
            })
        } else {
            each_row!(r, [o: *mut O, x: *const A, y: *const B, z: *const C] => {
                for i in 0..n as isize {
                    *o.byte_offset(i * s[0]) = f(
                        *x.byte_offset(i * s[1]),
                        *y.byte_offset(i * s[2]),
                        *z.byte_offset(i * s[3]),
                    );
                }
            })
        }
    }
}
/// [`rows3`] compiled with AVX2 and FMA enabled: the same source, so the same
/// results; only the instructions differ.
///
/// # Safety
/// As [`rows3`]; the CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows3_avx2<A: Copy, B: Copy, C: Copy, O: Copy>(r: Rows<4>, f: &impl Fn(A, B, C) -> O) {
    // SAFETY: forwarded contract.
    unsafe { rows3(r, f) }
}

/// out[i] = f(a[i]).
pub(crate) fn map1<A: Copy, O: Copy>(out: &Arg, a: &Arg, f: impl Fn(A) -> O + Sync) {
    let p = plan([out, a]);
    // The rows come from `loops::run`, inside both operands' layouts; the
    // caller checked the dtypes match `A`/`O` and that writes do not clobber
    // inputs still to be read (overlap checks or full aliasing).
    let kernel = |r: Rows<2>| dispatch!(rows1_avx2, rows1, r, &f);
    // SAFETY: the plan is built from the operands' own layouts over their storages.
    unsafe { loops::run(&p, [base(out), base(a)], kernel) };
}

/// out[i] = f(a[i], b[i]).
pub(crate) fn map2<A: Copy, B: Copy, O: Copy>(
    out: &Arg,
    a: &Arg,
    b: &Arg,
    f: impl Fn(A, B) -> O + Sync,
) {
    let p = plan([out, a, b]);
    // As in `map1`.
    let kernel = |r: Rows<3>| dispatch!(rows2_avx2, rows2, r, &f);
    // SAFETY: the plan is built from the operands' own layouts over their storages.
    unsafe { loops::run(&p, [base(out), base(a), base(b)], kernel) };
}

/// out[i] = f(a[i], b[i]) where PyTorch's `cpu_kernel_vec` runs its vector
/// op, `g(a[i], b[i])` where it runs its scalar op, for ops whose two
/// differ in bits (`maximum`'s tie of +0.0 and -0.0). PyTorch's
/// `vectorized_loop` runs the vector op over the first `n - n % width`
/// elements of each innermost row of `n` (`width` = two vectors) whose
/// operands are all contiguous or one input broadcast along it, and the
/// scalar op elsewhere. The rows are this plan's: the caller lays the
/// output out in PyTorch's order (then the plan's rows are its rows), and a
/// plan with a tile dim (an input whose fastest dim is not the output's:
/// PyTorch's strided loop) is scalar throughout.
pub(crate) fn map2_split<A: Copy, B: Copy, O: Copy>(
    out: &Arg,
    a: &Arg,
    b: &Arg,
    width: usize,
    f: impl Fn(A, B) -> O + Sync,
    g: impl Fn(A, B) -> O + Sync,
) {
    let p = plan([out, a, b]);
    let tiled = p.tile_dim.is_some();
    let vector = |r: Rows<3>| dispatch!(rows2_avx2, rows2, r, &f);
    let scalar = |r: Rows<3>| dispatch!(rows2_avx2, rows2, r, &g);
    let kernel = |r: Rows<3>| {
        let e = sizes!(O, A, B);
        let s = r.inner;
        let contiguous = s[0] == e[0]
            && matches!((s[1], s[2]), (x, y) if (x == e[1] || x == 0) && (y == e[2] || y == 0) && (x, y) != (0, 0));
        let split = if contiguous && !tiled && r.n > 1 {
            r.n - r.n % width
        } else {
            0
        };
        if split > 0 {
            vector(Rows { n: split, ..r });
        }
        if split < r.n {
            scalar(Rows {
                n: r.n - split,
                ptrs: std::array::from_fn(|i| r.ptrs[i].wrapping_offset(s[i] * split as isize)),
                ..r
            });
        }
    };
    // SAFETY: the plan is built from the operands' own layouts over their
    // storages; the rows handed on are sub-rows of the plan's.
    unsafe { loops::run(&p, [base(out), base(a), base(b)], kernel) };
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
    // As in `map1`.
    let kernel = |r: Rows<4>| dispatch!(rows3_avx2, rows3, r, &f);
    // SAFETY: the plan is built from the operands' own layouts over their storages.
    unsafe { loops::run(&p, [base(out), base(a), base(b), base(c)], kernel) };
}

/// out[i] = v.
pub(crate) fn fill<O: Copy + Send + Sync>(out: &Arg, v: O) {
    if out.layout.may_overlap() {
        // Elements that share memory (an `as_strided` view): one thread
        // walks them, so no address is written by two threads at once.
        // SAFETY: the layout lies inside the output's storage.
        unsafe { fill_each(out, v) };
        return;
    }
    let p = plan([out]);
    let kernel = |r: Rows<1>| {
        let s = r.inner[0];
        let n = r.n;
        // SAFETY: rows lie inside the output's layout, whose elements do not
        // share memory (checked above), so every address is written once.
        unsafe {
            if s == size_of::<O>() as isize {
                each_row!(r, [o: *mut O] => {
                    for i in 0..n {
                        *o.add(i) = v;
                    }
                })
            } else {
                each_row!(r, [o: *mut O] => {
                    for i in 0..n as isize {
                        *o.byte_offset(i * s) = v;
                    }
                })
            }
        }
    };
    // SAFETY: the plan is built from the output's layout over its storage.
    unsafe { loops::run(&p, [base(out)], kernel) };
}

/// `fill` one element at a time, on the calling thread, in row-major order
/// (for layouts whose elements may share memory).
///
/// # Safety
/// Every element of `out`'s layout must lie inside its storage.
unsafe fn fill_each<O: Copy>(out: &Arg, v: O) {
    let l = &out.layout;
    if l.numel() == 0 {
        return;
    }
    let o = base(out) as *mut O;
    let nd = l.shape.len();
    let mut idx = vec![0usize; nd];
    let mut pos = 0usize;
    loop {
        // SAFETY: `pos` is the storage index (from the view's offset) of an
        // element of the layout, inside the storage by the contract.
        unsafe { *o.add(pos) = v };
        let mut d = nd;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            pos += l.strides[d];
            if idx[d] < l.shape[d] {
                break;
            }
            pos -= l.strides[d] * l.shape[d];
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The tiled (transposing) paths on shapes that span several tiles and
    //! slices with ragged edges, against an element-by-element reference, with
    //! the baseline kernels and (where the CPU has it) the AVX2 ones.
    use super::super::simd::{with_level, Level};
    use crate::{DType, Device, Tensor};

    /// Values of `t` in row-major order, as f64.
    fn values(t: &Tensor) -> Vec<f64> {
        t.to_dtype_contiguous(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    }

    fn check(rows: usize, cols: usize, dtype: DType) {
        let a = Tensor::randn(&[rows, cols], DType::F64, 7, Device::Cpu)
            .unwrap()
            .mul(8.0)
            .unwrap()
            .to_dtype_contiguous(dtype)
            .unwrap();
        let b = Tensor::randn(&[cols, rows], DType::F64, 8, Device::Cpu)
            .unwrap()
            .mul(8.0)
            .unwrap()
            .to_dtype_contiguous(dtype)
            .unwrap();
        let bt = b.t().unwrap();
        let (va, vb) = (values(&a), values(&b));
        // Reference in the dtype's own arithmetic: one element at a time.
        let expect_sum: Vec<f64> = (0..rows * cols)
            .map(|i| {
                let (r, c) = (i / cols, i % cols);
                let x = Tensor::from_vec(vec![va[i]], &[1], Device::Cpu).unwrap();
                let y = Tensor::from_vec(vec![vb[c * rows + r]], &[1], Device::Cpu).unwrap();
                let s = x
                    .to_dtype_contiguous(dtype)
                    .unwrap()
                    .add(&y.to_dtype_contiguous(dtype).unwrap())
                    .unwrap();
                values(&s)[0]
            })
            .collect();
        let expect_copy: Vec<f64> = (0..rows * cols)
            .map(|i| vb[(i % cols) * rows + i / cols])
            .collect();
        for level in [Level::Baseline, Level::Avx2] {
            with_level(level, || {
                let what = format!("{rows}x{cols} {dtype} {level:?}");
                let sum = a.add(&bt).unwrap();
                assert_eq!(values(&sum), expect_sum, "a + b.t(), {what}");
                let inplace = a.clone_contiguous().unwrap();
                inplace.add_(&bt).unwrap();
                assert_eq!(values(&inplace), expect_sum, "a += b.t(), {what}");
                assert_eq!(
                    values(&bt.contiguous().unwrap()),
                    expect_copy,
                    "contiguous, {what}"
                );
                let out = Tensor::zeros(&[rows, cols], dtype, Device::Cpu).unwrap();
                out.copy_(&bt).unwrap();
                assert_eq!(values(&out), expect_copy, "copy_, {what}");
            });
        }
    }

    #[test]
    fn transposed_operands_across_tiles() {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::I64, DType::U8] {
            check(300, 517, dtype);
        }
        check(37, 1030, DType::F32);
        check(1030, 9, DType::F64);
        check(8, 8, DType::F32);
    }
}
