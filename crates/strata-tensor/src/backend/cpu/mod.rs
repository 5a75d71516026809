//! The CPU backend: host memory from the caching allocator's host driver,
//! kernels generated once per dtype from generic code.

mod elementwise;
mod loops;
mod matmul;
mod reduce;
mod simd;

use crate::backend::{Arg, Backend, BinaryOp, ReduceOp, UnaryOp};
use crate::dispatch_dtype;
use crate::dtype::{Arith, DType, Element};
use crate::error::Result;
use crate::scalar::Scalar;
use crate::storage::Storage;
use elementwise::{fill, map1, map2, map3};

pub(crate) use loops::PARALLEL_THRESHOLD;

/// Kernels on host memory.
pub(crate) struct CpuBackend;

/// `a op b` in the computation type of `T`.
#[inline(always)]
fn arith<T: Element>(op: BinaryOp) -> impl Fn(T::Acc, T::Acc) -> T::Acc + Sync + Copy {
    move |a, b| match op {
        BinaryOp::Add => a.add(b),
        BinaryOp::Sub => a.sub(b),
        BinaryOp::Mul => a.mul(b),
        BinaryOp::Div => a.div(b),
        BinaryOp::DivTrunc => a.div_trunc(b),
        BinaryOp::DivFloor => a.div_floor(b),
        _ => unreachable!("comparison routed to arith"),
    }
}

#[inline(always)]
fn compare<T: Element>(op: BinaryOp) -> impl Fn(T::Acc, T::Acc) -> bool + Sync + Copy {
    move |a, b| match op {
        BinaryOp::Eq => a == b,
        BinaryOp::Ne => a != b,
        BinaryOp::Lt => a < b,
        BinaryOp::Le => a <= b,
        BinaryOp::Gt => a > b,
        BinaryOp::Ge => a >= b,
        _ => unreachable!("arithmetic routed to compare"),
    }
}

/// Each op gets its own monomorphised loop (the `match` is hoisted out by
/// passing a closure per op).
fn binary_typed<T: Element>(op: BinaryOp, out: &Arg, a: &Arg, b: &Arg) {
    macro_rules! arith_op {
        ($m:ident) => {
            map2(out, a, b, |x: T, y: T| {
                T::from_acc(x.to_acc().$m(y.to_acc()))
            })
        };
    }
    macro_rules! cmp_op {
        ($o:tt) => {
            map2(out, a, b, |x: T, y: T| x.to_acc() $o y.to_acc())
        };
    }
    match op {
        BinaryOp::Add => arith_op!(add),
        BinaryOp::Sub => arith_op!(sub),
        BinaryOp::Mul => arith_op!(mul),
        BinaryOp::Div => arith_op!(div),
        BinaryOp::DivTrunc => arith_op!(div_trunc),
        BinaryOp::DivFloor => arith_op!(div_floor),
        BinaryOp::Eq => cmp_op!(==),
        BinaryOp::Ne => cmp_op!(!=),
        BinaryOp::Lt => cmp_op!(<),
        BinaryOp::Le => cmp_op!(<=),
        BinaryOp::Gt => cmp_op!(>),
        BinaryOp::Ge => cmp_op!(>=),
    }
}

/// The scalar operand in the computation type: PyTorch rounds a scalar to the
/// tensor's dtype first for add, sub and comparisons, but mul and div use it
/// at the computation type's precision (visible with f16/bf16).
fn scalar_acc<T: Element>(op: BinaryOp, s: Scalar) -> T::Acc
where
    T::Acc: Element,
{
    match op {
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::DivTrunc | BinaryOp::DivFloor => {
            <T::Acc as Element>::from_scalar(s)
        }
        _ => T::from_scalar(s).to_acc(),
    }
}

fn binary_scalar_typed<T: Element>(op: BinaryOp, out: &Arg, a: &Arg, s: Scalar)
where
    T::Acc: Element,
{
    let y = scalar_acc::<T>(op, s);
    if op.is_comparison() {
        let f = compare::<T>(op);
        map1(out, a, move |x: T| f(x.to_acc(), y));
    } else {
        let f = arith::<T>(op);
        map1(out, a, move |x: T| T::from_acc(f(x.to_acc(), y)));
    }
}

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

fn unary_typed<T: Element>(op: UnaryOp, out: &Arg, a: &Arg)
where
    T::Acc: Element,
{
    match op {
        UnaryOp::Neg => map1(out, a, |x: T| T::from_acc(x.to_acc().neg())),
        UnaryOp::Relu => map1(out, a, |x: T| {
            let v = x.to_acc();
            // NaN propagates; -0.0 and 0.0 stay as they are.
            T::from_acc(if v < <T::Acc as Arith>::ZERO {
                <T::Acc as Arith>::ZERO
            } else {
                v
            })
        }),
        UnaryOp::Exp => map1(out, a, |x: T| T::from_acc(x.to_acc().exp())),
        UnaryOp::Log => map1(out, a, |x: T| T::from_acc(x.to_acc().ln())),
        UnaryOp::Clamp(lo, hi) => clamp_typed::<T>(out, a, lo, hi),
    }
}

fn copy_typed<S: Element, D: Element>(out: &Arg, src: &Arg) {
    map1(out, src, |x: S| D::from_scalar(x.to_scalar()));
}

impl Backend for CpuBackend {
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
        dispatch_dtype!(a.dtype, T => binary_typed::<T>(op, out, a, b));
        Ok(())
    }

    fn binary_scalar(&self, op: BinaryOp, out: &Arg, a: &Arg, b: Scalar) -> Result<()> {
        dispatch_dtype!(a.dtype, T => binary_scalar_typed::<T>(op, out, a, b));
        Ok(())
    }

    fn unary(&self, op: UnaryOp, out: &Arg, a: &Arg) -> Result<()> {
        dispatch_dtype!(a.dtype, T => unary_typed::<T>(op, out, a));
        Ok(())
    }

    fn addcmul(&self, out: &Arg, t1: &Arg, t2: &Arg, value: Scalar) -> Result<()> {
        dispatch_dtype!(out.dtype, T => {
            let v = <<T as Element>::Acc as Element>::from_scalar(value);
            map3(out, out, t1, t2, move |x: T, a: T, b: T| {
                T::from_acc(x.to_acc().add(v.mul(a.to_acc()).mul(b.to_acc())))
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

    fn matmul(&self, out: &Arg, a: &Arg, b: &Arg) -> Result<()> {
        match a.dtype {
            DType::F32 => matmul::gemm::<f32>(out, a, b),
            DType::F64 => matmul::gemm::<f64>(out, a, b),
            DType::I32 => matmul::integer::<i32>(out, a, b),
            DType::I64 => matmul::integer::<i64>(out, a, b),
            DType::U8 => matmul::integer::<u8>(out, a, b),
            d => unreachable!("matmul of {d} is routed through f32 by the caller"),
        }
        Ok(())
    }

    fn write_from_host(&self, dst: &Storage, bytes: &[u8]) -> Result<()> {
        assert!(bytes.len() <= dst.nbytes());
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: the storage holds at least `bytes.len()` bytes (asserted) of
        // host memory, and the caller holds its write lock (or owns it alone).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.host_ptr(), bytes.len()) };
        Ok(())
    }

    fn read_to_host(&self, src: &Storage, offset: usize, out: &mut [u8]) -> Result<()> {
        assert!(offset + out.len() <= src.nbytes());
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
