//! Ops along one dim: `softmax`, `log_softmax`, `cumsum`.
//!
//! Argument checks and dtype rules here (PyTorch's); the input is made
//! contiguous (a no-op for the usual contiguous input) and the backend runs
//! one fused pass per row (see `backend::cpu::dimops` and the CUDA
//! `kernels::dimops`).

use crate::backend::DimShape;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::normalize_dim;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;

impl Tensor {
    /// `torch.softmax(self, dim, dtype)`: `exp(x - max) / sum(exp(x - max))`
    /// along `dim` (negative dims count from the end; a 0-d tensor takes 0
    /// and -1). With a `dtype` (a float dtype) the input is converted to it
    /// first and the result has it; without, the input must be a float
    /// tensor. f16/bf16 compute in f32. A row holding NaN or +inf, and an
    /// all -inf row, give NaN.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], Device::Cpu).unwrap();
    /// let p = x.softmax(-1, None).unwrap().to_vec::<f32>().unwrap();
    /// assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6 && p[2] > p[1]);
    /// ```
    pub fn softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        self.softmax_impl("softmax", dim, dtype, false)
    }

    /// `torch.log_softmax(self, dim, dtype)`: `x - max - log(sum(exp(x - max)))`
    /// along `dim`, with [`Tensor::softmax`]'s rules (`log_softmax([-inf, 1])`
    /// is `[-inf, 0]`).
    pub fn log_softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        self.softmax_impl("log_softmax", dim, dtype, true)
    }

    fn softmax_impl(
        &self,
        name: &'static str,
        dim: i64,
        dtype: Option<DType>,
        log: bool,
    ) -> Result<Tensor> {
        let d = normalize_dim(name, dim, self.ndim())?;
        let target = dtype.unwrap_or(self.dtype());
        if !target.is_float() {
            return Err(TensorError::dtype(
                name,
                match dtype {
                    Some(t) => format!("the dtype argument must be a float dtype, not {t}"),
                    None => format!(
                        "not defined for dtype {} (pass a float dtype, e.g. dtype=Some(DType::F32))",
                        self.dtype()
                    ),
                },
            ));
        }
        let x = self.to_dtype(target)?.contiguous()?;
        let out = Tensor::empty(self.shape(), target, self.device())?;
        let s = DimShape::new(self.shape(), d);
        dim_launch(&out, &x, |be| be.softmax(&out.arg(), &x.arg(), s, log))?;
        Ok(out)
    }

    /// `torch.cumsum(self, dim, dtype)`: inclusive running sums along `dim`.
    /// Without a dtype, integer and bool inputs give i64 (so they do not
    /// wrap); with one, the input is converted to it first (f32 into i32
    /// truncates each element) and sums wrap in integer dtypes; f16/bf16
    /// accumulate in f32. A bool dtype is an error.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, DType};
    /// let x = Tensor::from_slice(&[1i32, 2, 3], &[3], Device::Cpu).unwrap();
    /// let c = x.cumsum(0, None).unwrap();
    /// assert_eq!(c.dtype(), DType::I64);
    /// assert_eq!(c.to_vec::<i64>().unwrap(), vec![1, 3, 6]);
    /// ```
    pub fn cumsum(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        let d = normalize_dim("cumsum", dim, self.ndim())?;
        let target = match dtype {
            Some(DType::Bool) => {
                return Err(TensorError::dtype(
                    "cumsum",
                    "a bool dtype is not supported; use an integer or float dtype",
                ))
            }
            Some(t) => t,
            None if self.dtype().is_float() => self.dtype(),
            None => DType::I64,
        };
        let x = self.to_dtype(target)?.contiguous()?;
        let out = Tensor::empty(self.shape(), target, self.device())?;
        let s = DimShape::new(self.shape(), d);
        dim_launch(&out, &x, |be| be.cumsum(&out.arg(), &x.arg(), s))?;
        Ok(out)
    }
}

/// Runs `f` on the output's backend with both storages locked.
fn dim_launch(
    out: &Tensor,
    input: &Tensor,
    f: impl FnOnce(&dyn crate::backend::Backend) -> Result<()>,
) -> Result<()> {
    if out.numel() == 0 {
        return Ok(());
    }
    let be = out.backend()?;
    let _g = AccessGuard::lock(Some(out.storage()), &[input.storage()]);
    f(be)
}
