//! Whole-tensor comparisons: [`Tensor::equal`] and [`Tensor::allclose`]
//! (PyTorch's `torch.equal` and `torch.allclose`), computed on the tensors'
//! device; only a one-element answer comes back to the host.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;

impl Tensor {
    /// `torch.equal`: the same shape and equal elements (compared after type
    /// promotion, so `1i64` equals `1.0f32`; NaN equals nothing).
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// let a = tensor![[1., 2.], [3., 4.]]?;
    /// assert!(a.equal(&tensor![[1., 2.], [3., 4.]]?)?);
    /// assert!(!a.equal(&tensor![1., 2., 3., 4.]?)?);   // another shape
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn equal(&self, other: &Tensor) -> Result<bool> {
        if self.shape() != other.shape() {
            return Ok(false);
        }
        all_true(&self.eq(other)?)
    }

    /// `torch.allclose`: whether `|self - other| <= atol + rtol * |other|`
    /// for every element (broadcasting), with equal infinities close and NaN
    /// close to nothing. Integer tensors are compared exactly (their
    /// difference in i64, then in f64 against the tolerance).
    ///
    /// Both tensors must have one dtype, as PyTorch's `isclose` requires
    /// (`torch.allclose(int64, float32)` raises "Long did not match
    /// Float"): tensors of different dtypes are a [`TensorError::DType`]
    /// error, checked before the tolerances and the shapes as PyTorch does.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let a = tensor![1.0, 2.0]?;
    /// assert!(a.allclose(&tensor![1.0, 2.000001]?, 1e-5, 1e-8)?);
    /// assert!(!a.allclose(&tensor![1.0, 2.1]?, 1e-5, 1e-8)?);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64) -> Result<bool> {
        if self.dtype() != other.dtype() {
            return Err(TensorError::dtype(
                "allclose",
                format!(
                    "the tensors' dtypes must match: {} did not match {}",
                    self.dtype(),
                    other.dtype()
                ),
            ));
        }
        if !(rtol >= 0.0 && atol >= 0.0) {
            return Err(TensorError::value(
                "allclose",
                format!("rtol ({rtol}) and atol ({atol}) must be non-negative numbers"),
            ));
        }
        // PyTorch: with zero tolerances closeness is equality.
        if rtol == 0.0 && atol == 0.0 {
            return all_true(&self.eq(other)?);
        }
        // The closeness inequality is formed in the tensors' float dtype;
        // integer and bool tensors are first converted to the default
        // float dtype, f32, as PyTorch 2.15's isclose does (so integers
        // 2^53 + 1 and 2^53, equal in f32, are close with atol 0.5, and
        // 2^30 + 100 and 2^30, 128 apart in f32, are not with atol 99).
        // Equality itself is exact in the tensors' own dtype.
        let eq = self.eq(other)?;
        let float = if self.dtype().is_float() {
            self.dtype()
        } else {
            DType::F32
        };
        let (a, b) = (
            self.to_dtype_contiguous(float)?,
            other.to_dtype_contiguous(float)?,
        );
        let abs_diff = (&a - &b)?.abs()?;
        let tol = ((b.abs()? * rtol)? + atol)?;
        // close = (|a - b| finite and <= tol) or a == b (equal infinities),
        // as PyTorch's isclose; the u8 sum is nonzero where either holds.
        let u8_of = |t: Tensor| t.to_dtype_contiguous(DType::U8);
        let within = (u8_of(abs_diff.le(&tol)?)? * u8_of(abs_diff.lt(f64::INFINITY)?)?)?;
        let close = (within + u8_of(eq)?)?;
        all_nonzero(&close)
    }
}

/// Whether every element of a bool tensor is true (an empty tensor: yes).
fn all_true(t: &Tensor) -> Result<bool> {
    all_nonzero(&t.to_dtype_contiguous(DType::U8)?)
}

/// Whether every element of a u8 tensor is nonzero (an empty tensor: yes).
fn all_nonzero(t: &Tensor) -> Result<bool> {
    if t.numel() == 0 {
        return Ok(true);
    }
    Ok(t.min()?.item::<u8>()? != 0)
}

#[cfg(test)]
mod tests {
    use crate::{DType, Device, Tensor};

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()
    }

    #[test]
    fn equal_needs_same_shape_and_values() {
        assert!(t(&[1.0, 2.0]).equal(&t(&[1.0, 2.0])).unwrap());
        assert!(!t(&[1.0, 2.0]).equal(&t(&[1.0, 3.0])).unwrap());
        assert!(!t(&[f32::NAN]).equal(&t(&[f32::NAN])).unwrap());
        let i = Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap();
        assert!(i.equal(&t(&[1.0, 2.0])).unwrap());
        let row = Tensor::from_slice(&[1.0f32, 2.0], &[1, 2], Device::Cpu).unwrap();
        assert!(!row.equal(&t(&[1.0, 2.0])).unwrap());
        assert!(t(&[]).equal(&t(&[])).unwrap());
    }

    #[test]
    fn allclose_matches_the_formula() {
        let a = t(&[1.0, 100.0, f32::INFINITY, 0.0]);
        let b = t(&[1.0 + 1e-6, 100.001, f32::INFINITY, 1e-9]);
        assert!(a.allclose(&b, 1e-5, 1e-8).unwrap());
        assert!(!a.allclose(&b, 1e-9, 1e-12).unwrap());
        assert!(!t(&[f32::NAN]).allclose(&t(&[f32::NAN]), 1.0, 1.0).unwrap());
        assert!(!t(&[f32::INFINITY])
            .allclose(&t(&[f32::NEG_INFINITY]), 1.0, 1.0)
            .unwrap());
        // broadcasting, integers, bad tolerances
        assert!(t(&[2.0, 2.0]).allclose(&t(&[2.0]), 0.0, 0.0).unwrap());
        let i = Tensor::from_slice(&[3i64], &[1], Device::Cpu).unwrap();
        assert!(i.allclose(&i, 0.0, 0.0).unwrap());
        // Different dtypes: an error, as PyTorch's "Long did not match Float".
        assert!(i.allclose(&t(&[3.0]), 0.0, 0.0).is_err());
        assert!(t(&[1.0]).allclose(&t(&[1.0]), -1.0, 0.0).is_err());
        assert!(t(&[1.0, 2.0])
            .allclose(&t(&[1.0, 2.0, 3.0]), 0.0, 0.0)
            .is_err());
        let h = t(&[1.0]).to_dtype_contiguous(DType::BF16).unwrap();
        let h2 = t(&[1.001]).to_dtype_contiguous(DType::BF16).unwrap();
        assert!(h.allclose(&h2, 1e-2, 0.0).unwrap());
    }
}
