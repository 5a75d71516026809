//! `std::ops` for tensors.
//!
//! Binary operators on references give a `Result`: `&a + &b`, `&a * 2.0`,
//! `-&a` are `Result<Tensor>`, with the error the method of the same name
//! would return (shapes that do not broadcast, dtypes, devices).
//!
//! Rust's compound assignment (`+=`) cannot return an error, and strata
//! does not panic on bad input, so compound assignment is defined on
//! `Result<Tensor>`: `r += &b` runs `add_` in place when `r` is `Ok`, turns
//! `r` into the error if `add_` fails (the tensor's values are then
//! unchanged) and leaves an earlier error as it is. The first error comes out
//! at the next `?`:
//!
//! ```
//! use strata_tensor::{Device, Scalar, Tensor};
//! let a = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu)?;
//! let b = Tensor::from_slice(&[3.0f32, 5.0], &[2], Device::Cpu)?;
//! let mut r = Ok(a.clone());
//! r += &b; // in place: `a` and `r` share storage
//! r *= Scalar::from(2.0);
//! assert_eq!(r?.to_vec::<f32>()?, vec![8.0, 14.0]);
//! assert_eq!(a.to_vec::<f32>()?, vec![8.0, 14.0]);
//!
//! let mut bad = Ok(a.clone());
//! bad += &Tensor::zeros(&[3], strata_tensor::DType::F32, Device::Cpu)?;
//! assert!(bad.is_err()); // [2] and [3] do not broadcast; `a` is unchanged
//! assert_eq!(a.to_vec::<f32>()?, vec![8.0, 14.0]);
//! # Ok::<(), strata_tensor::TensorError>(())
//! ```
//!
//! Binary operators also take a `Result<Tensor>` on the left, so chains
//! read naturally: `((&a + &b) * &c)?`.

use crate::error::Result;
use crate::scalar::Scalar;
use crate::tensor::Tensor;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

macro_rules! binary_overload {
    ($tr:ident, $m:ident, $atr:ident, $am:ident, $inplace:ident) => {
        impl $tr<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $m(self, rhs: &Tensor) -> Result<Tensor> {
                Tensor::$m(self, rhs)
            }
        }
        impl<S: Into<Scalar>> $tr<S> for &Tensor {
            type Output = Result<Tensor>;
            fn $m(self, rhs: S) -> Result<Tensor> {
                Tensor::$m(self, rhs.into())
            }
        }
        impl $tr<&Tensor> for Result<Tensor> {
            type Output = Result<Tensor>;
            fn $m(self, rhs: &Tensor) -> Result<Tensor> {
                self.and_then(|t| Tensor::$m(&t, rhs))
            }
        }
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
}
binary_overload!(Add, add, AddAssign, add_assign, add_);
binary_overload!(Sub, sub, SubAssign, sub_assign, sub_);
binary_overload!(Mul, mul, MulAssign, mul_assign, mul_);
binary_overload!(Div, div, DivAssign, div_assign, div_);

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
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
        let c = a.deep_clone().unwrap();
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
}
