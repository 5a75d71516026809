//! The CPU backend: host memory from the caching allocator's host driver,
//! kernels generated once per dtype from generic code.

mod dimops;
mod elementwise;
mod fused;
mod layer_norm;
mod loops;
mod matmul;
mod nn;
mod optim;
mod pnorm;
mod reduce;
mod scatter_ops;
mod shape_ops;
mod simd;
pub(crate) mod sleef;
mod sort;
mod windows;

use crate::backend::{Arg, Backend, BinaryOp, Mem, ReduceOp, UnaryFn, UnaryOp};
use crate::dispatch_dtype;
use crate::dtype::{Arith, DType, Element};
use crate::error::Result;
use crate::ops::math::Math;
use crate::ops::table::{binary_op_table, unary_op_table, ScalarRule};
use crate::scalar::Scalar;
use elementwise::{fill, map1, map2, map3};

pub(crate) use dimops::{DimShape, SoftmaxMode};
pub(crate) use fused::fused;
pub(crate) use loops::PARALLEL_THRESHOLD;
pub(crate) use sort::{SortKernel, SortPick};

/// Kernels on host memory.
pub(crate) struct CpuBackend;

/// Calls `$body` with `$T` bound to the element type of `$d`, for the dtypes
/// of an op's rule (`ops::table`): `All`, `NotBool` or `Float`. The callers
/// have promoted or rejected the others.
macro_rules! dispatch_rule {
    (All, $d:expr, $T:ident => $body:expr) => {
        dispatch_dtype!($d, $T => $body)
    };
    (NotBool, $d:expr, $T:ident => $body:expr) => {
        dispatch_among!($d, $T => $body; F32: f32, F64: f64, F16: ::half::f16,
            BF16: ::half::bf16, I32: i32, I64: i64, U8: u8)
    };
    (Float, $d:expr, $T:ident => $body:expr) => {
        dispatch_among!($d, $T => $body; F32: f32, F64: f64, F16: ::half::f16, BF16: ::half::bf16)
    };
    (FloatOnly, $d:expr, $T:ident => $body:expr) => {
        dispatch_rule!(Float, $d, $T => $body)
    };
}

macro_rules! dispatch_among {
    ($d:expr, $T:ident => $body:expr; $($V:ident: $t:ty),*) => {
        match $d {
            $(DType::$V => {
                type $T = $t;
                $body
            })*
            d => unreachable!("dtype {d} is excluded by the op's dtype rule"),
        }
    };
}

/// The scalar operand in the computation type: PyTorch rounds a scalar to the
/// tensor's dtype first for add, sub and comparisons, but mul and div use it
/// at the computation type's precision (visible with f16/bf16).
fn scalar_acc<T: Element>(op: BinaryOp, s: Scalar) -> T::Acc
where
    T::Acc: Element,
{
    match op.scalar_rule() {
        ScalarRule::Acc => <T::Acc as Element>::from_scalar(s),
        ScalarRule::Elem => T::from_scalar(s).to_acc(),
    }
}

/// The CPU kernels of the binary table's ops: each op gets its own
/// monomorphised loop (the `match` on the op is outside the loop).
macro_rules! cpu_binary {
    (
        arith { $(
            $(#[$doc:meta])*
            $V:ident {
                $(method: $m:ident,)?
                $(inplace: $(#[$idoc:meta])* $ip:ident,)?
                $(named: $n:ident,)?
                dtypes: $rule:ident $(($msg:literal))?,
                scalar: $scalar:ident,
                cpu: |$a:ident, $b:ident| $cpu:expr,
                cuda: $cuda:tt
            }
        )* }
        compare { $(
            $(#[$cdoc:meta])*
            $C:ident { method: $cm:ident, cpu: |$ca:ident, $cb:ident| $ccpu:expr, cuda: $cc:literal }
        )* }
    ) => {
        /// out = x op y (x and y of dtype `E`, the rows' `E`).
        fn binary_typed<E: Element>(op: BinaryOp, out: &Arg, x: &Arg, y: &Arg)
        where
            E::Acc: Math + crate::ops::special_math::Special,
        {
            match op {
                $(BinaryOp::$V => map2(out, x, y, |p: E, q: E| {
                    let ($a, $b) = (p.to_acc(), q.to_acc());
                    E::from_acc($cpu)
                }),)*
                $(BinaryOp::$C => map2(out, x, y, |p: E, q: E| {
                    let ($ca, $cb) = (p.to_acc(), q.to_acc());
                    $ccpu
                }),)*
            }
        }

        /// out = x op s (x of dtype `T`): the rows' `E` is the compute type
        /// `T::Acc`, so no step but the last is rounded to `T`.
        fn binary_scalar_typed<T, E>(op: BinaryOp, out: &Arg, x: &Arg, s: Scalar)
        where
            T: Element<Acc = E>,
            E: Element<Acc = E> + Arith + Math + crate::ops::special_math::Special,
        {
            let w = scalar_acc::<T>(op, s);
            match op {
                $(BinaryOp::$V => map1(out, x, move |p: T| {
                    let ($a, $b) = (p.to_acc(), w);
                    T::from_acc($cpu)
                }),)*
                $(BinaryOp::$C => map1(out, x, move |p: T| {
                    let ($ca, $cb) = (p.to_acc(), w);
                    $ccpu
                }),)*
            }
        }
    };
}
binary_op_table!(cpu_binary);

/// `maximum`/`minimum` of float tensors as PyTorch's CPU kernel: NaN if
/// either operand is NaN; of equal operands (+0.0 and -0.0) the second
/// where PyTorch's vectorised loop runs (`_mm256_max_ps(a, b)` is `b`
/// unless `a > b`, `_mm256_min_ps(a, b)` `b` unless `a < b`; f16/bf16
/// compared as f32), the first where its scalar loop runs (`std::max`,
/// `std::min`, which [`Math::maximum_`] follows). Two AVX2 vectors per
/// step: 64 bytes of elements ([`elementwise::map2_split`]).
fn extremes_typed<E: Element>(max: bool, out: &Arg, a: &Arg, b: &Arg)
where
    E::Acc: Math + PartialOrd,
{
    let width = 64 / std::mem::size_of::<E>();
    if max {
        elementwise::map2_split(
            out,
            a,
            b,
            width,
            |p: E, q: E| {
                let (x, y) = (p.to_acc(), q.to_acc());
                let m = x.maximum_(y);
                // `m` is NaN or x or y; the vector op keeps y unless x > y.
                #[allow(clippy::eq_op)]
                E::from_acc(if m != m || x > y { m } else { y })
            },
            |p: E, q: E| E::from_acc(p.to_acc().maximum_(q.to_acc())),
        )
    } else {
        elementwise::map2_split(
            out,
            a,
            b,
            width,
            |p: E, q: E| {
                let (x, y) = (p.to_acc(), q.to_acc());
                let m = x.minimum_(y);
                #[allow(clippy::eq_op)]
                E::from_acc(if m != m || x < y { m } else { y })
            },
            |p: E, q: E| E::from_acc(p.to_acc().minimum_(q.to_acc())),
        )
    }
}

/// The CPU kernels of the unary table's ops, one loop per op and dtype.
macro_rules! cpu_unary {
    ($(
        $(#[$doc:meta])*
        $V:ident {
            $(method: $m:ident,)?
            $(named: $n:ident,)?
            $(inplace: $(#[$idoc:meta])* $ip:ident,)?
            dtypes: $rule:ident,
            cpu: |$x:ident| $cpu:expr,
            cuda: $cuda:tt
        }
    )*) => {
        /// out = f(a).
        fn unary_map(f: UnaryFn, out: &Arg, a: &Arg) {
            match f {
                $(UnaryFn::$V => dispatch_rule!($rule, a.dtype, T => map1(out, a, |p: T| {
                    let $x = p.to_acc();
                    T::from_acc($cpu)
                })),)*
            }
        }
    };
}
unary_op_table!(cpu_unary);

fn clamp_typed<T: Element>(out: &Arg, a: &Arg, lo: Option<Scalar>, hi: Option<Scalar>)
where
    T::Acc: Element,
{
    let lo = lo.map(|s| T::from_scalar(s).to_acc());
    let hi = hi.map(|s| T::from_scalar(s).to_acc());
    map1(out, a, move |x: T| {
        let mut v = x.to_acc();
        if let Some(l) = lo {
            v = v.max_nan(l);
        }
        if let Some(h) = hi {
            v = v.min_nan(h);
        }
        T::from_acc(v)
    });
}

fn copy_typed<S: Element, D: Element>(out: &Arg, src: &Arg) {
    map1(out, src, |x: S| D::from_scalar(x.to_scalar()));
}

impl Backend for CpuBackend {
    fn scatter_ops(&self, k: crate::ops::scatter_ops::ScatterKernel<'_>) -> Result<()> {
        scatter_ops::run(k)
    }
    fn nn(&self, k: crate::backend::NnKernel<'_>) -> Result<()> {
        nn::run(k);
        Ok(())
    }

    fn generate(&self, out: &Arg, seq: crate::generate::Sequence) -> Result<()> {
        dispatch_dtype!(out.dtype, T => crate::generate::fill_host::<T>(out, seq));
        Ok(())
    }

    fn fill(&self, out: &Arg, value: Scalar) -> Result<()> {
        dispatch_dtype!(out.dtype, T => fill(out, T::from_scalar(value)));
        Ok(())
    }

    fn copy(&self, out: &Arg, src: &Arg) -> Result<()> {
        if out.dtype == src.dtype {
            // Same dtype: move bytes of the right width.
            match out.dtype.size() {
                1 => map1(out, src, |x: u8| x),
                2 => map1(out, src, |x: u16| x),
                4 => map1(out, src, |x: u32| x),
                _ => map1(out, src, |x: u64| x),
            }
            return Ok(());
        }
        dispatch_dtype!(src.dtype, S => dispatch_dtype!(out.dtype, D => copy_typed::<S, D>(out, src)));
        Ok(())
    }

    fn binary(&self, op: BinaryOp, out: &Arg, a: &Arg, b: &Arg) -> Result<()> {
        if matches!(op, BinaryOp::Maximum | BinaryOp::Minimum) && a.dtype.is_float() {
            let max = op == BinaryOp::Maximum;
            match a.dtype {
                DType::F32 => extremes_typed::<f32>(max, out, a, b),
                DType::F64 => extremes_typed::<f64>(max, out, a, b),
                DType::F16 => extremes_typed::<::half::f16>(max, out, a, b),
                _ => extremes_typed::<::half::bf16>(max, out, a, b),
            }
            return Ok(());
        }
        dispatch_dtype!(a.dtype, T => binary_typed::<T>(op, out, a, b));
        Ok(())
    }

    fn binary_scalar(&self, op: BinaryOp, out: &Arg, a: &Arg, b: Scalar) -> Result<()> {
        dispatch_dtype!(a.dtype, T => binary_scalar_typed::<T, <T as Element>::Acc>(op, out, a, b));
        Ok(())
    }

    fn unary(&self, op: UnaryOp, out: &Arg, a: &Arg) -> Result<()> {
        match op {
            UnaryOp::Map(f) => unary_map(f, out, a),
            UnaryOp::Clamp(lo, hi) => {
                dispatch_dtype!(a.dtype, T => clamp_typed::<T>(out, a, lo, hi))
            }
        }
        Ok(())
    }

    fn addcmul(&self, out: &Arg, t1: &Arg, t2: &Arg, value: Scalar) -> Result<()> {
        dispatch_dtype!(out.dtype, T => {
            let v = <<T as Element>::Acc as Element>::from_scalar(value);
            // PyTorch's `x + v * t1 * t2` as compiled (GCC contracts it to
            // fma(v * t1, t2, x) in both its vectorized and scalar loops):
            // one rounding of the product and the sum for floats.
            map3(out, out, t1, t2, move |x: T, a: T, b: T| {
                T::from_acc(v.mul(a.to_acc()).mul_add(b.to_acc(), x.to_acc()))
            })
        });
        Ok(())
    }

    fn where_(&self, out: &Arg, cond: &Arg, a: &Arg, b: &Arg) -> Result<()> {
        dispatch_dtype!(out.dtype, T => map3(out, cond, a, b, |c: bool, x: T, y: T| if c { x } else { y }));
        Ok(())
    }

    fn reduce(
        &self,
        op: ReduceOp,
        values: Option<&Arg>,
        indices: Option<&Arg>,
        input: &Arg,
        dims: &[usize],
    ) -> Result<()> {
        dispatch_dtype!(input.dtype, T => reduce::reduce::<T>(op, values, indices, input, dims));
        Ok(())
    }

    fn pnorm(&self, out: &Arg, input: &Arg, dims: &[usize], keepdim: bool, p: f64) -> Result<bool> {
        match input.dtype {
            DType::F32 => pnorm::pnorm::<f32>(out, input, dims, keepdim, p),
            DType::F64 => pnorm::pnorm::<f64>(out, input, dims, keepdim, p),
            DType::F16 => pnorm::pnorm::<::half::f16>(out, input, dims, keepdim, p),
            DType::BF16 => pnorm::pnorm::<::half::bf16>(out, input, dims, keepdim, p),
            d => unreachable!("the norm of {d} is rejected by the caller"),
        }
        Ok(true)
    }

    fn matmul(&self, out: &Arg, a: &Arg, b: &Arg, accumulate: bool) -> Result<()> {
        match a.dtype {
            DType::F32 => matmul::gemm::<f32>(out, a, b, accumulate),
            DType::F64 => matmul::gemm::<f64>(out, a, b, accumulate),
            DType::I32 => matmul::integer::<i32>(out, a, b, accumulate),
            DType::I64 => matmul::integer::<i64>(out, a, b, accumulate),
            DType::U8 => matmul::integer::<u8>(out, a, b, accumulate),
            DType::F16 => matmul::gemm_f16(out, a, b, accumulate),
            DType::BF16 => matmul::gemm_half_tiled::<::half::bf16>(out, a, b, accumulate),
            d => unreachable!("matmul of {d} is rejected by the caller"),
        }
        Ok(())
    }

    fn matmul_sequential(&self, out: &Arg, a: &Arg, b: &Arg, order: super::SeqOrder) -> Result<()> {
        match a.dtype {
            DType::F32 => matmul::sequential::<f32>(out, a, b, order),
            DType::F64 => matmul::sequential::<f64>(out, a, b, order),
            d => unreachable!("sequential matmul of {d} is not asked for"),
        }
        Ok(())
    }

    fn matmul_add_after(&self, out: &Arg, a: &Arg, b: &Arg) -> Result<()> {
        match a.dtype {
            DType::F16 => matmul::addmm_half_sum_first::<::half::f16>(out, a, b),
            DType::BF16 => matmul::addmm_half_sum_first::<::half::bf16>(out, a, b),
            _ => return self.matmul(out, a, b, true),
        }
        Ok(())
    }

    fn write_from_host(&self, dst: Mem, bytes: &[u8]) -> Result<()> {
        assert!(bytes.len() <= dst.nbytes);
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: the storage holds at least `bytes.len()` bytes (asserted) of
        // host memory, and the caller holds its write lock (or owns it alone).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.host_ptr(), bytes.len()) };
        Ok(())
    }

    fn softmax(&self, out: &Arg, input: &Arg, s: DimShape, mode: SoftmaxMode) -> Result<()> {
        dispatch_rule!(Float, input.dtype, T => dimops::softmax::<T>(out, input, s, mode));
        Ok(())
    }

    fn cumsum(&self, out: &Arg, input: &Arg, s: DimShape) -> Result<()> {
        // PyTorch's CPU cumsum sums f32 in f64 (`acc_type<float, false>`),
        // wider than f32's `Element::Acc`; the other dtypes sum in `Acc`.
        if input.dtype == DType::F32 {
            dimops::cumsum::<f32, f64>(out, input, s, f64::from, |a| a as f32);
        } else {
            dispatch_dtype!(input.dtype, T => dimops::cumsum::<T, <T as Element>::Acc>(
                out, input, s, T::to_acc, T::from_acc
            ));
        }
        Ok(())
    }

    fn softmax_backward(
        &self,
        out: &Arg,
        grad: &Arg,
        y: &Arg,
        s: DimShape,
        log: bool,
    ) -> Result<()> {
        dispatch_rule!(Float, y.dtype, T => dimops::softmax_backward::<T>(out, grad, y, s, log));
        Ok(())
    }

    fn sort(&self, k: SortKernel<'_>) -> Result<()> {
        sort::sort(&k)
    }

    fn adam_step(
        &self,
        item: &crate::ops::AdamItem<'_>,
        n: usize,
        s: &crate::ops::AdamStep,
    ) -> Result<()> {
        optim::adam_step(item, n, s);
        Ok(())
    }

    fn read_to_host(&self, src: Mem, offset: usize, out: &mut [u8]) -> Result<()> {
        assert!(offset + out.len() <= src.nbytes);
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: the storage holds at least `offset + out.len()` initialised
        // bytes of host memory (asserted), and the caller holds its read lock.
        unsafe {
            std::ptr::copy_nonoverlapping(src.host_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }
}
