//! Differences: `diff` (of neighbours along a dim) and `cdist` (between
//! every pair of rows of two sets), session 77, both composed of existing
//! ops (narrow views and subtraction; broadcasting, a reduction along the
//! last dim), so every device runs them.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::elementwise::same_device;
use crate::shape::{broadcast_shapes, normalize_dim};
use crate::tensor::Tensor;

/// The most difference elements `cdist` holds at once (per block of x1's
/// rows, unless one row's differences with x2 alone are more).
const CDIST_BLOCK: usize = 1 << 22;

/// `p`-norm distances from the differences of `a` (`[B, r1, 1, c]`) and
/// `b` (`[B, 1, r2, c]`), reduced along the last dim: `[B, r1, r2]`.
fn distances(a: &Tensor, b: &Tensor, p: f64) -> Result<Tensor> {
    let d = a.sub(b)?.abs()?;
    let last = [-1i64];
    if p == 0.0 {
        // PyTorch's `min(ceil(|d|), 1)`: NaN stays NaN.
        d.ceil()?
            .clamp(None::<f64>, Some(1.0))?
            .sum(Some(&last), false)
    } else if p == 1.0 {
        d.sum(Some(&last), false)
    } else if p == 2.0 {
        d.square()?.sum(Some(&last), false)?.sqrt()
    } else if p.is_infinite() {
        let d = Tensor::where_cond(&d.isnan()?, 0.0, &d)?;
        Ok(d.max_dim(-1, false)?.0)
    } else {
        d.pow(p)?.sum(Some(&last), false)?.pow(1.0 / p)
    }
}

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
    /// (PyTorch's `donot_use_mm_for_euclid_dist`). The differences are
    /// taken a block of rows at a time, at most 2^22 elements (or one row's
    /// `r2 * c`) at once. f16 and bf16, which PyTorch's CPU
    /// takes only in that matrix-product case, are accepted there and
    /// computed in f32, rounded once. As PyTorch's kernel, `p = inf`
    /// skips NaN coordinates (a NaN never beats the running maximum), other
    /// norms propagate them, and f32 inputs take `p` rounded to f32 (so
    /// `p = 1e-300` counts differing coordinates as `p = 0`, and `1e300`
    /// takes the largest difference as `p = inf`).
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
        // PyTorch's kernel takes `p` in the computation dtype and picks the
        // norm from that value: for f32, p = 1e-300 is 0 (the count of
        // differing coordinates), 1e300 is inf (the largest difference),
        // 1.0000000001 is 1. (The matrix-product choice above uses `p`
        // itself, as PyTorch's `cdist` does.)
        let p = if work == DType::F32 {
            f64::from(p as f32)
        } else {
            p
        };
        // Both operands as [B, r, c] (the batch dims broadcast and
        // flattened, as PyTorch's `cdist_impl` reshapes them).
        let nb: usize = batch.iter().product();
        let flat = |x: &Tensor, r: usize| -> Result<Tensor> {
            let mut shape: Vec<i64> = batch.iter().map(|&s| s as i64).collect();
            shape.extend([r as i64, c as i64]);
            x.expand(&shape)?
                .reshape(&[nb as i64, r as i64, c as i64])?
                .to_dtype(work)
        };
        let a = flat(x1, r1)?.unsqueeze(2)?;
        let b = flat(x2, r2)?.unsqueeze(1)?;
        // The differences of x1's rows with x2's hold `B * r1 * r2 * c`
        // elements, the result's size times the columns: they are taken a
        // block at a time, each within CDIST_BLOCK elements (whole batches
        // where one batch fits, else blocks of one batch's rows; at least
        // one row, whose differences are one batch of x2's size).
        let per_row = r2.saturating_mul(c);
        let per_batch = per_row.saturating_mul(r1);
        let (batches, rows) = if per_batch <= CDIST_BLOCK {
            ((CDIST_BLOCK / per_batch).min(nb), r1)
        } else {
            (1, (CDIST_BLOCK / per_row).clamp(1, r1))
        };
        let mut out_shape_i: Vec<i64> = batch.iter().map(|&s| s as i64).collect();
        out_shape_i.extend([r1 as i64, r2 as i64]);
        if batches == nb && rows == r1 {
            return distances(&a, &b, p)?.reshape(&out_shape_i)?.to_dtype(dt);
        }
        let dist = Tensor::empty(&[nb, r1, r2], work, x1.device())?;
        for b0 in (0..nb).step_by(batches) {
            let bn = batches.min(nb - b0) as i64;
            let (ab, bb) = (a.narrow(0, b0 as i64, bn)?, b.narrow(0, b0 as i64, bn)?);
            for r0 in (0..r1).step_by(rows) {
                let rn = rows.min(r1 - r0) as i64;
                let block = distances(&ab.narrow(1, r0 as i64, rn)?, &bb, p)?;
                dist.narrow(0, b0 as i64, bn)?
                    .narrow(1, r0 as i64, rn)?
                    .copy_(&block)?;
            }
        }
        let dist = dist.reshape(&out_shape_i)?;
        dist.to_dtype(dt)
    }
}
