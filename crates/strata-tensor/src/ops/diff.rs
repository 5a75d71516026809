//! Differences: `diff` (of neighbours along a dim) and `cdist` (between
//! every pair of rows of two sets), session 77, both composed of existing
//! ops (narrow views and subtraction; broadcasting, a reduction along the
//! last dim), so every device runs them.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::elementwise::same_device;
use crate::shape::{broadcast_shapes, normalize_dim};
use crate::tensor::Tensor;

impl Tensor {
    /// `torch.diff(self, n, dim, prepend, append)`: the `n`-th forward
    /// difference along `dim` (`out[i] = x[i + 1] - x[i]`, applied `n`
    /// times; logical xor for bool), after `prepend` and `append` are
    /// joined to self along `dim` (their dtypes promote with self's, as
    /// `cat`'s do). Each difference shortens the dim by one; an `n` past
    /// the dim's size leaves it empty. `n = 0` gives a copy of self
    /// (PyTorch then ignores `prepend`, `append` and even `dim`).
    ///
    /// Integer differences wrap (u8 `1 - 5` is 252), as PyTorch's.
    ///
    /// Errors: a 0-d input ([`TensorError::Shape`]), a negative `n`
    /// ([`TensorError::Value`]), `dim` out of range ([`TensorError::Dim`]),
    /// a `prepend`/`append` of another rank or other sizes off `dim`
    /// ([`TensorError::Shape`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let x = Tensor::from_slice(&[1i64, 3, 6, 10], &[4], Device::Cpu).unwrap();
    /// assert_eq!(x.diff(1, -1, None, None).unwrap().to_vec::<i64>().unwrap(), vec![2, 3, 4]);
    /// assert_eq!(x.diff(2, 0, None, None).unwrap().to_vec::<i64>().unwrap(), vec![1, 1]);
    /// let zero = Tensor::from_slice(&[0i64], &[1], Device::Cpu).unwrap();
    /// let d = x.diff(1, 0, Some(&zero), None).unwrap();
    /// assert_eq!(d.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4]);
    /// ```
    pub fn diff(
        &self,
        n: i64,
        dim: i64,
        prepend: Option<&Tensor>,
        append: Option<&Tensor>,
    ) -> Result<Tensor> {
        const OP: &str = "diff";
        if self.ndim() == 0 {
            return Err(TensorError::shape(
                OP,
                "expects an input of at least one dimension, got a 0-d tensor",
            ));
        }
        if n < 0 {
            return Err(TensorError::value(
                OP,
                format!("the order must be non-negative, got {n}"),
            ));
        }
        for other in [prepend, append].into_iter().flatten() {
            let d = normalize_dim(OP, dim, self.ndim())?;
            if other.ndim() != self.ndim() {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "prepend or append must have the input's rank {}, got shape {:?}",
                        self.ndim(),
                        other.shape()
                    ),
                ));
            }
            if let Some(i) =
                (0..self.ndim()).find(|&i| i != d && other.shape()[i] != self.shape()[i])
            {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "prepend or append must match the input's sizes except along dim {d}: \
                         input size({i}) = {}, got {}",
                        self.shape()[i],
                        other.shape()[i]
                    ),
                ));
            }
            same_device(OP, self, other)?;
        }
        if n == 0 {
            return self.deep_clone();
        }
        let joined;
        let x = if prepend.is_none() && append.is_none() {
            self
        } else {
            let parts: Vec<&Tensor> = prepend.into_iter().chain([self]).chain(append).collect();
            joined = Tensor::cat(&parts, dim)?;
            &joined
        };
        let d = normalize_dim(OP, dim, x.ndim())?;
        let len = x.shape()[d] as i64;
        let mut out = x.clone();
        let mut out_len = len - 1;
        for _ in 0..n.min(len) {
            let hi = out.narrow(d as i64, 1, out_len)?;
            let lo = out.narrow(d as i64, 0, out_len)?;
            out = if out.dtype() == DType::Bool {
                hi.logical_xor(&lo)?
            } else {
                hi.sub(&lo)?
            };
            out_len -= 1;
        }
        Ok(out)
    }

    /// `torch.cdist(self, x2, p)`: the `p`-norm distance between each row of
    /// `self` (`[.., r1, c]`) and each row of `x2` (`[.., r2, c]`), as a
    /// `[.., r1, r2]` tensor; the batch dims broadcast. `p = 0` counts the
    /// differing coordinates, `p = inf` takes the largest difference.
    ///
    /// Computed as the difference form for every `p`: `|x1_i - x2_j|`
    /// coordinate by coordinate, then `p`'s reduction (so a distance of 0
    /// is exactly 0). For `p = 2` with more than 25 rows on either side
    /// PyTorch's default `compute_mode` uses the matrix-product form
    /// `sqrt(max(|a|^2 - 2 a.b + |b|^2, 1e-30))` instead, whose rounding
    /// error grows with the points' magnitude; strata keeps the exact form
    /// (PyTorch's `donot_use_mm_for_euclid_dist`). The intermediate holds
    /// `r1 * r2 * c` elements per batch. f16 and bf16, which PyTorch's CPU
    /// takes only in that matrix-product case, are accepted there and
    /// computed in f32, rounded once. As PyTorch's kernel, `p = inf`
    /// skips NaN coordinates (a NaN never beats the running maximum), other
    /// norms propagate them.
    ///
    /// Errors: an input of fewer than 2 dims, different column counts,
    /// batch dims that do not broadcast ([`TensorError::Shape`] /
    /// [`TensorError::Broadcast`]); a non-float input, inputs of different
    /// dtypes, f16/bf16 outside PyTorch's matrix-product case
    /// ([`TensorError::DType`]; an empty result or one without columns
    /// takes x1's dtype unchecked, as PyTorch's); a negative or NaN `p`
    /// ([`TensorError::Value`]).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let a = Tensor::from_slice(&[0.0f32, 0.0, 1.0, 1.0], &[2, 2], Device::Cpu).unwrap();
    /// let b = Tensor::from_slice(&[3.0f32, 4.0], &[1, 2], Device::Cpu).unwrap();
    /// assert_eq!(a.cdist(&b, 2.0).unwrap().to_vec::<f32>().unwrap(), vec![5.0, 13f32.sqrt()]);
    /// assert_eq!(a.cdist(&b, 1.0).unwrap().to_vec::<f32>().unwrap(), vec![7.0, 5.0]);
    /// assert_eq!(a.cdist(&b, f64::INFINITY).unwrap().to_vec::<f32>().unwrap(), vec![4.0, 3.0]);
    /// ```
    pub fn cdist(&self, x2: &Tensor, p: f64) -> Result<Tensor> {
        const OP: &str = "cdist";
        let x1 = self;
        for (name, x) in [("x1", x1), ("x2", x2)] {
            if x.ndim() < 2 {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "{name} must have at least 2 dims, got shape {:?}",
                        x.shape()
                    ),
                ));
            }
        }
        let (n1, n2) = (x1.ndim(), x2.ndim());
        let c = x1.shape()[n1 - 1];
        if x2.shape()[n2 - 1] != c {
            return Err(TensorError::shape(
                OP,
                format!(
                    "x1 and x2 must have the same number of columns, got shapes {:?} and {:?}",
                    x1.shape(),
                    x2.shape()
                ),
            ));
        }
        for (name, x) in [("x1", x1), ("x2", x2)] {
            if !x.dtype().is_float() {
                return Err(TensorError::dtype(
                    OP,
                    format!(
                        "only floating-point dtypes are supported, {name} is {}",
                        x.dtype()
                    ),
                ));
            }
        }
        if p.is_nan() || p < 0.0 {
            return Err(TensorError::value(
                OP,
                format!("only non-negative p values are supported, got {p}"),
            ));
        }
        same_device(OP, x1, x2)?;
        let (r1, r2) = (x1.shape()[n1 - 2], x2.shape()[n2 - 2]);
        let batch = broadcast_shapes(OP, &x1.shape()[..n1 - 2], &x2.shape()[..n2 - 2])?;
        let mut out_shape = batch.clone();
        out_shape.extend([r1, r2]);
        let dt = x1.dtype();
        if r1 == 0 || r2 == 0 || batch.contains(&0) {
            return Tensor::zeros(&out_shape, dt, x1.device());
        }
        if c == 0 {
            return Tensor::zeros(&out_shape, dt, x1.device());
        }
        if x2.dtype() != dt {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "x1 and x2 must have the same dtype, got {dt} and {}",
                    x2.dtype()
                ),
            ));
        }
        let matrix_form = p == 2.0 && (r1 > 25 || r2 > 25);
        if matches!(dt, DType::F16 | DType::BF16) && !matrix_form {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "not implemented for {dt} (PyTorch's CPU takes f16/bf16 only for p = 2 with more than 25 rows); convert to f32"
                ),
            ));
        }
        let work = if dt.is_float() && dt.size() == 2 {
            DType::F32
        } else {
            dt
        };
        let expanded = |x: &Tensor, r: usize| -> Result<Tensor> {
            let mut shape: Vec<i64> = batch.iter().map(|&s| s as i64).collect();
            shape.extend([r as i64, c as i64]);
            x.expand(&shape)?.to_dtype(work)
        };
        let a = expanded(x1, r1)?.unsqueeze(-2)?;
        let b = expanded(x2, r2)?.unsqueeze(-3)?;
        let d = a.sub(&b)?.abs()?;
        let last = [-1i64];
        let dist = if p == 0.0 {
            // PyTorch's `min(ceil(|d|), 1)`: NaN stays NaN.
            d.ceil()?
                .clamp(None::<f64>, Some(1.0))?
                .sum(Some(&last), false)?
        } else if p == 1.0 {
            d.sum(Some(&last), false)?
        } else if p == 2.0 {
            d.square()?.sum(Some(&last), false)?.sqrt()?
        } else if p.is_infinite() {
            let d = Tensor::where_cond(&d.isnan()?, 0.0, &d)?;
            d.max_dim(-1, false)?.0
        } else {
            d.pow(p)?.sum(Some(&last), false)?.pow(1.0 / p)?
        };
        dist.to_dtype(dt)
    }
}
