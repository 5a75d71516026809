//! Ops along one dim: `softmax`, `log_softmax`, attention's fused
//! `scaled_softmax` (scale and causal mask in the same pass), `cumsum`.
//!
//! Argument checks and dtype rules here (PyTorch's); the input is made
//! contiguous (a no-op for the usual contiguous input) and the backend runs
//! one fused pass per row (see `backend::cpu::dimops` and the CUDA
//! `kernels::dimops`).

use crate::backend::{DimShape, SoftmaxMode};
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
    /// tensor (an empty input takes any dtype and gives an empty result of
    /// it, as in PyTorch). f16/bf16 compute in f32. A row holding NaN or
    /// +inf, and an all -inf row, give NaN.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], Device::Cpu).unwrap();
    /// let p = x.softmax(-1, None).unwrap().to_vec::<f32>().unwrap();
    /// assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6 && p[2] > p[1]);
    /// ```
    pub fn softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        self.softmax_impl("softmax", dim, dtype, SoftmaxMode::plain(false))
    }

    /// Attention's softmax in one pass over the last dim:
    /// `softmax(mask(self * scale), -1, dtype)`, where with `causal` the
    /// mask sets element `j` of row `i` of every `[.., L, S]` matrix (the
    /// last two dims) to -inf where `j > i` (the mask `triu(ones(L, S), 1)`
    /// of PyTorch's `is_causal`, generated from the indices: no mask tensor
    /// is read, and the masked elements of the input are not read either).
    /// Equal to `self.mul(scale)?.masked_fill(&mask, -inf)?.softmax(-1,
    /// dtype)` with the product kept in the compute type (f32 for f16/bf16
    /// inputs) instead of rounded to the input's dtype; the masked outputs
    /// are exactly 0, except in a row that is NaN (its kept elements hold a
    /// NaN or +inf, or are all -inf), which is NaN through and through, as
    /// PyTorch's `exp(-inf - nan)` makes it. Its gradient is [`Tensor::softmax_backward`] of the
    /// output (times `scale` for the gradient of `self`).
    ///
    /// Errors: a non-float input (or dtype), a 0-d input, a causal mask on a
    /// 1-d input, a scale that is not finite.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let s = Tensor::from_slice(&[1.0f32, 5.0, 2.0, 2.0], &[2, 2], Device::Cpu).unwrap();
    /// let p = s.scaled_softmax(0.5, true, None).unwrap().to_vec::<f32>().unwrap();
    /// assert_eq!(p, vec![1.0, 0.0, 0.5, 0.5]);
    /// ```
    pub fn scaled_softmax(&self, scale: f64, causal: bool, dtype: Option<DType>) -> Result<Tensor> {
        const OP: &str = "scaled_softmax";
        if self.ndim() == 0 || (causal && self.ndim() < 2) {
            return Err(TensorError::dim(
                OP,
                format!(
                    "needs at least {} dims (rows along the last dim{}), got shape {:?}",
                    if causal { 2 } else { 1 },
                    if causal {
                        ", in [.., L, S] matrices"
                    } else {
                        ""
                    },
                    self.shape()
                ),
            ));
        }
        if !scale.is_finite() {
            return Err(TensorError::Value {
                op: OP,
                msg: format!("the scale must be finite, got {scale}"),
            });
        }
        let causal_rows = if causal {
            self.shape()[self.ndim() - 2]
        } else {
            0
        };
        let mode = SoftmaxMode {
            log: false,
            scale,
            causal_rows,
            round_log_sum: false,
        };
        self.softmax_impl(OP, -1, dtype, mode)
    }

    /// `torch.log_softmax(self, dim, dtype)`: `x - max - log(sum(exp(x - max)))`
    /// along `dim`, with [`Tensor::softmax`]'s rules (`log_softmax([-inf, 1])`
    /// is `[-inf, 0]`).
    pub fn log_softmax(&self, dim: i64, dtype: Option<DType>) -> Result<Tensor> {
        self.softmax_impl("log_softmax", dim, dtype, SoftmaxMode::plain(true))
    }

    fn softmax_impl(
        &self,
        name: &'static str,
        dim: i64,
        dtype: Option<DType>,
        mode: SoftmaxMode,
    ) -> Result<Tensor> {
        let d = normalize_dim(name, dim, self.ndim())?;
        let target = dtype.unwrap_or(self.dtype());
        if !target.is_float() && self.numel() == 0 {
            // PyTorch returns an empty input's (empty) result before its
            // kernel's dtype dispatch: any dtype is accepted there.
            return Tensor::uninit(name, self.shape(), target, self.device());
        }
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
        // The result first: a shape too large to store is named as the op's.
        let out = Tensor::uninit(name, self.shape(), target, self.device())?;
        let x = self.to_dtype_contiguous(target)?.contiguous()?;
        let s = DimShape::new(self.shape(), d);
        let mode = SoftmaxMode {
            round_log_sum: mode.log
                && d + 1 >= self.ndim()
                && matches!(target, DType::F16 | DType::BF16),
            ..mode
        };
        dim_launch(&out, &x, |be| be.softmax(&out.arg(), &x.arg(), s, mode))?;
        Ok(out)
    }

    /// `torch.cumsum(self, dim, dtype)`: inclusive running sums along `dim`.
    /// Without a dtype, integer and bool inputs give i64 (so they do not
    /// wrap); with one, the input is converted to it first (f32 into i32
    /// truncates each element) and sums wrap in integer dtypes; f16/bf16
    /// accumulate in f32, and f32 on the CPU in f64 (PyTorch's CPU kernel:
    /// `[2^24, 1, 1]` gives `[2^24, 2^24, 2^24 + 2]`; on a GPU, as PyTorch's
    /// CUDA kernel, in f32). A bool dtype is an error, except (as in
    /// PyTorch, whose kernel only runs for the other inputs) for a 0-d
    /// input, whose result is the input converted to bool, and an empty one.
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
            Some(DType::Bool) if self.ndim() > 0 && self.numel() > 0 => {
                return Err(TensorError::dtype(
                    "cumsum",
                    "a bool dtype is not supported; use an integer or float dtype",
                ))
            }
            Some(t) => t,
            None if self.dtype().is_float() => self.dtype(),
            None => DType::I64,
        };
        // The result first: a shape too large to store is named as cumsum's.
        let out = Tensor::uninit("cumsum", self.shape(), target, self.device())?;
        if target == DType::Bool || self.ndim() == 0 {
            // PyTorch fills a 0-d result with the input itself (converted;
            // not summed onto 0, so -0.0 stays -0.0), and a bool one can
            // only be 0-d or empty (checked above).
            if self.numel() > 0 {
                out.copy_(self)?;
            }
            return Ok(out);
        }
        let x = self.to_dtype_contiguous(target)?.contiguous()?;
        let s = DimShape::new(self.shape(), d);
        dim_launch(&out, &x, |be| be.cumsum(&out.arg(), &x.arg(), s))?;
        Ok(out)
    }
}

impl Tensor {
    /// The gradient of [`Tensor::softmax`] along `dim` (PyTorch's
    /// `_softmax_backward_data`): `self` is the softmax's output `y`, `grad`
    /// the gradient of the loss with respect to it; the result,
    /// `y (grad - sum(grad y))` with the sum along `dim`, has `y`'s shape and
    /// dtype. One fused pass per row; f16/bf16 computed in f32 and rounded
    /// once. `grad` is converted to `y`'s dtype.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let y = Tensor::from_slice(&[0.25f32, 0.75], &[2], Device::Cpu).unwrap();
    /// let g = Tensor::from_slice(&[1.0f32, 0.0], &[2], Device::Cpu).unwrap();
    /// let dx = y.softmax_backward(&g, 0).unwrap().to_vec::<f32>().unwrap();
    /// // d y0 / d x = y0 (1 - y0), -y0 y1
    /// assert_eq!(dx, vec![0.1875, -0.1875]);
    /// ```
    pub fn softmax_backward(&self, grad: &Tensor, dim: i64) -> Result<Tensor> {
        self.softmax_backward_impl("softmax_backward", grad, dim, false)
    }

    /// The gradient of [`Tensor::log_softmax`] along `dim` (PyTorch's
    /// `_log_softmax_backward_data`): `self` is the log-softmax's output `y`;
    /// the result is `grad - exp(y) sum(grad)`, with
    /// [`Tensor::softmax_backward`]'s rules.
    pub fn log_softmax_backward(&self, grad: &Tensor, dim: i64) -> Result<Tensor> {
        self.softmax_backward_impl("log_softmax_backward", grad, dim, true)
    }

    /// [`Tensor::softmax_backward`] written over `grad` instead of into a
    /// new tensor: afterwards `grad` holds `y (grad - sum(grad y))` (`self`
    /// is `y`). It saves the result's allocation, a tensor of `y`'s size
    /// (attention's backward uses it on the `[.., L, S]` score gradient).
    /// Each row (or column set) along `dim` is read in full before any of
    /// it is written, on every backend.
    ///
    /// `grad` must have `y`'s shape, dtype and device and must not share
    /// memory with `y`; a non-contiguous `grad` is computed into a new
    /// tensor and copied back (no memory saved). `grad`'s version counter
    /// is bumped.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let y = Tensor::from_slice(&[0.25f32, 0.75], &[2], Device::Cpu).unwrap();
    /// let g = Tensor::from_slice(&[1.0f32, 0.0], &[2], Device::Cpu).unwrap();
    /// y.softmax_backward_inplace(&g, 0).unwrap();
    /// assert_eq!(g.to_vec::<f32>().unwrap(), vec![0.1875, -0.1875]);
    /// ```
    pub fn softmax_backward_inplace(&self, grad: &Tensor, dim: i64) -> Result<()> {
        const OP: &str = "softmax_backward_inplace";
        let d = normalize_dim(OP, dim, self.ndim())?;
        if !self.dtype().is_float() || grad.dtype() != self.dtype() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "the forward's output must be a float tensor and the gradient of its dtype, got {} and {}",
                    self.dtype(),
                    grad.dtype()
                ),
            ));
        }
        if grad.shape() != self.shape() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the gradient's shape {:?} differs from the output's {:?}",
                    grad.shape(),
                    self.shape()
                ),
            ));
        }
        crate::ops::elementwise::same_device(OP, self, grad)?;
        if grad.same_storage(self) {
            return Err(TensorError::overlap(
                OP,
                "the gradient shares memory with the forward's output; pass a separate gradient",
            ));
        }
        if grad.numel() == 0 {
            return Ok(());
        }
        // An expanded gradient cannot hold one result per element: refused
        // here, before the out-of-place path computes anything.
        crate::ops::elementwise::check_inplace(OP, grad, &mut [])?;
        if !grad.is_contiguous() {
            let r = self.softmax_backward(grad, dim)?;
            grad.copy_(&r)?;
            return Ok(());
        }
        let y = self.contiguous()?;
        let s = DimShape::new(self.shape(), d);
        {
            let be = grad.backend()?;
            let _g = AccessGuard::lock(Some(grad.storage()), &[y.storage()]);
            // `out` is `grad` itself: the backends read each row in full
            // before writing it (see `Backend::softmax_backward`).
            be.softmax_backward(&grad.arg(), &grad.arg(), &y.arg(), s, false)?;
        }
        grad.bump_version();
        Ok(())
    }

    fn softmax_backward_impl(
        &self,
        name: &'static str,
        grad: &Tensor,
        dim: i64,
        log: bool,
    ) -> Result<Tensor> {
        let d = normalize_dim(name, dim, self.ndim())?;
        if !self.dtype().is_float() {
            return Err(TensorError::dtype(
                name,
                format!(
                    "the forward's output must be a float tensor, not {}",
                    self.dtype()
                ),
            ));
        }
        if grad.shape() != self.shape() {
            return Err(TensorError::shape(
                name,
                format!(
                    "the gradient's shape {:?} differs from the output's {:?}",
                    grad.shape(),
                    self.shape()
                ),
            ));
        }
        crate::ops::elementwise::same_device(name, self, grad)?;
        let y = self.contiguous()?;
        let g = grad.to_dtype_contiguous(self.dtype())?.contiguous()?;
        let out = Tensor::uninit(
            "softmax_backward",
            self.shape(),
            self.dtype(),
            self.device(),
        )?;
        if out.numel() == 0 {
            return Ok(out);
        }
        let s = DimShape::new(self.shape(), d);
        {
            let be = out.backend()?;
            let _g = AccessGuard::lock(Some(out.storage()), &[g.storage(), y.storage()]);
            be.softmax_backward(&out.arg(), &g.arg(), &y.arg(), s, log)?;
        }
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
