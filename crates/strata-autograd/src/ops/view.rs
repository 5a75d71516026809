//! View ops: the result shares the input's storage; the gradient is mapped
//! back to the input's shape (transposed back, reshaped back, scattered into
//! zeros for `narrow`, summed over expanded dims for `expand`).

use super::{formula, sum_to};
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::Tensor;

fn dims_of(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&x| x as i64).collect()
}

impl Var {
    /// Swaps two dims (a view).
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Var> {
        let out = self.data().transpose(d0, d1)?;
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.transpose(d0, d1)?)]));
        record("TransposeBackward", out, &[Some(self)], Vec::new, f, true)
    }

    /// Transpose of a 2-D variable (0-d and 1-D unchanged).
    pub fn t(&self) -> Result<Var> {
        if self.ndim() < 2 {
            let out = self.data().t()?;
            let f = formula(|g, _s, _n| Ok(vec![Some(g.clone())]));
            return record("TBackward", out, &[Some(self)], Vec::new, f, true);
        }
        self.transpose(0, 1)
    }

    /// Another shape with the same elements (one `-1` is inferred): a view
    /// where the strides allow, else a copy (as in PyTorch).
    pub fn reshape(&self, shape: &[i64]) -> Result<Var> {
        let out = self.data().reshape(shape)?;
        let is_view = out.same_storage(self.data());
        self.reshaped(out, "ReshapeBackward", is_view)
    }

    /// A view with another shape; fails where the strides do not allow one.
    pub fn view(&self, shape: &[i64]) -> Result<Var> {
        let out = self.data().view(shape)?;
        self.reshaped(out, "ViewBackward", true)
    }

    /// Inserts a size-1 dim at `dim` (a view).
    pub fn unsqueeze(&self, dim: i64) -> Result<Var> {
        let out = self.data().unsqueeze(dim)?;
        self.reshaped(out, "UnsqueezeBackward", true)
    }

    /// Removes the listed dims where their size is 1 (a view).
    pub fn squeeze_dims(&self, dims: &[i64]) -> Result<Var> {
        let out = self.data().squeeze_dims(dims)?;
        self.reshaped(out, "SqueezeBackward", true)
    }

    /// Merges dims `start..=end` into one (a view when possible).
    pub fn flatten(&self, start: i64, end: i64) -> Result<Var> {
        let out = self.data().flatten(start, end)?;
        let is_view = out.same_storage(self.data());
        self.reshaped(out, "FlattenBackward", is_view)
    }

    fn reshaped(&self, out: Tensor, name: &'static str, is_view: bool) -> Result<Var> {
        let shape = dims_of(self.shape());
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.reshape(&shape)?)]));
        record(name, out, &[Some(self)], Vec::new, f, is_view)
    }

    /// `length` elements of `dim` from `start` (a view); the gradient is
    /// zero outside the window.
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Var> {
        let out = self.data().narrow(dim, start, length)?;
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        let f = formula(move |g, _s, _n| {
            let full = Tensor::zeros(&shape, dtype, g.device())?;
            full.narrow(dim, start, length)?.copy_(g)?;
            Ok(vec![Some(full)])
        });
        record("NarrowBackward", out, &[Some(self)], Vec::new, f, true)
    }

    /// Broadcast view (`-1` keeps a size); the gradient is summed over the
    /// expanded dims.
    pub fn expand(&self, shape: &[i64]) -> Result<Var> {
        let out = self.data().expand(shape)?;
        let (in_shape, dtype) = (self.shape().to_vec(), self.dtype());
        let f = formula(move |g, _s, _n| Ok(vec![Some(sum_to(g, &in_shape, dtype)?)]));
        record("ExpandBackward", out, &[Some(self)], Vec::new, f, true)
    }

    /// Reorders the dims (a view).
    pub fn permute(&self, dims: &[i64]) -> Result<Var> {
        let out = self.data().permute(dims)?;
        let nd = self.ndim() as i64;
        let mut inverse = vec![0i64; dims.len()];
        for (i, &d) in dims.iter().enumerate() {
            let d = if d < 0 { d + nd } else { d };
            inverse[d as usize] = i as i64;
        }
        let f = formula(move |g, _s, _n| Ok(vec![Some(g.permute(&inverse)?)]));
        record("PermuteBackward", out, &[Some(self)], Vec::new, f, true)
    }
}
