//! View ops: the result shares the input's storage; the gradient is mapped
//! back to the input's shape (transposed back, reshaped back, scattered into
//! zeros for `narrow`, `select`, `slice` and `i`, summed over expanded dims for `expand`; see
//! [`ViewStep`]). A view remembers its base, so that a recorded in-place op
//! on it rebases the base's history (see `ops::copy_slices`).

use super::copy_slices::{ViewStep, Window};
use crate::error::Result;
use crate::var::{record_view, Var};
use strata_tensor::{DType, SliceItem, Tensor};

fn dims_of(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&x| x as i64).collect()
}

impl Var {
    /// Swaps two dims (a view).
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Var> {
        let out = self.data().transpose(d0, d1)?;
        let step = ViewStep::Transpose(d0, d1);
        record_view("TransposeBackward", out, self, step, true)
    }

    /// Transpose of a 2-D variable (0-d and 1-D unchanged; more dims are
    /// refused, as PyTorch's `t()` and [`Tensor::t`] refuse them, rather
    /// than silently swapping the first two).
    pub fn t(&self) -> Result<Var> {
        // Validates the rank (a typed error for 3 dims or more).
        let out = self.data().t()?;
        if self.ndim() < 2 {
            return record_view("TBackward", out, self, ViewStep::Identity, true);
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

    /// Merges dims `start..=end` into one (a view when possible). As in
    /// PyTorch, `start == end` (after wrapping negative dims) on a tensor
    /// of at least one dim returns this variable itself, not a view of it:
    /// taken in no_grad mode it still requires grad, and an in-place op on
    /// it is one on this variable.
    pub fn flatten(&self, start: i64, end: i64) -> Result<Var> {
        // The tensor op validates the dims; by then they are in range.
        let out = self.data().flatten(start, end)?;
        let nd = self.ndim() as i64;
        let wrap = |d: i64| if d < 0 { d + nd } else { d };
        if nd > 0 && wrap(start) == wrap(end) {
            return Ok(self.clone());
        }
        let is_view = out.same_storage(self.data());
        self.reshaped(out, "FlattenBackward", is_view)
    }

    fn reshaped(&self, out: Tensor, name: &'static str, is_view: bool) -> Result<Var> {
        let step = ViewStep::Reshape(dims_of(self.shape()));
        record_view(name, out, self, step, is_view)
    }

    /// `length` elements of `dim` from `start` (a view); the gradient is
    /// zero outside the window.
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Var> {
        let out = self.data().narrow(dim, start, length)?;
        let step = ViewStep::Narrow {
            dim,
            start,
            length,
            shape: self.shape().to_vec(),
            dtype: self.dtype(),
        };
        record_view("NarrowBackward", out, self, step, true)
    }

    /// Index `index` of `dim` (a view without that dim, as
    /// [`Tensor::select`] and PyTorch's `x.select(dim, index)`); the
    /// gradient is zero outside that slice.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![[1., 2.], [3., 4.]]?)?;
    /// x.select(1, -1)?.mul(&Var::new(tensor![10., 100.]?))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0., 10., 0., 100.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn select(&self, dim: i64, index: i64) -> Result<Var> {
        let out = self.data().select(dim, index)?;
        self.windowed(out, "SelectBackward", Window::Select(dim, index))
    }

    /// Every `step`-th index of `dim` from `start` to before `end` (a view,
    /// Python's slice rules, as [`Tensor::slice`]); the gradient is zero
    /// outside the slice.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2., 3., 4., 5.]?)?;
    /// x.slice(0, Some(1), None, 2)?.sum(None, false)?.backward()?; // x[1::2]
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0., 1., 0., 1., 0.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn slice(&self, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Var> {
        let out = self.data().slice(dim, start, end, step)?;
        self.windowed(out, "SliceBackward", Window::Slice(dim, start, end, step))
    }

    /// Basic indexing with a slice list (a view, as [`Tensor::i`] and
    /// PyTorch's `x[1, ::2]`; build the list with `strata_tensor::s!`); the
    /// gradient is zero outside the window.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{s, tensor};
    /// let x = Var::parameter(tensor![[1., 2., 3.], [4., 5., 6.]]?)?;
    /// x.i(s![-1, ..;2])?.sum(None, false)?.backward()?; // x[-1, ::2]
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0., 0., 0., 1., 0., 1.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn i(&self, items: impl AsRef<[SliceItem]>) -> Result<Var> {
        let items = items.as_ref().to_vec();
        let out = self.data().i(&items)?;
        self.windowed(out, "IndexBackward", Window::Items(items))
    }

    /// The slices along `dim`, each without that dim (views, as
    /// [`Tensor::unbind`] and PyTorch's `q, k, v = qkv.unbind(0)`): each
    /// a [`Var::select`], so the slices' gradients add up in the input's.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![[1., 2.], [3., 4.]]?)?;
    /// let rows = x.unbind(0)?;
    /// rows[1].mul(&rows[0])?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [3., 4., 1., 2.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn unbind(&self, dim: i64) -> Result<Vec<Var>> {
        // The tensor op's checks (and errors), then one recorded select per
        // slice.
        let n = self.data().unbind(dim)?.len();
        (0..n as i64).map(|i| self.select(dim, i)).collect()
    }

    fn windowed(&self, out: Tensor, name: &'static str, window: Window) -> Result<Var> {
        let step = ViewStep::Window {
            window,
            shape: self.shape().to_vec(),
            dtype: self.dtype(),
        };
        record_view(name, out, self, step, true)
    }

    /// The windows of `size` elements every `step` along `dim` (a view, as
    /// [`Tensor::unfold`] and PyTorch's `x.unfold(dim, size, step)`); the
    /// gradient adds each window's back where it was taken, so overlapping
    /// windows accumulate.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2., 3., 4., 5.]?)?;
    /// x.unfold(0, 3, 1)?.sum(None, false)?.backward()?; // windows [1 2 3] [2 3 4] [3 4 5]
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [1., 2., 3., 2., 1.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn unfold(&self, dim: i64, size: i64, step: i64) -> Result<Var> {
        let out = self.data().unfold(dim, size, step)?;
        let step = ViewStep::Unfold {
            dim,
            size,
            step,
            shape: self.shape().to_vec(),
            dtype: self.dtype(),
        };
        record_view("UnfoldBackward", out, self, step, true)
    }

    /// [`expand`](Var::expand) to `other`'s shape (`Tensor::expand_as`).
    pub fn expand_as(&self, other: &Var) -> Result<Var> {
        self.expand(&strata_tensor::shape::as_i64(other.shape()))
    }

    /// [`view`](Var::view) to `other`'s shape (`Tensor::view_as`).
    pub fn view_as(&self, other: &Var) -> Result<Var> {
        self.view(&strata_tensor::shape::as_i64(other.shape()))
    }

    /// [`reshape`](Var::reshape) to `other`'s shape (`Tensor::reshape_as`).
    pub fn reshape_as(&self, other: &Var) -> Result<Var> {
        self.reshape(&strata_tensor::shape::as_i64(other.shape()))
    }

    /// Broadcast view (`-1` keeps a size); the gradient is summed over the
    /// expanded dims.
    pub fn expand(&self, shape: &[i64]) -> Result<Var> {
        let out = self.data().expand(shape)?;
        let step = ViewStep::Expand {
            shape: self.shape().to_vec(),
            dtype: self.dtype(),
        };
        record_view("ExpandBackward", out, self, step, true)
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
        record_view(
            "PermuteBackward",
            out,
            self,
            ViewStep::Permute(inverse),
            true,
        )
    }
}

/// The gradient of `unfold(dim, size, step)` of an input of `shape` from
/// `g`, its output's (PyTorch's `unfold_backward`): the windows added back
/// into zeros, by window offset (`size` strided adds) or by window
/// (one add per window), whichever is fewer.
pub(crate) fn unfold_backward(
    g: &Tensor,
    dim: i64,
    size: i64,
    step: i64,
    shape: &[usize],
    dtype: DType,
) -> Result<Tensor> {
    let full = Tensor::zeros(shape, dtype, g.device())?;
    if shape.is_empty() {
        // A 0-d input has one window of `size` (0 or 1) elements.
        if size == 1 {
            full.add_(&g.reshape(&[])?)?;
        }
        return Ok(full);
    }
    let d = if dim < 0 {
        dim + shape.len() as i64
    } else {
        dim
    };
    let last = g.ndim() as i64 - 1;
    let windows = g.shape()[d as usize] as i64;
    if windows == 0 || size == 0 {
        return Ok(full);
    }
    if size <= windows {
        for j in 0..size {
            let span = j + (windows - 1) * step + 1;
            full.slice(d, Some(j), Some(span), step)?
                .add_(&g.select(last, j)?)?;
        }
    } else {
        for w in 0..windows {
            // Window `w` without `dim`, its elements last: moved to `dim`.
            let win = g
                .select(d, w)?
                .unsqueeze(d)?
                .transpose(d, -1)?
                .squeeze_dims(&[-1])?;
            full.narrow(d, w * step, size)?.add_(&win)?;
        }
    }
    Ok(full)
}
