//! `std::ops` for tensors.
//!
//! Binary operators give a `Result<Tensor>` with the error the method of the
//! same name would return (shapes that do not broadcast, dtypes, devices):
//! `+ - * /`, and for integer and bool tensors `& | ^` (`bitwise_and`,
//! `bitwise_or`, `bitwise_xor`) and the unary `!` (`bitwise_not`, PyTorch's
//! `~`).
//! Each side may be an owned [`Tensor`], a `&Tensor`, or a scalar, with
//! PyTorch's type promotion (a Python scalar: `2.0 * &a` keeps `a`'s float
//! dtype): `2.0 * &a`, `&a - 1`, `1.0 / a`. On the right any number converts
//! (`f64`, `f32`, `i64`, `i32`, `u8`, `bool`, `f16`, `bf16`, [`Scalar`]).
//! On the left the types are `f64`, `i64`, `bool`, `f16`, `bf16` and
//! [`Scalar`] — one float and one integer type, so that plain literals
//! (`2.0 * &a`, `1 - &a`) need no suffix; write `f64::from(x) * &a` for an
//! `f32` variable `x`. As in Python, `s - t` is `torch.rsub(t, s)` (the
//! scalar converted to the result's dtype, wrapping or rounding to inf as
//! PyTorch converts it) and `s / t` is `t.reciprocal() * s`, whose rounding
//! can differ from a true division in the last bit.
//!
//! A `Result<Tensor>` may stand on either side of a tensor, so a chain needs
//! one `?` at the end and the first error comes out there:
//!
//! ```
//! use strata_tensor::{Device, Tensor};
//! let x = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu)?;
//! let b = Tensor::from_slice(&[0.5f32, 0.5], &[2], Device::Cpu)?;
//! let y = (&b + 2.0 * &x - &x)?;           // &Tensor + Result - &Tensor: one `?`
//! assert_eq!(y.to_vec::<f32>()?, vec![1.5, 2.5]);
//! let z = (x.exp()? * 3 / &y)?;            // owned, borrowed and scalar operands
//! assert_eq!(z.shape(), &[2]);
//! # Ok::<(), strata_tensor::TensorError>(())
//! ```
//!
//! Rust's orphan rule forbids operators whose operands are *both* foreign
//! types, so two `Result`s (`(&a + &b) * (&c + &d)`) or a `Result` and a
//! plain number (`(&a + &b) * 0.5`) cannot be combined directly: put a `?`
//! on one side (`((&a + &b)? * 0.5)`), or use [`Scalar`] for the number
//! (`(&a + &b) * Scalar::from(0.5)`).
//!
//! # Compound assignment
//!
//! Rust's `+=` cannot return an error and strata does not panic on bad
//! input. On a variable holding a `Tensor`, use the in-place methods, which
//! are PyTorch's names and return the error: `a.add_(&b)?`, `a.mul_(2.0)?`
//! (`sub_`, `div_` likewise). They write into `a`'s storage, so every view
//! of `a` (and every `clone()` handle, see [`Tensor`]) sees the result.
//!
//! `+= -= *= /=` (and `&= |= ^=`) are defined on `Result<Tensor>`: `r += &b` runs `add_` in
//! place when `r` is `Ok`, turns `r` into the error if `add_` fails (the
//! tensor's values are then unchanged) and leaves an earlier error as it is.
//! The first error comes out at the next `?`:
//!
//! ```
//! use strata_tensor::{Device, Scalar, Tensor};
//! let a = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu)?;
//! let b = Tensor::from_slice(&[3.0f32, 5.0], &[2], Device::Cpu)?;
//! a.add_(&b)?;                                 // a Tensor-holding variable
//! assert_eq!(a.to_vec::<f32>()?, vec![4.0, 7.0]);
//! let mut r = Ok(a.clone());
//! r -= &b; // in place: `a` and `r` share storage
//! r *= Scalar::from(2.0);
//! assert_eq!(r?.to_vec::<f32>()?, vec![2.0, 4.0]);
//! assert_eq!(a.to_vec::<f32>()?, vec![2.0, 4.0]);
//!
//! let mut bad = Ok(a.clone());
//! bad += &Tensor::zeros(&[3], strata_tensor::DType::F32, Device::Cpu)?;
//! assert!(bad.is_err()); // [2] and [3] do not broadcast; `a` is unchanged
//! assert_eq!(a.to_vec::<f32>()?, vec![2.0, 4.0]);
//! # Ok::<(), strata_tensor::TensorError>(())
//! ```

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::{result_type, Operand};
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use std::ops::{
    Add, AddAssign, BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, BitXorAssign, Div, DivAssign,
    Mul, MulAssign, Neg, Not, Sub, SubAssign,
};

/// `s - t` with the scalar on the left, PyTorch's `rsub` (Python's `s - t`):
/// the scalar becomes a 0-d tensor of the dtype it promotes to with `t`,
/// converted to it unchecked as PyTorch converts a wrapped scalar operand
/// (`300 - u8` subtracts from 300 wrapped to 44, `1e39 - f32` from inf), so
/// promotion and rounding are PyTorch's. A bool scalar stays a bool operand,
/// which subtraction refuses (as `t - true` is refused).
fn scalar_sub(s: Scalar, t: &Tensor) -> Result<Tensor> {
    let dtype = match s {
        Scalar::Bool(_) => DType::Bool,
        _ => result_type(&[Operand::Tensor(t), Operand::Scalar(s)]),
    };
    Tensor::scalar(s.cast_to(dtype), dtype, t.device())?.sub(t)
}

/// `s / t` with the scalar on the left: Python's `s / t` for a tensor `t` is
/// `t.reciprocal() * s` (`Tensor.__rdiv__`), not a true division. The
/// reciprocal is rounded to `t`'s float dtype (f32 for an integer or bool
/// `t`) before the product: `3.0 / [7.0]` is 0.42857146 where `3 / 7` in f32
/// is 0.42857143, and `1e6 / [1e4]` in f16 is 100 (the scalar enters the
/// product at f32 precision), not an overflow.
fn scalar_div(s: Scalar, t: &Tensor) -> Result<Tensor> {
    t.reciprocal()?.mul(s)
}

macro_rules! binary_overload {
    ($tr:ident, $m:ident, $tm:ident, $atr:ident, $am:ident, $inplace:ident, $scalar_lhs:expr) => {
        // tensor (owned or borrowed) on the left
        binary_overload!(@tensor_lhs $tr, $m, $tm, &Tensor);
        binary_overload!(@tensor_lhs $tr, $m, $tm, Tensor);

        // a Result on the left of a tensor or a `Scalar`
        impl $tr<&Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $m(self, rhs: &Tensor) -> Result<Tensor> {
                self.and_then(|t| Tensor::$tm(&t, rhs))
            }
        }
        impl $tr<Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $m(self, rhs: Tensor) -> Result<Tensor> {
                self.and_then(|t| Tensor::$tm(&t, &rhs))
            }
        }
        impl $tr<Scalar> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $m(self, rhs: Scalar) -> Result<Tensor> {
                self.and_then(|t| Tensor::$tm(&t, rhs))
            }
        }

        // a scalar on the left
        binary_overload!(@scalar_lhs $tr, $m, $scalar_lhs;
            Scalar, f64, i64, bool, half::f16, half::bf16);

        impl $atr<&Tensor> for Result<Tensor> {
            /// In place where `self` is `Ok`; becomes the error on failure.
            fn $am(&mut self, rhs: &Tensor) {
                if let Ok(t) = self {
                    if let Err(e) = t.$inplace(rhs) {
                        *self = Err(e);
                    }
                }
            }
        }
        impl $atr<Scalar> for Result<Tensor> {
            /// In place where `self` is `Ok`; becomes the error on failure.
            fn $am(&mut self, rhs: Scalar) {
                if let Ok(t) = self {
                    if let Err(e) = t.$inplace(rhs) {
                        *self = Err(e);
                    }
                }
            }
        }
    };
    (@tensor_lhs $tr:ident, $m:ident, $tm:ident, $lhs:ty) => {
        impl $tr<&Tensor> for $lhs {
            type Output = Result<Tensor>;
            fn $m(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$tm(&self, rhs)
            }
        }
        impl $tr<Tensor> for $lhs {
            type Output = Result<Tensor>;
            fn $m(self, rhs: Tensor) -> Result<Tensor> {
                Tensor::$tm(&self, &rhs)
            }
        }
        impl $tr<Result<Tensor>> for $lhs {
            type Output = Result<Tensor>;
            fn $m(self, rhs: Result<Tensor>) -> Result<Tensor> {
                rhs.and_then(|r| Tensor::$tm(&self, &r))
            }
        }
        impl<S: Into<Scalar>> $tr<S> for $lhs {
            type Output = Result<Tensor>;
            fn $m(self, rhs: S) -> Result<Tensor> {
                Tensor::$tm(&self, rhs.into())
            }
        }
    };
    (@scalar_lhs $tr:ident, $m:ident, $f:expr; $($s:ty),*) => {$(
        impl $tr<&Tensor> for $s {
            type Output = Result<Tensor>;
            fn $m(self, rhs: &Tensor) -> Result<Tensor> {
                let f: fn(Scalar, &Tensor) -> Result<Tensor> = $f;
                f(Scalar::from(self), rhs)
            }
        }
        impl $tr<Tensor> for $s {
            type Output = Result<Tensor>;
            fn $m(self, rhs: Tensor) -> Result<Tensor> {
                let f: fn(Scalar, &Tensor) -> Result<Tensor> = $f;
                f(Scalar::from(self), &rhs)
            }
        }
    )*};
}
binary_overload!(Add, add, add, AddAssign, add_assign, add_, |s, t| t.add(s));
binary_overload!(Sub, sub, sub, SubAssign, sub_assign, sub_, scalar_sub);
binary_overload!(Mul, mul, mul, MulAssign, mul_assign, mul_, |s, t| t.mul(s));
binary_overload!(Div, div, div, DivAssign, div_assign, div_, scalar_div);
// `&`, `|`, `^` are commutative: a scalar on the left is the same op.
binary_overload!(
    BitAnd,
    bitand,
    bitwise_and,
    BitAndAssign,
    bitand_assign,
    bitwise_and_,
    |s, t| t.bitwise_and(s)
);
binary_overload!(
    BitOr,
    bitor,
    bitwise_or,
    BitOrAssign,
    bitor_assign,
    bitwise_or_,
    |s, t| t.bitwise_or(s)
);
binary_overload!(
    BitXor,
    bitxor,
    bitwise_xor,
    BitXorAssign,
    bitxor_assign,
    bitwise_xor_,
    |s, t| t.bitwise_xor(s)
);

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}

/// `!t` is PyTorch's `~t`: [`Tensor::bitwise_not`].
impl Not for &Tensor {
    type Output = Result<Tensor>;
    fn not(self) -> Result<Tensor> {
        Tensor::bitwise_not(self)
    }
}

impl Not for Tensor {
    type Output = Result<Tensor>;
    fn not(self) -> Result<Tensor> {
        Tensor::bitwise_not(&self)
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, Device, Scalar, Tensor};

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()
    }

    #[test]
    fn operators_follow_methods() {
        let (a, b) = (t(&[1.0, 2.0]), t(&[3.0, 5.0]));
        assert_eq!((&a + &b).unwrap().to_vec::<f32>().unwrap(), vec![4.0, 7.0]);
        assert_eq!((&a * 2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
        assert_eq!(
            ((&a + &b) * &b).unwrap().to_vec::<f32>().unwrap(),
            vec![12.0, 35.0]
        );
        let c = a.clone_contiguous().unwrap();
        let mut r = Ok(c.clone());
        r += &b;
        r -= Scalar::from(1.0);
        // In place: the tensor behind `r` is `c`'s storage.
        assert_eq!(r.unwrap().to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
        assert!((&a + &Tensor::zeros(&[3], DType::F32, Device::Cpu).unwrap()).is_err());
    }

    #[test]
    fn compound_assignment_keeps_the_first_error_and_the_values() {
        let a = t(&[1.0, 2.0]);
        let three = Tensor::zeros(&[3], DType::F32, Device::Cpu).unwrap();
        let mut r = Ok(a.clone());
        r += &three; // does not broadcast
        let first = r.as_ref().unwrap_err().to_string();
        assert!(first.contains("[2]") && first.contains("[3]"), "{first}");
        r *= Scalar::from(10.0); // skipped: r already holds an error
        r /= &t(&[1.0, 1.0]);
        assert_eq!(r.unwrap_err().to_string(), first);
        assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);

        // An integer tensor cannot hold a float result in place.
        let i = Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap();
        let mut ri = Ok(i.clone());
        ri *= Scalar::from(1.5);
        assert!(ri.is_err());
        assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 2]);
    }

    #[test]
    fn bitwise_operators_follow_methods() {
        let a = Tensor::from_slice(&[0b1100u8, 0b1010, 255], &[3], Device::Cpu).unwrap();
        let b = Tensor::from_slice(&[0b1010u8, 0b0110, 1], &[3], Device::Cpu).unwrap();
        let v = |r: crate::Result<Tensor>| r.unwrap().to_vec::<u8>().unwrap();
        assert_eq!(v(&a & &b), vec![0b1000, 0b0010, 1]);
        assert_eq!(v(&a | &b), vec![0b1110, 0b1110, 255]);
        assert_eq!(v(&a ^ &b), vec![0b0110, 0b1100, 254]);
        assert_eq!(v(!&a), vec![0b1111_0011, 0b1111_0101, 0]);
        // A scalar on either side; `3 & u8` stays u8 (a scalar does not promote).
        assert_eq!(v(3 & &a), vec![0, 2, 3]);
        let m = Tensor::from_slice(&[true, false], &[2], Device::Cpu).unwrap();
        assert_eq!((!&m).unwrap().to_vec::<bool>().unwrap(), vec![false, true]);
        // Floats are refused; `&=` on a Result turns it into the error.
        let f = t(&[1.0]);
        assert!((&f & &f).is_err() && (!&f).is_err());
        let mut r = Ok(a.clone());
        r &= &b;
        assert_eq!(a.to_vec::<u8>().unwrap(), vec![0b1000, 0b0010, 1]);
        r ^= Scalar::from(1.5);
        assert!(r.is_err());
    }
}

#[cfg(test)]
mod combination_tests {
    use crate::{DType, Device, Scalar, Tensor};

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()
    }
    fn v(r: crate::Result<Tensor>) -> Vec<f32> {
        r.unwrap().to_vec::<f32>().unwrap()
    }

    #[test]
    fn owned_borrowed_and_result_operands_agree() {
        let (a, b) = (t(&[1.0, 2.0]), t(&[4.0, 8.0]));
        let want = vec![5.0, 10.0];
        assert_eq!(v(&a + &b), want);
        assert_eq!(v(a.clone() + &b), want);
        assert_eq!(v(&a + b.clone()), want);
        assert_eq!(v(a.clone() + b.clone()), want);
        assert_eq!(v(Ok(a.clone()) + &b), want);
        assert_eq!(v(Ok(a.clone()) + b.clone()), want);
        assert_eq!(v(&a + Ok(b.clone())), want);
        assert_eq!(v(a.clone() + Ok(b.clone())), want);
        assert_eq!(v(Ok(a.clone()) * Scalar::from(2.0)), vec![2.0, 4.0]);
        assert_eq!(v(-a.clone()), vec![-1.0, -2.0]);
        // An error on either side comes out unchanged.
        let bad = &a + &t(&[1.0, 2.0, 3.0]);
        let msg = bad.as_ref().unwrap_err().to_string();
        assert_eq!((bad + &b).unwrap_err().to_string(), msg);
        let bad = &a + &t(&[1.0, 2.0, 3.0]);
        assert_eq!((&b - bad).unwrap_err().to_string(), msg);
    }

    #[test]
    fn scalars_on_the_left_follow_pytorch() {
        let a = t(&[1.0, 2.0, 4.0]);
        assert_eq!(v(2.0 * &a), vec![2.0, 4.0, 8.0]);
        assert_eq!(v(1.0 + a.clone()), vec![2.0, 3.0, 5.0]);
        assert_eq!(v(10.0 - &a), vec![9.0, 8.0, 6.0]);
        assert_eq!(v(1.0 / &a), vec![1.0, 0.5, 0.25]);
        assert_eq!(v(8 / &a), vec![8.0, 4.0, 2.0]);
        // Promotion as in PyTorch: int tensor and int scalar stay integer,
        // `/` gives a float (the reciprocal, times the scalar), a float scalar
        // makes f32.
        let i = Tensor::from_slice(&[1i32, 2, 4], &[3], Device::Cpu).unwrap();
        assert_eq!((2.0 * &a).unwrap().dtype(), DType::F32);
        let r = (10 - &i).unwrap();
        assert_eq!(r.dtype(), DType::I32);
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![9, 8, 6]);
        let r = (1 / &i).unwrap();
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0, 0.5, 0.25]);
        assert_eq!((0.5 * &i).unwrap().dtype(), DType::F32);
        // f16 stays f16 with a float scalar.
        let h = a.to_dtype_contiguous(DType::F16).unwrap();
        assert_eq!((3.0 - &h).unwrap().dtype(), DType::F16);
        // bool subtraction is refused, as in PyTorch.
        let bl = Tensor::from_slice(&[true], &[1], Device::Cpu).unwrap();
        assert!((1 - &bl).is_err());
    }
}
