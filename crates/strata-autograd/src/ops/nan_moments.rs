//! Session 78: `nansum`, `nanmean`, `var_mean`, `std_mean` and `movedim` on
//! variables: `nansum` recorded as the sum of the input with its NaNs
//! replaced by 0 (the gradient is `g` where the input is not NaN, 0 where
//! it is, PyTorch's `grad * self.isnan().logical_not()`), `nanmean` as
//! that sum over the count (PyTorch's composition), the moments as `var`
//! (or `std`) and `mean`, `movedim` as its `permute`.

use crate::error::Result;
use crate::var::Var;
use strata_tensor::movedim_order;

impl Var {
    /// `torch.nansum` ([`strata_tensor::Tensor::nansum`]).
    pub fn nansum(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        self.nan_zeroed()?.sum(dims, keepdim)
    }

    fn nan_zeroed(&self) -> Result<Var> {
        if !self.dtype().is_float() {
            return Ok(self.clone());
        }
        let zeros = Var::new(self.data().zeros_like(None)?);
        Var::where_cond(&self.data().isnan()?, &zeros, self)
    }

    /// `torch.nanmean` ([`strata_tensor::Tensor::nanmean`]).
    pub fn nanmean(&self, dims: Option<&[i64]>, keepdim: bool) -> Result<Var> {
        // The checks (a float input) are the tensor form's.
        self.data().nanmean(dims, keepdim)?;
        let count = self.data().isnan()?.logical_not()?.sum(dims, keepdim)?;
        self.nansum(dims, keepdim)?.div(&Var::new(count))
    }

    /// `torch.var_mean` ([`strata_tensor::Tensor::var_mean`]): `(var, mean)`.
    pub fn var_mean(
        &self,
        dims: Option<&[i64]>,
        correction: f64,
        keepdim: bool,
    ) -> Result<(Var, Var)> {
        let var = self.var(dims, correction, keepdim)?;
        let all = dims.filter(|d| !d.is_empty());
        Ok((var, self.mean(all, keepdim)?))
    }

    /// `torch.std_mean` ([`strata_tensor::Tensor::std_mean`]): `(std, mean)`.
    pub fn std_mean(
        &self,
        dims: Option<&[i64]>,
        correction: f64,
        keepdim: bool,
    ) -> Result<(Var, Var)> {
        let std = self.std(dims, correction, keepdim)?;
        let all = dims.filter(|d| !d.is_empty());
        Ok((std, self.mean(all, keepdim)?))
    }

    /// `torch.movedim` ([`strata_tensor::Tensor::movedim`]), a view.
    pub fn movedim(&self, source: &[i64], destination: &[i64]) -> Result<Var> {
        let order = movedim_order(self.ndim(), source, destination)?;
        self.permute(&order)
    }
}
