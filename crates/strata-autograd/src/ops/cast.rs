//! Copies as recorded ops: dtype conversion, whose gradient is converted
//! back to the input's dtype (autocast's casts go through here, so gradients
//! reach f32 parameters), and `contiguous`, whose gradient passes unchanged.

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};

impl Var {
    /// [`to_dtype`](Var::to_dtype) to `other`'s dtype (`Tensor::type_as`).
    pub fn type_as(&self, other: &Var) -> Result<Var> {
        self.to_dtype(other.dtype())
    }

    /// A copy in `dtype` (the same variable when it already has it), laid
    /// out as PyTorch's `.to(dtype)` lays it out
    /// ([`strata_tensor::Tensor::to_dtype`]: a dense layout is kept); the
    /// gradient flows back converted to this variable's dtype the same way
    /// (`ToCopyBackward`'s `grad.to(dtype)`).
    pub fn to_dtype(&self, dtype: strata_tensor::DType) -> Result<Var> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        let out = self.data().to_dtype(dtype)?;
        let from = self.dtype();
        // Into a leaf the gradient goes unconverted: accumulating it converts
        // it as it adds or copies it into `.grad`, one pass fewer over a
        // parameter-sized tensor (autocast casts every weight).
        let into_leaf = self.is_leaf();
        let f = formula(move |g, _s, _n| {
            Ok(vec![Some(if into_leaf {
                g.clone()
            } else {
                g.to_dtype(from)?
            })])
        });
        record("ToCopyBackward", out, &[Some(self)], Vec::new, f, false)
    }

    /// PyTorch's `contiguous()`: this variable itself when its data is
    /// row-major (no copy, no node: an in-place op on the result is one on
    /// this variable), else a row-major copy recorded as `CloneBackward`,
    /// whose gradient passes back unchanged. Element-wise results are laid
    /// out as PyTorch lays them out (`x.t().add(0.0)` is transposed), so a
    /// reshape of one may copy where a reshape of its contiguous copy is a
    /// view.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2], Device::Cpu)?)?;
    /// let y = x.t()?.contiguous()?;
    /// assert!(y.data().is_contiguous());
    /// assert_eq!(y.data().to_vec::<f32>()?, vec![1.0, 3.0, 2.0, 4.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn contiguous(&self) -> Result<Var> {
        if self.data().is_contiguous() {
            return Ok(self.clone());
        }
        self.clone_contiguous()
    }

    /// [`strata_tensor::Tensor::clone_contiguous`]: a row-major copy, never this variable
    /// itself, recorded as `CloneBackward` (the gradient passes back
    /// unchanged).
    pub fn clone_contiguous(&self) -> Result<Var> {
        let out = self.data().clone_contiguous()?;
        let f = formula(|g, _s, _n| Ok(vec![Some(g.clone())]));
        record("CloneBackward", out, &[Some(self)], Vec::new, f, false)
    }
}
