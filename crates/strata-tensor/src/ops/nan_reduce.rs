//! Session 78: the reductions that skip NaN, `torch.nansum` and
//! `torch.nanmean`: the sum of the input with its NaNs replaced by 0, and
//! that sum over the count of the elements that are not NaN (PyTorch's own
//! composition of `nanmean`). Integer and bool inputs have no NaN: their
//! `nansum` is `sum`; `nanmean` takes float tensors only, as PyTorch's.

use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

impl Tensor {
    /// `torch.nansum(self, dims, keepdim)`: the sum over `dims` (all with
    /// `None`) treating NaN as 0; the dtype as [`Tensor::sum`]'s.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![1.0f32, f32::NAN, 2.0].unwrap();
    /// assert_eq!(x.nansum(None, false).unwrap().item::<f32>().unwrap(), 3.0);
    /// ```
    pub fn nansum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        self.nan_zeroed()?.sum(dims, keepdim)
    }

    /// `self` with NaN replaced by 0 (itself for a dtype without NaN).
    pub(crate) fn nan_zeroed(&self) -> Result<Tensor> {
        if self.dtype().is_float() {
            Tensor::where_cond(&self.isnan()?, 0.0, self)
        } else {
            Ok(self.clone())
        }
    }

    /// `torch.nanmean(self, dims, keepdim)`: [`Tensor::nansum`] divided by
    /// the number of elements that are not NaN (NaN where there are none);
    /// float tensors only.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![1.0f32, f32::NAN, 2.0].unwrap();
    /// assert_eq!(x.nanmean(None, false).unwrap().item::<f32>().unwrap(), 1.5);
    /// ```
    pub fn nanmean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                "nanmean",
                format!(
                    "expected input to have floating point dtype but got {} (convert with to_dtype first)",
                    self.dtype()
                ),
            ));
        }
        let count = self.isnan()?.logical_not()?.sum(dims, keepdim)?;
        self.nansum(dims, keepdim)?.div(&count)
    }
}
