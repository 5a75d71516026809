//! Session 78: `torch.var_mean` and `torch.std_mean`, the variance (or
//! standard deviation) and the mean over the same dims in one call, as
//! [`Tensor::var`] / [`Tensor::std`] and [`Tensor::mean`] compute them.

use crate::error::Result;
use crate::tensor::Tensor;

impl Tensor {
    /// `torch.var_mean(self, dims, correction, keepdim)`: `(var, mean)` over
    /// `dims` (all with `None` or empty), [`Tensor::var`]'s rules; float
    /// tensors only. The mean is [`Tensor::mean`]'s: over elements one of
    /// which is infinite it is that infinity, where PyTorch's Welford
    /// reduction gives NaN unless the infinity comes last in its order.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![1.0f64, 2.0, 3.0, 4.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let (v, m) = x.var_mean(None, 1.0, false).unwrap();
    /// assert_eq!((v.item::<f64>().unwrap(), m.item::<f64>().unwrap()), (5.0 / 3.0, 2.5));
    /// ```
    pub fn var_mean(
        &self,
        dims: Option<&[i64]>,
        correction: f64,
        keepdim: bool,
    ) -> Result<(Tensor, Tensor)> {
        let var = self.var(dims, correction, keepdim)?;
        let all = dims.filter(|d| !d.is_empty());
        Ok((var, self.mean(all, keepdim)?))
    }

    /// `torch.std_mean(self, dims, correction, keepdim)`: `(std, mean)`, as
    /// [`Tensor::var_mean`].
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![1.0f64, 3.0].unwrap().to_dtype(strata_tensor::DType::F64).unwrap();
    /// let (s, m) = x.std_mean(None, 0.0, false).unwrap();
    /// assert_eq!((s.item::<f64>().unwrap(), m.item::<f64>().unwrap()), (1.0, 2.0));
    /// ```
    pub fn std_mean(
        &self,
        dims: Option<&[i64]>,
        correction: f64,
        keepdim: bool,
    ) -> Result<(Tensor, Tensor)> {
        let std = self.std(dims, correction, keepdim)?;
        let all = dims.filter(|d| !d.is_empty());
        Ok((std, self.mean(all, keepdim)?))
    }
}
