//! `std::ops` on references: `&a + &b` and `&a * 2.0` give `Result<Tensor>`;
//! `a += &b` writes in place and panics where `add_` would return an error
//! (use the methods for fallible code).

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
        impl $atr<&Tensor> for Tensor {
            /// # Panics
            /// Where the in-place method would return an error (shapes, dtypes, overlap).
            fn $am(&mut self, rhs: &Tensor) {
                if let Err(e) = self.$inplace(rhs) {
                    panic!("{e}");
                }
            }
        }
        impl<S: Into<Scalar>> $atr<S> for Tensor {
            /// # Panics
            /// Where the in-place method would return an error.
            fn $am(&mut self, rhs: S) {
                if let Err(e) = self.$inplace(rhs.into()) {
                    panic!("{e}");
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
    use crate::{DType, Device, Tensor};

    #[test]
    fn operators_follow_methods() {
        let a = Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu).unwrap();
        let b = Tensor::from_slice(&[3.0f32, 5.0], &[2], Device::Cpu).unwrap();
        assert_eq!((&a + &b).unwrap().to_vec::<f32>().unwrap(), vec![4.0, 7.0]);
        assert_eq!((&a * 2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
        let mut c = a.deep_clone().unwrap();
        c += &b;
        c -= 1.0;
        assert_eq!(c.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
        assert!((&a + &Tensor::zeros(&[3], DType::F32, Device::Cpu).unwrap()).is_err());
    }
}
