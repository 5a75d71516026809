//! Sorting ops on [`Var`]s: `sort`, `msort`, `topk`, `kthvalue`,
//! `median`/`nanmedian` along a dim and of every element. The values carry
//! the gradient; the indices are i64 tensors without one.
//!
//! * Along a dim (`sort`, `msort`, `topk`, `kthvalue`, `median_dim`,
//!   `nanmedian_dim`): the indices are saved and the gradient of each value
//!   goes to the element it came from (PyTorch's
//!   `value_selecting_reduction_backward`: a scatter into zeros; every index
//!   of a slice differs, so ties do not share it).
//! * Of every element (`median`, `nanmedian`): the input and the result are
//!   saved and the gradient is split evenly among the elements equal to the
//!   result (among the NaNs when it is NaN), PyTorch's
//!   `evenly_distribute_backward` (as [`Var::max`]'s).

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{DType, Device, Tensor};

/// The gradient of values taken from `shape` at `indices` along `dim`
/// (`indices` and `g` of one shape, `dim` present in both): `g` scattered
/// into zeros of `shape` and `dtype`.
fn scatter_back(
    g: &Tensor,
    indices: &Tensor,
    shape: &[usize],
    dtype: DType,
    dim: i64,
) -> Result<Tensor> {
    if shape.is_empty() {
        return Ok(g.clone());
    }
    let z = Tensor::zeros(shape, dtype, g.device())?;
    // One index per source element and all distinct along the dim: a
    // scatter-add into zeros is a scatter.
    Ok(z.scatter_add(dim, indices, g)?)
}

impl Var {
    /// `torch.sort(self, dim, descending, stable)` ([`Tensor::sort`]:
    /// stable in every case, NaN greater than +inf): the sorted values, with
    /// gradient, and their indices. The indices are saved; the gradient of
    /// each value goes back to the element it came from.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[3.0f32, 1.0, 2.0], &[3], Device::Cpu)?)?;
    /// let (v, i) = x.sort(0, false, false)?;
    /// assert_eq!(i.to_vec::<i64>()?, vec![1, 2, 0]);
    /// let w = Tensor::from_slice(&[1.0f32, 10.0, 100.0], &[3], Device::Cpu)?;
    /// v.mul(&Var::new(w))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![100.0, 1.0, 10.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn sort(&self, dim: i64, descending: bool, stable: bool) -> Result<(Var, Tensor)> {
        let (v, i) = self.data().sort(dim, descending, stable)?;
        let v = self.record_along("SortBackward0", v, &i, dim, true)?;
        Ok((v, i))
    }

    /// `torch.msort(self)`: the values of [`Var::sort`] along dim 0,
    /// ascending, with its gradient.
    pub fn msort(&self) -> Result<Var> {
        Ok(self.sort(0, false, false)?.0)
    }

    /// `torch.topk(self, k, dim, largest, sorted)` ([`Tensor::topk`]; among
    /// equal elements the first in input order are taken, where PyTorch
    /// leaves the choice unspecified): the values, with gradient, and their
    /// indices. The indices are saved; the gradient of each value goes back
    /// to the element it came from.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[1.0f32, 5.0, 3.0, 0.0], &[4], Device::Cpu)?)?;
    /// let (v, i) = x.topk(2, 0, true, true)?;
    /// assert_eq!(i.to_vec::<i64>()?, vec![1, 2]);
    /// v.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.0, 1.0, 1.0, 0.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn topk(&self, k: usize, dim: i64, largest: bool, sorted: bool) -> Result<(Var, Tensor)> {
        let (v, i) = self.data().topk(k, dim, largest, sorted)?;
        let v = self.record_along("TopkBackward0", v, &i, dim, true)?;
        Ok((v, i))
    }

    /// `torch.kthvalue(self, k, dim, keepdim)` ([`Tensor::kthvalue`]): the
    /// `k`-th smallest values, with gradient, and their indices. The indices
    /// are saved; the gradient goes to the returned index only.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[4.0f32, 1.0, 3.0, 2.0], &[2, 2], Device::Cpu)?)?;
    /// let (v, _) = x.kthvalue(2, 1, false)?;
    /// assert_eq!(v.data().to_vec::<f32>()?, vec![4.0, 3.0]);
    /// v.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![1.0, 0.0, 1.0, 0.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn kthvalue(&self, k: usize, dim: i64, keepdim: bool) -> Result<(Var, Tensor)> {
        let (v, i) = self.data().kthvalue(k, dim, keepdim)?;
        let v = self.record_along("KthvalueBackward0", v, &i, dim, keepdim)?;
        Ok((v, i))
    }

    /// `torch.median(self, dim, keepdim)` ([`Tensor::median_dim`]: the lower
    /// median, NaN and the first NaN's index where a slice holds one): the
    /// values, with gradient, and their indices. The indices are saved; the
    /// gradient goes to the returned index only.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[4.0f32, 1.0, 3.0, 2.0], &[4], Device::Cpu)?)?;
    /// let (m, i) = x.median_dim(0, false)?;
    /// assert_eq!((m.data().to_vec::<f32>()?, i.to_vec::<i64>()?), (vec![2.0], vec![3]));
    /// m.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.0, 0.0, 0.0, 1.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn median_dim(&self, dim: i64, keepdim: bool) -> Result<(Var, Tensor)> {
        let (v, i) = self.data().median_dim(dim, keepdim)?;
        let v = self.record_along("MedianBackward1", v, &i, dim, keepdim)?;
        Ok((v, i))
    }

    /// `torch.nanmedian(self, dim, keepdim)` ([`Tensor::nanmedian_dim`]),
    /// with [`Var::median_dim`]'s gradient.
    pub fn nanmedian_dim(&self, dim: i64, keepdim: bool) -> Result<(Var, Tensor)> {
        let (v, i) = self.data().nanmedian_dim(dim, keepdim)?;
        let v = self.record_along("NanmedianBackward1", v, &i, dim, keepdim)?;
        Ok((v, i))
    }

    /// `torch.median(self)`: the lower median of every element as a 0-d
    /// variable (NaN when any element is NaN; NaN for an empty input). The
    /// input and the result are saved; the gradient is split evenly among
    /// the elements equal to the result (the NaNs when it is NaN; -0.0 and
    /// 0.0 are equal), PyTorch's `evenly_distribute_backward`: exactly 0
    /// elsewhere on the CPU, `mask * (g / count)` on a GPU.
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{Device, Tensor};
    /// let x = Var::parameter(Tensor::from_slice(&[2.0f32, 1.0, 2.0, 5.0], &[4], Device::Cpu)?)?;
    /// let m = x.median()?;
    /// assert_eq!(m.data().to_vec::<f32>()?, vec![2.0]);
    /// m.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![0.5, 0.0, 0.5, 0.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn median(&self) -> Result<Var> {
        let out = self.data().median()?;
        self.record_even("MedianBackward0", out)
    }

    /// `torch.nanmedian(self)`: [`Var::median`] ignoring NaNs, with its
    /// gradient rule.
    pub fn nanmedian(&self) -> Result<Var> {
        let out = self.data().nanmedian()?;
        self.record_even("NanmedianBackward0", out)
    }

    /// Records values `v` taken from `self` at `indices` along `dim` (kept
    /// in `v` and `indices` when `kept`, else removed from both).
    fn record_along(
        &self,
        name: &'static str,
        v: Tensor,
        indices: &Tensor,
        dim: i64,
        kept: bool,
    ) -> Result<Var> {
        let shape = self.shape().to_vec();
        let dtype = self.dtype();
        let idx = indices.clone();
        let saved = move || vec![idx];
        let f = formula(move |g, s, _n| {
            if shape.is_empty() {
                return Ok(vec![Some(g.clone())]);
            }
            let (i, g) = if kept {
                (s[0].clone(), g.clone())
            } else {
                (s[0].unsqueeze(dim)?, g.unsqueeze(dim)?)
            };
            Ok(vec![Some(scatter_back(&g, &i, &shape, dtype, dim)?)])
        });
        record(name, v, &[Some(self)], saved, f, false)
    }

    /// Records the 0-d `out` (a value of `self`) with the gradient split
    /// evenly among the elements equal to it.
    fn record_even(&self, name: &'static str, out: Tensor) -> Result<Var> {
        let (input, result) = (self.data().clone(), out.clone());
        let saved = move || vec![input, result];
        let f = formula(move |g, s, _n| {
            let (x, r) = (&s[0], &s[1]);
            // isnan(x) when the result is NaN, x == result otherwise.
            let mask = Tensor::where_cond(&r.ne(r)?, &x.ne(x)?, &x.eq(r)?)?;
            let share = g.div(&mask.sum(None, false)?)?;
            Ok(vec![Some(if x.device() == Device::Cpu {
                Tensor::where_cond(&mask, &share, 0.0)?
            } else {
                share.mul(&mask)?
            })])
        });
        record(name, out, &[Some(self)], saved, f, false)
    }
}
