//! `std::ops` on references: `&a + &b`, `&a * 2.0`, `-&a` give `Result<Var>`
//! (the same as the methods, recorded the same way).

use crate::error::Result;
use crate::var::Var;
use std::ops::{Add, Div, Mul, Neg, Sub};
use strata_tensor::Scalar;

macro_rules! binary_overload {
    ($tr:ident, $m:ident) => {
        impl $tr<&Var> for &Var {
            type Output = Result<Var>;
            fn $m(self, rhs: &Var) -> Result<Var> {
                Var::$m(self, rhs)
            }
        }
        impl<S: Into<Scalar>> $tr<S> for &Var {
            type Output = Result<Var>;
            fn $m(self, rhs: S) -> Result<Var> {
                Var::$m(self, rhs.into())
            }
        }
    };
}
binary_overload!(Add, add);
binary_overload!(Sub, sub);
binary_overload!(Mul, mul);
binary_overload!(Div, div);

impl Neg for &Var {
    type Output = Result<Var>;
    fn neg(self) -> Result<Var> {
        Var::neg(self)
    }
}

#[cfg(test)]
mod tests {
    use crate::Var;
    use strata_tensor::{Device, Tensor};

    #[test]
    fn operators_follow_methods() {
        let a =
            Var::parameter(Tensor::from_slice(&[1.0f64, 2.0], &[2], Device::Cpu).unwrap()).unwrap();
        let b = Var::new(Tensor::from_slice(&[3.0f64, 5.0], &[2], Device::Cpu).unwrap());
        let y = (&(&(&a * &b).unwrap() + 1.0).unwrap() / 2.0).unwrap();
        assert_eq!(y.to_vec::<f64>().unwrap(), vec![2.0, 5.5]);
        let z = (-&(&y - &a).unwrap()).unwrap();
        z.sum(None, false).unwrap().backward().unwrap();
        // z = -(a*b/2 + 0.5 - a): dz/da = 1 - b/2.
        assert_eq!(a.grad().unwrap().to_vec::<f64>().unwrap(), vec![-0.5, -1.5]);
    }
}
