//! Session 78: `torch.xlogy`, `x ln y` with 0 where `x` is 0 (unless `y` is
//! NaN), as PyTorch 2.15's kernel: NaN where `y` is NaN, 0 where `x == 0`,
//! else `x * ln(y)`. The operands promote to a float dtype (integers and
//! bool give f32); f16/bf16 are computed in f32 and rounded once.

use super::elementwise::{result_type, Operand};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

impl Tensor {
    /// `torch.xlogy(self, other)`, broadcasting.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![0.0f64, 2.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let y = tensor![0.0f64, 1.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// assert_eq!(x.xlogy(&y).unwrap().to_vec::<f64>().unwrap(), vec![0.0, 0.0]);
    /// ```
    pub fn xlogy(&self, other: &Tensor) -> Result<Tensor> {
        let mut d = result_type(&[Operand::Tensor(self), Operand::Tensor(other)]);
        if !d.is_float() {
            d = DType::F32;
        }
        broadcast_shapes("xlogy", self.shape(), other.shape())?;
        let c = match d {
            DType::F16 | DType::BF16 => DType::F32,
            d => d,
        };
        let (x, y) = (self.to_dtype(c)?, other.to_dtype(c)?);
        let prod = x.mul(&y.log()?)?;
        let zeroed = Tensor::where_cond(&x.eq(0)?, 0.0, &prod)?;
        Tensor::where_cond(&y.isnan()?, f64::NAN, &zeroed)?.to_dtype(d)
    }
}
