//! Session 78: `torch.addcdiv`, `self + value * t1 / t2`, as PyTorch 2.15's
//! CPU kernel computes it: the three operands promote and broadcast, the
//! product `value * t1` is divided by `t2` and added to `self` (f16/bf16 in
//! f32, rounded once); integer `t1` and `t2` together are an error, as
//! PyTorch no longer divides integers here. `addcdiv_plan` holds the
//! checks and is shared with strata-autograd's recorded form.

use super::checks::check_fits;
use super::elementwise::{result_type, Operand};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::scalar::Scalar;
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

/// PyTorch's checks of `addcdiv(x, t1, t2, value)`: returns the result
/// dtype.
pub fn addcdiv_plan(x: &Tensor, t1: &Tensor, t2: &Tensor, value: f64) -> Result<DType> {
    const OP: &str = "addcdiv";
    if !t1.dtype().is_float() && !t2.dtype().is_float() {
        return Err(TensorError::dtype(
            OP,
            "Integer division with addcdiv is no longer supported: compute \
             (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs, \
             or convert tensor1 or tensor2 to a float dtype",
        ));
    }
    let shape = broadcast_shapes(OP, x.shape(), t1.shape())?;
    broadcast_shapes(OP, &shape, t2.shape())?;
    let d = result_type(&[Operand::Tensor(x), Operand::Tensor(t1), Operand::Tensor(t2)]);
    let c = compute_dtype(d);
    check_fits(OP, Scalar::Float(value), c)?;
    Ok(d)
}

fn compute_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

impl Tensor {
    /// `torch.addcdiv(self, t1, t2, value=value)`: `self + value * t1 / t2`
    /// element-wise, broadcasting, in the promoted dtype.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![1.0f32, 1.0].unwrap();
    /// let a = tensor![1.0f32, 3.0].unwrap();
    /// let b = tensor![2.0f32, 4.0].unwrap();
    /// assert_eq!(x.addcdiv(&a, &b, 2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 2.5]);
    /// ```
    pub fn addcdiv(&self, t1: &Tensor, t2: &Tensor, value: f64) -> Result<Tensor> {
        let d = addcdiv_plan(self, t1, t2, value)?;
        let c = compute_dtype(d);
        let q = t1.to_dtype(c)?.mul(value)?.div(&t2.to_dtype(c)?)?;
        self.to_dtype(c)?.add(&q)?.to_dtype(d)
    }
}
