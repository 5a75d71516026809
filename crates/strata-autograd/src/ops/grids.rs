//! Session 78: `diff`, `meshgrid` and `cartesian_prod` on variables,
//! recorded as PyTorch 2.15 records them (all three are composite there):
//! `diff` as `cat` (of `prepend`, self and `append`), then `n` times the
//! difference of two `narrow` views; `meshgrid` as a `reshape` and an
//! `expand` of each input (views); `cartesian_prod` as `meshgrid`, each grid
//! flattened, and `stack`. Their gradients are those ops' (a grid's
//! gradient summed over the dims it was expanded along).

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::{Tensor, TensorError};

impl Var {
    /// `torch.diff(self, n, dim, prepend, append)` ([`Tensor::diff`]): the
    /// `n`-th forward difference along `dim` after `prepend` and `append`
    /// are joined to self, recorded as PyTorch's composition, so self,
    /// `prepend` and `append` all get gradients. `n = 0` gives a recorded
    /// copy of self (the gradient passes), as PyTorch's. An integer or bool
    /// result (every operand integer or bool) records nothing.
    ///
    /// Errors: those of [`Tensor::diff`] (a 0-d input, a negative `n`,
    /// `dim` out of range, a `prepend`/`append` of another rank or other
    /// sizes off `dim`).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1.0, 4.0, 9.0, 16.0]?)?;
    /// let d = x.diff(2, 0, None, None)?;
    /// assert_eq!(d.to_vec::<f32>()?, vec![2.0, 2.0]);
    /// d.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![1.0, -1.0, -1.0, 1.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn diff(
        &self,
        n: i64,
        dim: i64,
        prepend: Option<&Var>,
        append: Option<&Var>,
    ) -> Result<Var> {
        let parts: Vec<&Var> = prepend.into_iter().chain([self]).chain(append).collect();
        if parts.iter().all(|v| !v.dtype().is_float()) {
            // Nothing to differentiate (bool's difference is a xor).
            let out = self
                .data()
                .diff(n, dim, prepend.map(Var::data), append.map(Var::data))?;
            let inputs: Vec<Option<&Var>> = parts.iter().map(|v| Some(*v)).collect();
            let none = formula(|_, _, n| Ok(vec![None; n.len()]));
            return record("DiffBackward", out, &inputs, Vec::new, none, false);
        }
        check_diff(self, n, dim, prepend, append)?;
        if n == 0 {
            // PyTorch: `zeros_like(self).copy_(self)`, ignoring the others.
            let out = self.data().deep_clone()?;
            let pass = formula(|g, _, _| Ok(vec![Some(g.clone())]));
            return record("CloneBackward", out, &[Some(self)], Vec::new, pass, false);
        }
        let x = if parts.len() > 1 {
            Var::cat(&parts, dim)?
        } else {
            self.clone()
        };
        let d = strata_tensor::shape::normalize_dim("diff", dim, x.ndim())? as i64;
        let len = x.shape()[d as usize] as i64;
        let mut out = x;
        let mut out_len = len - 1;
        for _ in 0..n.min(len) {
            let hi = out.narrow(d, 1, out_len)?;
            let lo = out.narrow(d, 0, out_len)?;
            out = hi.sub(&lo)?;
            out_len -= 1;
        }
        Ok(out)
    }

    /// `torch.meshgrid(*tensors, indexing)` ([`Tensor::meshgrid`]): grid
    /// `i` is input `i` (0-d or 1-D) viewed along dim `i` and expanded over
    /// the others (`"xy"` swaps the first two dims), recorded as those
    /// views, so each input's gradient is its grid's gradient summed over
    /// the dims it was expanded along.
    ///
    /// Errors: those of [`Tensor::meshgrid`] (no tensors, an indexing other
    /// than "ij" or "xy", different dtypes or devices, a tensor of 2 dims
    /// or more).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1.0, 2.0, 3.0]?)?;
    /// let y = Var::parameter(tensor![4.0, 5.0]?)?;
    /// let g = Var::meshgrid(&[&x, &y], "ij")?;
    /// assert_eq!(g[0].shape(), &[3, 2]);
    /// g[0].mul(&g[1])?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, vec![9.0, 9.0, 9.0]);
    /// assert_eq!(y.grad().unwrap().to_vec::<f32>()?, vec![6.0, 6.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn meshgrid(tensors: &[&Var], indexing: &str) -> Result<Vec<Var>> {
        // The tensor form's checks and errors (views: nothing is copied).
        let data: Vec<&Tensor> = tensors.iter().map(|v| v.data()).collect();
        Tensor::meshgrid(&data, indexing)?;
        let mut refs: Vec<&Var> = tensors.to_vec();
        let swap = indexing == "xy" && refs.len() >= 2;
        if swap {
            refs.swap(0, 1);
        }
        let shape: Vec<i64> = refs.iter().map(|t| t.numel() as i64).collect();
        let mut grids = Vec::with_capacity(refs.len());
        let mut view = vec![1i64; refs.len()];
        for (i, t) in refs.iter().enumerate() {
            view[i] = -1;
            grids.push(t.reshape(&view)?.expand(&shape)?);
            view[i] = 1;
        }
        if swap {
            grids.swap(0, 1);
        }
        Ok(grids)
    }

    /// `torch.cartesian_prod(*tensors)` ([`Tensor::cartesian_prod`]): every
    /// combination of one element of each 1-D input, as the rows of a
    /// `[n_1 * .. * n_k, k]` variable, recorded as PyTorch's composition
    /// (`meshgrid`, each grid flattened, `stack` along dim 1); a single
    /// input is returned itself, as PyTorch returns it.
    ///
    /// Errors: an input that is not 1-D ([`TensorError::Shape`]), and those
    /// of [`Var::meshgrid`].
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let a = Var::parameter(tensor![1.0, 2.0]?)?;
    /// let b = Var::parameter(tensor![3.0, 4.0, 5.0]?)?;
    /// let p = Var::cartesian_prod(&[&a, &b])?;
    /// assert_eq!(p.shape(), &[6, 2]);
    /// p.sum(None, false)?.backward()?;
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>()?, vec![3.0, 3.0]);
    /// assert_eq!(b.grad().unwrap().to_vec::<f32>()?, vec![2.0, 2.0, 2.0]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn cartesian_prod(tensors: &[&Var]) -> Result<Var> {
        for t in tensors {
            if t.ndim() != 1 {
                return Err(TensorError::Shape {
                    op: "cartesian_prod",
                    msg: format!("expected 1-D tensors, got one of shape {:?}", t.shape()),
                }
                .into());
            }
        }
        if let [one] = tensors {
            return Ok((*one).clone());
        }
        let grids = Var::meshgrid(tensors, "ij")?;
        let flat = grids
            .iter()
            .map(|g| g.reshape(&[-1]))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Var> = flat.iter().collect();
        Var::stack(&refs, 1)
    }
}

/// [`Tensor::diff`]'s checks, with its errors.
fn check_diff(
    x: &Var,
    n: i64,
    dim: i64,
    prepend: Option<&Var>,
    append: Option<&Var>,
) -> Result<()> {
    const OP: &str = "diff";
    if x.ndim() == 0 {
        return Err(TensorError::Shape {
            op: OP,
            msg: "expects an input of at least one dimension, got a 0-d tensor".into(),
        }
        .into());
    }
    if n < 0 {
        return Err(TensorError::Value {
            op: OP,
            msg: format!("the order must be non-negative, got {n}"),
        }
        .into());
    }
    for other in [prepend, append].into_iter().flatten() {
        let d = strata_tensor::shape::normalize_dim(OP, dim, x.ndim())?;
        if other.ndim() != x.ndim() {
            return Err(TensorError::Shape {
                op: OP,
                msg: format!(
                    "prepend or append must have the input's rank {}, got shape {:?}",
                    x.ndim(),
                    other.shape()
                ),
            }
            .into());
        }
        if let Some(i) = (0..x.ndim()).find(|&i| i != d && other.shape()[i] != x.shape()[i]) {
            return Err(TensorError::Shape {
                op: OP,
                msg: format!(
                    "prepend or append must match the input's sizes except along dim {d}: \
                     input size({i}) = {}, got {}",
                    x.shape()[i],
                    other.shape()[i]
                ),
            }
            .into());
        }
        if other.device() != x.device() {
            // The tensor form's device error.
            x.data().diff(0, dim, Some(other.data()), None)?;
        }
    }
    Ok(())
}
