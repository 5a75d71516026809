//! Session 79: the recorded forms of strata-tensor's `shape_join` ops.
//! Most are compositions of recorded views, joins and gathers, so their
//! gradients are those ops' (PyTorch's composite definitions: `rot90` a
//! flip and a transpose, the stacks `cat`, `tensor_split` slices,
//! `take_along_dim` an expanded `gather`, `vander` a `cumprod`); three are
//! recorded ops of their own with `derivatives.yaml`'s formulas:
//! `block_diag` (each input's block of the gradient), and the scatters
//! (`select_scatter`: the input's gradient is `g` with the slice zeroed,
//! `src`'s the slice of `g`; likewise `slice_scatter` and
//! `diagonal_scatter`).

use super::formula;
use crate::error::Result;
use crate::var::{record, Var};
use strata_tensor::shape_join::{
    atleast_1d_of, atleast_2d_of, atleast_3d_of, block_of, channel_shuffle_of, column_stack_of,
    directional_split, dstack_of, hstack_of, rot90_of, tensor_split_of, unflatten_shape, vander_of,
    vstack_of,
};
use strata_tensor::{Tensor, TensorSplit};

/// How a scatter op's slice is taken, for its gradients.
#[derive(Clone)]
enum Part {
    Select(i64, i64),
    Slice(i64, Option<i64>, Option<i64>, i64),
    Diagonal(i64, i64, i64),
}

impl Part {
    fn of(&self, t: &Tensor) -> strata_tensor::Result<Tensor> {
        match *self {
            Part::Select(d, i) => t.select(d, i),
            Part::Slice(d, s, e, k) => t.slice(d, s, e, k),
            Part::Diagonal(o, d1, d2) => t.diagonal(o, d1, d2),
        }
    }

    fn scatter(&self, t: &Tensor, src: &Tensor) -> strata_tensor::Result<Tensor> {
        match *self {
            Part::Select(d, i) => t.select_scatter(src, d, i),
            Part::Slice(d, s, e, k) => t.slice_scatter(src, d, s, e, k),
            Part::Diagonal(o, d1, d2) => t.diagonal_scatter(src, o, d1, d2),
        }
    }
}

impl Var {
    /// [`Tensor::rot90`] (a flip and a transposed view; gradient through
    /// both).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![[1., 2.], [3., 4.]]?)?;
    /// let w = Var::new(tensor![[1., 10.], [100., 1000.]]?);
    /// x.rot90(1, &[0, 1])?.mul(&w)?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [100., 1., 1000., 10.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn rot90(&self, k: i64, dims: &[i64]) -> Result<Var> {
        // `k % 4 == 0` copies, recorded as `CloneBackward`.
        rot90_of(self, k, dims)
    }

    /// [`Tensor::block_diag`] (each input's gradient is its block of the
    /// upstream gradient, in the input's dtype).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let a = Var::parameter(tensor![[1., 2.]]?)?;
    /// let b = Var::parameter(tensor![3.]?)?;
    /// let w = Var::new(tensor![[1., 2., 3.], [4., 5., 6.]]?);
    /// Var::block_diag(&[&a, &b])?.mul(&w)?.sum(None, false)?.backward()?;
    /// assert_eq!(a.grad().unwrap().to_vec::<f32>()?, [1., 2.]);
    /// assert_eq!(b.grad().unwrap().to_vec::<f32>()?, [6.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn block_diag(vars: &[&Var]) -> Result<Var> {
        let data: Vec<&Tensor> = vars.iter().map(|v| v.data()).collect();
        let out = Tensor::block_diag(&data)?;
        let metas: Vec<_> = {
            let (mut r0, mut c0) = (0i64, 0i64);
            vars.iter()
                .map(|v| {
                    let (r, c) = block_of(v.data());
                    let m = (r0, c0, r as i64, c as i64, v.shape().to_vec(), v.dtype());
                    r0 += r as i64;
                    c0 += c as i64;
                    m
                })
                .collect()
        };
        let inputs: Vec<Option<&Var>> = vars.iter().map(|v| Some(*v)).collect();
        let f = formula(move |g, _s, needs| {
            metas
                .iter()
                .zip(needs)
                .map(|((r0, c0, r, c, shape, dtype), &need)| {
                    if !need {
                        return Ok(None);
                    }
                    let shape: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
                    let block = g.narrow(0, *r0, *r)?.narrow(1, *c0, *c)?;
                    Ok(Some(block.reshape(&shape)?.to_dtype(*dtype)?))
                })
                .collect()
        });
        record("BlockDiagBackward", out, &inputs, Vec::new, f, false)
    }

    /// [`Tensor::unflatten`] (a reshape).
    pub fn unflatten(&self, dim: i64, sizes: &[i64]) -> Result<Var> {
        self.reshape(&unflatten_shape(self.shape(), dim, sizes)?)
    }

    /// [`Tensor::atleast_1d`].
    pub fn atleast_1d(&self) -> Result<Var> {
        atleast_1d_of(self)
    }

    /// [`Tensor::atleast_2d`].
    pub fn atleast_2d(&self) -> Result<Var> {
        atleast_2d_of(self)
    }

    /// [`Tensor::atleast_3d`].
    pub fn atleast_3d(&self) -> Result<Var> {
        atleast_3d_of(self)
    }

    /// [`Tensor::hstack`] (a `cat`).
    pub fn hstack(vars: &[&Var]) -> Result<Var> {
        hstack_of(vars)
    }

    /// [`Tensor::vstack`] (a `cat`).
    pub fn vstack(vars: &[&Var]) -> Result<Var> {
        vstack_of(vars)
    }

    /// [`Tensor::row_stack`], an alias of [`Var::vstack`].
    pub fn row_stack(vars: &[&Var]) -> Result<Var> {
        Var::vstack(vars)
    }

    /// [`Tensor::dstack`] (a `cat`).
    pub fn dstack(vars: &[&Var]) -> Result<Var> {
        dstack_of(vars)
    }

    /// [`Tensor::column_stack`] (a `cat`).
    pub fn column_stack(vars: &[&Var]) -> Result<Var> {
        column_stack_of(vars)
    }

    /// [`Tensor::tensor_split`] (slices).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![1., 2., 3.]?)?;
    /// let p = x.tensor_split(2, 0)?;
    /// p[1].mul(&Var::new(tensor![5.]?))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0., 0., 5.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn tensor_split(&self, how: impl Into<TensorSplit>, dim: i64) -> Result<Vec<Var>> {
        tensor_split_of(self, &how.into(), dim)
    }

    /// [`Tensor::hsplit`] (slices).
    pub fn hsplit(&self, how: impl Into<TensorSplit>) -> Result<Vec<Var>> {
        let (d, how) = directional_split("hsplit", self.shape(), &how.into())?;
        self.tensor_split(how, d)
    }

    /// [`Tensor::vsplit`] (slices).
    pub fn vsplit(&self, how: impl Into<TensorSplit>) -> Result<Vec<Var>> {
        let (d, how) = directional_split("vsplit", self.shape(), &how.into())?;
        self.tensor_split(how, d)
    }

    /// [`Tensor::dsplit`] (slices).
    pub fn dsplit(&self, how: impl Into<TensorSplit>) -> Result<Vec<Var>> {
        let (d, how) = directional_split("dsplit", self.shape(), &how.into())?;
        self.tensor_split(how, d)
    }

    /// [`Tensor::take_along_dim`] (an expanded `gather`: the gradient is
    /// scatter-added at the indices and summed over the broadcast).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![[1., 2.], [3., 4.]]?)?;
    /// x.take_along_dim(&tensor![[1i64, 1]]?, Some(1))?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0., 2., 0., 2.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn take_along_dim(&self, indices: &Tensor, dim: Option<i64>) -> Result<Var> {
        strata_tensor::shape_join::take_along_dim_of(self, indices, dim)
    }

    /// [`Tensor::channel_shuffle`] (a reshape, a transpose and a copy).
    pub fn channel_shuffle(&self, groups: i64) -> Result<Var> {
        channel_shuffle_of(self, groups)
    }

    /// [`Tensor::vander`] (a `cumprod` of the repeated column, so its
    /// gradient is `cumprod`'s).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::{tensor, DType};
    /// let x = Var::parameter(tensor![2., 3.]?.to_dtype(DType::F64)?)?;
    /// x.vander(Some(3), true)?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f64>()?, [5., 7.]); // 1 + 2x
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn vander(&self, n: Option<i64>, increasing: bool) -> Result<Var> {
        vander_of(self, n, increasing)
    }

    /// [`Tensor::swapaxes`], an alias of [`Var::transpose`].
    pub fn swapaxes(&self, d0: i64, d1: i64) -> Result<Var> {
        self.transpose(d0, d1)
    }

    /// [`Tensor::swapdims`], an alias of [`Var::transpose`].
    pub fn swapdims(&self, d0: i64, d1: i64) -> Result<Var> {
        self.transpose(d0, d1)
    }

    /// [`Tensor::moveaxis`], an alias of [`Var::movedim`].
    pub fn moveaxis(&self, source: &[i64], destination: &[i64]) -> Result<Var> {
        self.movedim(source, destination)
    }

    /// [`Tensor::ravel`].
    pub fn ravel(&self) -> Result<Var> {
        self.contiguous()?.reshape(&[-1])
    }

    /// [`Tensor::narrow_copy`] (the gradient is `g` in the narrowed part,
    /// zero elsewhere).
    pub fn narrow_copy(&self, dim: i64, start: i64, length: i64) -> Result<Var> {
        let part = self.narrow(dim, start, length)?;
        let out = part.data().clone_contiguous()?;
        let f = formula(|g, _s, _n| Ok(vec![Some(g.clone())]));
        record(
            "NarrowCopyBackward",
            out,
            &[Some(&part)],
            Vec::new,
            f,
            false,
        )
    }

    /// [`Tensor::select_scatter`] (gradients: `g` with the slice zeroed for
    /// `self`, the slice of `g` for `src`).
    ///
    /// ```
    /// use strata_autograd::Var;
    /// use strata_tensor::tensor;
    /// let x = Var::parameter(tensor![[1., 2.], [3., 4.]]?)?;
    /// let s = Var::parameter(tensor![5., 6.]?)?;
    /// let w = Var::new(tensor![[1., 2.], [3., 4.]]?);
    /// x.select_scatter(&s, 0, 0)?.mul(&w)?.sum(None, false)?.backward()?;
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0., 0., 3., 4.]);
    /// assert_eq!(s.grad().unwrap().to_vec::<f32>()?, [1., 2.]);
    /// # Ok::<(), strata_autograd::AutogradError>(())
    /// ```
    pub fn select_scatter(&self, src: &Var, dim: i64, index: i64) -> Result<Var> {
        let out = self.data().select_scatter(src.data(), dim, index)?;
        scattered(
            "SelectScatterBackward",
            out,
            self,
            src,
            Part::Select(dim, index),
        )
    }

    /// [`Tensor::slice_scatter`] (gradients as [`Var::select_scatter`]'s).
    pub fn slice_scatter(
        &self,
        src: &Var,
        dim: i64,
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    ) -> Result<Var> {
        let out = self
            .data()
            .slice_scatter(src.data(), dim, start, end, step)?;
        let part = Part::Slice(dim, start, end, step);
        scattered("SliceScatterBackward", out, self, src, part)
    }

    /// [`Tensor::diagonal_scatter`] (gradients as [`Var::select_scatter`]'s).
    pub fn diagonal_scatter(&self, src: &Var, offset: i64, dim1: i64, dim2: i64) -> Result<Var> {
        let out = self
            .data()
            .diagonal_scatter(src.data(), offset, dim1, dim2)?;
        let part = Part::Diagonal(offset, dim1, dim2);
        scattered("DiagonalScatterBackward", out, self, src, part)
    }
}

fn scattered(name: &'static str, out: Tensor, x: &Var, src: &Var, part: Part) -> Result<Var> {
    let (src_shape, src_dtype) = (src.shape().to_vec(), src.dtype());
    let f = formula(move |g, _s, needs| {
        let gx = if needs[0] {
            let zeros = Tensor::zeros(&src_shape, g.dtype(), g.device())?;
            Some(part.scatter(g, &zeros)?)
        } else {
            None
        };
        let gs = if needs[1] {
            Some(part.of(g)?.to_dtype_contiguous(src_dtype)?)
        } else {
            None
        };
        Ok(vec![gx, gs])
    });
    record(name, out, &[Some(x), Some(src)], Vec::new, f, false)
}
