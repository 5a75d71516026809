//! Session 78: the shrinkage activations of `torch.nn.functional`:
//! `hardshrink`, `softshrink` and `tanhshrink`. The first two are PyTorch's
//! CPU kernels composed from the element-wise table's ops (float dtypes
//! only; f16/bf16 `softshrink` computed in f32 and rounded once, as its
//! kernel computes it); `tanhshrink` is `x - tanh(x)`, PyTorch's own
//! composition.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

/// Refuses the dtypes PyTorch's shrink kernels are not defined for.
pub(crate) fn check_float(op: &'static str, t: &Tensor) -> Result<()> {
    if t.dtype().is_float() {
        Ok(())
    } else {
        Err(TensorError::dtype(
            op,
            format!(
                "not defined for dtype {} (float tensors only; convert with to_dtype first)",
                t.dtype()
            ),
        ))
    }
}

impl Tensor {
    /// `F.hardshrink(self, lambd)`: 0 where `-lambd <= x <= lambd` (`lambd`
    /// rounded to self's dtype), `x` elsewhere (NaN stays NaN); float
    /// tensors only. PyTorch's default `lambd` is 0.5.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![-1.0f32, 0.25, 0.5, 2.0].unwrap();
    /// assert_eq!(x.hardshrink(0.5).unwrap().to_vec::<f32>().unwrap(), vec![-1.0, 0.0, 0.0, 2.0]);
    /// ```
    pub fn hardshrink(&self, lambd: f64) -> Result<Tensor> {
        check_float("hardshrink", self)?;
        let inside = self.ge(-lambd)?.logical_and(&self.le(lambd)?)?;
        Tensor::where_cond(&inside, 0.0, self)
    }

    /// `F.softshrink(self, lambd)`: `x - lambd` above `lambd`, `x + lambd`
    /// below `-lambd`, 0 between (NaN stays NaN); float tensors only, f16
    /// and bf16 computed in f32. A `lambd` outside `[0, the dtype's
    /// largest value]` (NaN too) is an error, as in PyTorch (default 0.5).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![-1.0f32, 0.25, 2.0].unwrap();
    /// assert_eq!(x.softshrink(0.5).unwrap().to_vec::<f32>().unwrap(), vec![-0.5, 0.0, 1.5]);
    /// ```
    pub fn softshrink(&self, lambd: f64) -> Result<Tensor> {
        const OP: &str = "softshrink";
        check_float(OP, self)?;
        // PyTorch's `softshrink_check`: lambd within [0, the dtype's max].
        let max = match self.dtype() {
            DType::F16 => half::f16::MAX.to_f64(),
            DType::BF16 => half::bf16::MAX.to_f64(),
            DType::F32 => f64::from(f32::MAX),
            _ => f64::MAX,
        };
        if !(0.0..=max).contains(&lambd) {
            return Err(TensorError::value(
                OP,
                format!(
                    "lambda must be in range [0, {max}] for input dtype {}, but found to be {lambd}",
                    self.dtype()
                ),
            ));
        }
        let x = match self.dtype() {
            DType::F16 | DType::BF16 => self.to_dtype(DType::F32)?,
            _ => self.clone(),
        };
        let mid = x.mul(0.0)?;
        let lower = Tensor::where_cond(&x.lt(-lambd)?, &x.add(lambd)?, &mid)?;
        let out = Tensor::where_cond(&x.gt(lambd)?, &x.sub(lambd)?, &lower)?;
        out.to_dtype(self.dtype())
    }

    /// `F.tanhshrink(self)`: `x - tanh(x)` (integer inputs give f32, as in
    /// PyTorch; bool is an error).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![0.0f64].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// assert_eq!(x.tanhshrink().unwrap().to_vec::<f64>().unwrap(), vec![0.0]);
    /// ```
    pub fn tanhshrink(&self) -> Result<Tensor> {
        self.sub(&self.tanh()?)
    }
}
