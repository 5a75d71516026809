//! Session 79: the shape and join ops of PyTorch that strata lacked, each a
//! composition of existing views, copies and joins (so every device and
//! dtype at once, no kernel of its own): `rot90`, `block_diag`,
//! `unflatten`, `hstack`/`vstack`/`dstack`/`column_stack`/`row_stack`,
//! `atleast_1d/2d/3d`, `tensor_split` (`TensorSplit`), `hsplit`/`vsplit`/
//! `dsplit`, `take_along_dim`, `channel_shuffle`, `vander`, the aliases
//! `swapaxes`/`swapdims`/`moveaxis`, `ravel`, `narrow_copy` and the
//! out-of-place scatters `select_scatter`, `slice_scatter`,
//! `diagonal_scatter`. Their checks and messages are PyTorch 2.15's.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::shape::{normalize_dim, normalize_dim_strict};
use crate::tensor::Tensor;
use strata_alloc::Device;

/// How [`Tensor::tensor_split`] cuts a dim: into `Sections(n)` pieces of
/// sizes differing by at most one (the first `size % n` one longer), or at
/// the `Indices` (Python slice bounds: negative ones count from the end,
/// out-of-range ones are clamped, a decreasing pair gives an empty piece).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TensorSplit {
    /// `tensor_split(x, n)`: `n > 0` pieces.
    Sections(i64),
    /// `tensor_split(x, [i, j, ...])`: `len + 1` pieces.
    Indices(Vec<i64>),
}

impl From<i64> for TensorSplit {
    fn from(n: i64) -> Self {
        TensorSplit::Sections(n)
    }
}

impl From<Vec<i64>> for TensorSplit {
    fn from(v: Vec<i64>) -> Self {
        TensorSplit::Indices(v)
    }
}

impl From<&[i64]> for TensorSplit {
    fn from(v: &[i64]) -> Self {
        TensorSplit::Indices(v.to_vec())
    }
}

/// The pieces of `tensor_split` along a dim of `size`: `(start, end)`
/// bounds for Python's slice (`end` may be below `start`: an empty piece).
/// Shared with strata-autograd.
pub fn tensor_split_bounds(how: &TensorSplit, size: usize) -> Result<Vec<(i64, i64)>> {
    let size = size as i64;
    match how {
        TensorSplit::Sections(n) => {
            if *n <= 0 {
                return Err(TensorError::value(
                    "tensor_split",
                    format!("number of sections must be larger than 0, got {n}"),
                ));
            }
            if *n as u128 > crate::ops::MAX_PIECES as u128 {
                return Err(TensorError::value(
                    "tensor_split",
                    format!(
                        "{n} sections is more than strata's limit of {} pieces; split into fewer",
                        crate::ops::MAX_PIECES
                    ),
                ));
            }
            let (small, extra) = (size / n, size % n);
            let mut at = 0;
            Ok((0..*n)
                .map(|i| {
                    let len = small + i64::from(i < extra);
                    at += len;
                    (at - len, at)
                })
                .collect())
        }
        TensorSplit::Indices(ix) => {
            if ix.len() as u128 >= crate::ops::MAX_PIECES as u128 {
                return Err(TensorError::value(
                    "tensor_split",
                    format!(
                        "{} indices make more than strata's limit of {} pieces; split into fewer",
                        ix.len(),
                        crate::ops::MAX_PIECES
                    ),
                ));
            }
            // Python's slice bounds, as `slice` clamps them.
            let clamp = |i: i64| {
                let i = if i < 0 { i.saturating_add(size) } else { i };
                i.clamp(0, size)
            };
            let mut start = 0;
            let mut out = Vec::with_capacity(ix.len() + 1);
            for &i in ix {
                let end = clamp(i);
                out.push((start, end.max(start)));
                start = end;
            }
            out.push((start, size.max(start)));
            Ok(out)
        }
    }
}

/// PyTorch's checks of `rot90(x, k, dims)` for `ndim` dims: the two dims
/// (wrapped) and `k` reduced to 0..4. Shared with strata-autograd.
pub fn rot90_plan(ndim: usize, k: i64, dims: &[i64]) -> Result<(i64, usize, usize)> {
    const OP: &str = "rot90";
    if dims.len() != 2 {
        return Err(TensorError::dim(
            OP,
            format!(
                "expected total rotation dims == 2, but got dims = {}",
                dims.len()
            ),
        ));
    }
    if ndim < 2 {
        return Err(TensorError::dim(
            OP,
            format!("expected total dims >= 2, but got total dims = {ndim}"),
        ));
    }
    let (d0, d1) = (
        normalize_dim(OP, dims[0], ndim)?,
        normalize_dim(OP, dims[1], ndim)?,
    );
    if d0 == d1 {
        return Err(TensorError::dim(
            OP,
            format!(
                "expected rotation dims to be different, but got dim0 = {} and dim1 = {}",
                dims[0], dims[1]
            ),
        ));
    }
    Ok((k.rem_euclid(4), d0, d1))
}

/// The split dim of `hsplit`/`vsplit`/`dsplit` for a tensor of `ndim` dims,
/// with PyTorch's checks of the rank and, for a section count, of its
/// divisibility. Shared with strata-autograd.
pub fn directional_split(
    op: &'static str,
    shape: &[usize],
    how: &TensorSplit,
) -> Result<(i64, TensorSplit)> {
    let (need, dim) = match op {
        "hsplit" => (1, if shape.len() == 1 { 0 } else { 1 }),
        "vsplit" => (2, 0),
        _ => (3, 2),
    };
    if shape.len() < need {
        return Err(TensorError::dim(
            op,
            format!(
                "torch.{op} requires a tensor with at least {need} dimension, but got a tensor with {} dimensions!",
                shape.len()
            ),
        ));
    }
    if let TensorSplit::Sections(n) = how {
        let size = shape[dim] as i64;
        if *n == 0 || size % n != 0 {
            return Err(TensorError::value(
                op,
                format!(
                    "torch.{op} attempted to split along dimension {dim}, but the size of the dimension {size} is not divisible by the split_size {n}!"
                ),
            ));
        }
    }
    Ok((dim as i64, how.clone()))
}

/// The shape `unflatten(dim, sizes)` gives a tensor of `shape`, with
/// PyTorch's checks. Shared with strata-autograd.
pub fn unflatten_shape(shape: &[usize], dim: i64, sizes: &[i64]) -> Result<Vec<i64>> {
    const OP: &str = "unflatten";
    if shape.is_empty() {
        return Err(TensorError::dim(
            OP,
            "unflatten got a 0-d tensor: it has no dim to unflatten; give it a dim first (reshape or unsqueeze)",
        ));
    }
    let d = normalize_dim(OP, dim, shape.len())?;
    if sizes.is_empty() {
        return Err(TensorError::shape(OP, "unflatten: sizes must be non-empty"));
    }
    let n = shape[d] as i128;
    let holes = sizes.iter().filter(|&&s| s == -1).count();
    let known: i128 = sizes
        .iter()
        .filter(|&&s| s != -1)
        .map(|&s| s as i128)
        .product();
    let bad = sizes.iter().any(|&s| s < -1)
        || holes > 1
        || (holes == 1 && (known == 0 || n % known != 0))
        || (holes == 0 && known != n);
    if bad {
        return Err(TensorError::shape(
            OP,
            format!(
                "unflatten: Provided sizes {sizes:?} don't multiply up to the size of dim {dim} ({n}) in the input tensor"
            ),
        ));
    }
    let mut out: Vec<i64> = shape[..d].iter().map(|&s| s as i64).collect();
    out.extend(
        sizes
            .iter()
            .map(|&s| if s == -1 { (n / known) as i64 } else { s }),
    );
    out.extend(shape[d + 1..].iter().map(|&s| s as i64));
    Ok(out)
}

/// PyTorch's checks of `take_along_dim(x, indices, dim)`: the shapes the
/// input and the indices are broadcast to (the input keeping its own size
/// along `dim`). Shared with strata-autograd.
pub fn take_along_dim_shapes(
    x: &[usize],
    indices: &Tensor,
    dim: usize,
) -> Result<(Vec<i64>, Vec<i64>)> {
    const OP: &str = "take_along_dim";
    if x.len() != indices.ndim() {
        return Err(TensorError::shape(
            OP,
            format!(
                "torch.take_along_dim(): input and indices should have the same number of dimensions, but got {} dimensions for input, and {} dimensions for indices",
                x.len(),
                indices.ndim()
            ),
        ));
    }
    let mut sizes = x.to_vec();
    sizes[dim] = indices.shape()[dim];
    let b = crate::shape::broadcast_shapes(OP, &sizes, indices.shape())?;
    let idx: Vec<i64> = b.iter().map(|&s| s as i64).collect();
    let mut src = idx.clone();
    src[dim] = x[dim] as i64;
    Ok((src, idx))
}

fn long_indices(indices: &Tensor) -> Result<()> {
    if indices.dtype() != DType::I64 {
        return Err(TensorError::dtype(
            "take_along_dim",
            format!(
                "torch.take_along_dim(): dtype of indices should be Long but got {}; convert them with to_dtype(DType::I64)",
                indices.dtype()
            ),
        ));
    }
    Ok(())
}

/// The view `channel_shuffle` reshapes through, with PyTorch's checks:
/// `[N, groups, C / groups, rest...]`. Shared with strata-autograd.
pub fn channel_shuffle_shape(shape: &[usize], groups: i64) -> Result<Vec<i64>> {
    const OP: &str = "channel_shuffle";
    if shape.len() <= 2 {
        return Err(TensorError::shape(
            OP,
            format!(
                "channel_shuffle expects input with > 2 dims, but got input with sizes {shape:?}"
            ),
        ));
    }
    if groups <= 0 {
        return Err(TensorError::value(
            OP,
            format!(
                "Number of groups to divide channels in must be positive. Value of groups:{groups}"
            ),
        ));
    }
    let c = shape[1] as i64;
    if c % groups != 0 {
        return Err(TensorError::value(
            OP,
            format!("Number of channels must be divisible by groups. Got {c} channels and {groups} groups."),
        ));
    }
    let mut v = vec![shape[0] as i64, groups, c / groups];
    v.extend(shape[2..].iter().map(|&s| s as i64));
    Ok(v)
}

/// `vander`'s checks: `x` 1-D, `n` (default `len(x)`) non-negative; the
/// column count and the result dtype (`x`'s promoted with i64). Shared
/// with strata-autograd.
pub fn vander_plan(x: &Tensor, n: Option<i64>) -> Result<(usize, DType)> {
    const OP: &str = "vander";
    if x.ndim() != 1 {
        return Err(TensorError::shape(
            OP,
            "x must be a one-dimensional tensor.",
        ));
    }
    let n = n.unwrap_or(x.shape()[0] as i64);
    if n < 0 {
        return Err(TensorError::value(OP, "N must be non-negative."));
    }
    Ok((n as usize, x.dtype().promote(DType::I64)))
}

/// The scatter ops' check: `src` must have the shape of the slice it fills.
pub(crate) fn check_scatter_src(op: &'static str, slice: &[usize], src: &[usize]) -> Result<()> {
    if slice != src {
        return Err(TensorError::shape(
            op,
            format!(
                "expected src to have a size equal to the slice of self. src size = {src:?}, slice size = {slice:?}"
            ),
        ));
    }
    Ok(())
}

impl Tensor {
    /// `torch.rot90(x, k, dims)`: rotated by 90° `k` times from the first
    /// dim of `dims` towards the second (a flip and a transposed view of it;
    /// `k % 4 == 0` is a contiguous copy).
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// let x = tensor![[1., 2.], [3., 4.]]?;
    /// assert_eq!(x.rot90(1, &[0, 1])?.contiguous()?.to_vec::<f32>()?, [2., 4., 1., 3.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn rot90(&self, k: i64, dims: &[i64]) -> Result<Tensor> {
        rot90_of(self, k, dims)
    }

    /// `torch.block_diag(*tensors)`: the tensors (0-d as 1 x 1, 1-D as one
    /// row) along the diagonal of a zero matrix of their `result_type` (0-d
    /// tensors rank below the others, as in PyTorch).
    /// No tensors give an f32 `[1, 0]` tensor on the CPU, as PyTorch's.
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// let d = Tensor::block_diag(&[&tensor![[1., 2.]]?, &tensor![3.]?])?;
    /// assert_eq!(d.shape(), &[2, 3]);
    /// assert_eq!(d.to_vec::<f32>()?, [1., 2., 0., 0., 0., 3.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn block_diag(tensors: &[&Tensor]) -> Result<Tensor> {
        const OP: &str = "block_diag";
        let Some(first) = tensors.first() else {
            return Tensor::zeros(&[1, 0], DType::F32, Device::Cpu);
        };
        let (mut rows, mut cols) = (0usize, 0usize);
        for (i, t) in tensors.iter().enumerate() {
            if t.ndim() > 2 {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {} dimensions",
                        t.ndim()
                    ),
                ));
            }
            crate::ops::elementwise::same_device(OP, first, t)?;
            let (r, c) = block_of(t);
            rows += r;
            cols += c;
        }
        // PyTorch's `result_type` of the list: 0-d tensors rank below the others.
        let operands: Vec<crate::ops::Operand> = tensors.iter().map(|t| (*t).into()).collect();
        let dtype = crate::ops::elementwise::result_type(&operands);
        let out = Tensor::zeros(&[rows, cols], dtype, first.device())?;
        let (mut r0, mut c0) = (0, 0);
        for t in tensors {
            let (r, c) = block_of(t);
            if r > 0 && c > 0 {
                let block = t.reshape(&[r as i64, c as i64])?;
                out.narrow(0, r0 as i64, r as i64)?
                    .narrow(1, c0 as i64, c as i64)?
                    .copy_(&block)?;
            }
            r0 += r;
            c0 += c;
        }
        Ok(out)
    }

    /// `torch.unflatten(x, dim, sizes)`: `dim` split into `sizes` (one may
    /// be `-1`), a view.
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let x = Tensor::zeros(&[2, 6], DType::F32, Device::Cpu)?;
    /// assert_eq!(x.unflatten(1, &[3, -1])?.shape(), &[2, 3, 2]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn unflatten(&self, dim: i64, sizes: &[i64]) -> Result<Tensor> {
        self.reshape(&unflatten_shape(self.shape(), dim, sizes)?)
    }

    /// `torch.atleast_1d`: a 0-d tensor as one element of 1-D, any other
    /// the tensor itself.
    pub fn atleast_1d(&self) -> Result<Tensor> {
        atleast_1d_of(self)
    }

    /// `torch.atleast_2d`: 0-d as `[1, 1]`, 1-D `[n]` as `[1, n]`.
    pub fn atleast_2d(&self) -> Result<Tensor> {
        atleast_2d_of(self)
    }

    /// `torch.atleast_3d`: 0-d as `[1, 1, 1]`, `[n]` as `[1, n, 1]`,
    /// `[m, n]` as `[m, n, 1]`.
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// assert_eq!(tensor![1., 2.]?.atleast_3d()?.shape(), &[1, 2, 1]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn atleast_3d(&self) -> Result<Tensor> {
        atleast_3d_of(self)
    }

    /// `torch.hstack`: 1-D tensors (and 0-d) joined along dim 0, others
    /// along dim 1.
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// let h = Tensor::hstack(&[&tensor![1., 2.]?, &tensor![3.]?])?;
    /// assert_eq!(h.to_vec::<f32>()?, [1., 2., 3.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn hstack(tensors: &[&Tensor]) -> Result<Tensor> {
        hstack_of(tensors)
    }

    /// `torch.vstack` (`row_stack`): the tensors as at least 2-D, joined
    /// along dim 0.
    pub fn vstack(tensors: &[&Tensor]) -> Result<Tensor> {
        vstack_of(tensors)
    }

    /// `torch.row_stack`, PyTorch's alias of [`Tensor::vstack`].
    pub fn row_stack(tensors: &[&Tensor]) -> Result<Tensor> {
        Tensor::vstack(tensors)
    }

    /// `torch.dstack`: the tensors as at least 3-D, joined along dim 2.
    pub fn dstack(tensors: &[&Tensor]) -> Result<Tensor> {
        dstack_of(tensors)
    }

    /// `torch.column_stack`: 0-d and 1-D tensors as columns `[n, 1]`, the
    /// others as they are, joined along dim 1.
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// let c = Tensor::column_stack(&[&tensor![1., 2.]?, &tensor![3., 4.]?])?;
    /// assert_eq!(c.shape(), &[2, 2]);
    /// assert_eq!(c.to_vec::<f32>()?, [1., 3., 2., 4.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn column_stack(tensors: &[&Tensor]) -> Result<Tensor> {
        column_stack_of(tensors)
    }

    /// `torch.tensor_split(x, sections_or_indices, dim)`: views along
    /// `dim`, `Sections(n)` of sizes differing by at most one or cut at the
    /// `Indices`.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor, TensorSplit};
    /// let x = Tensor::arange(0, 7, 1, None, Device::Cpu)?;
    /// let p = x.tensor_split(TensorSplit::Sections(3), 0)?;
    /// assert_eq!(p.iter().map(|t| t.numel()).collect::<Vec<_>>(), [3, 2, 2]);
    /// let p = x.tensor_split(vec![1, 5], 0)?;
    /// assert_eq!(p[1].to_vec::<i64>()?, [1, 2, 3, 4]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn tensor_split(&self, how: impl Into<TensorSplit>, dim: i64) -> Result<Vec<Tensor>> {
        tensor_split_of(self, &how.into(), dim)
    }

    /// `torch.hsplit`: [`Tensor::tensor_split`] along dim 1 (dim 0 of a
    /// 1-D tensor); a section count must divide the dim.
    pub fn hsplit(&self, how: impl Into<TensorSplit>) -> Result<Vec<Tensor>> {
        let (d, how) = directional_split("hsplit", self.shape(), &how.into())?;
        self.tensor_split(how, d)
    }

    /// `torch.vsplit`: [`Tensor::tensor_split`] along dim 0 of an at least
    /// 2-D tensor; a section count must divide the dim.
    pub fn vsplit(&self, how: impl Into<TensorSplit>) -> Result<Vec<Tensor>> {
        let (d, how) = directional_split("vsplit", self.shape(), &how.into())?;
        self.tensor_split(how, d)
    }

    /// `torch.dsplit`: [`Tensor::tensor_split`] along dim 2 of an at least
    /// 3-D tensor; a section count must divide the dim.
    pub fn dsplit(&self, how: impl Into<TensorSplit>) -> Result<Vec<Tensor>> {
        let (d, how) = directional_split("dsplit", self.shape(), &how.into())?;
        self.tensor_split(how, d)
    }

    /// `torch.take_along_dim(x, indices, dim)`: `gather` after broadcasting
    /// the input and the (i64) indices to each other but along `dim`; with
    /// `dim = None` the flattened input at the flattened indices (both must
    /// be viewable as 1-D, as PyTorch's `view(-1)` requires). An index
    /// outside the dim is a typed `Index` error (PyTorch 2.15's CPU reads
    /// past the input there instead of raising).
    ///
    /// ```
    /// use strata_tensor::{tensor, Tensor};
    /// let x = tensor![[10., 30., 20.], [60., 40., 50.]]?;
    /// let i = tensor![[0i64], [2]]?;
    /// assert_eq!(x.take_along_dim(&i, Some(1))?.to_vec::<f32>()?, [10., 50.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn take_along_dim(&self, indices: &Tensor, dim: Option<i64>) -> Result<Tensor> {
        take_along_dim_of(self, indices, dim)
    }

    /// `torch.channel_shuffle(x, groups)` (`nn.ChannelShuffle`): the
    /// channels (dim 1) of each of `groups` groups interleaved; a
    /// contiguous result.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::arange(0, 4, 1, None, Device::Cpu)?.reshape(&[1, 4, 1])?;
    /// assert_eq!(x.channel_shuffle(2)?.to_vec::<i64>()?, [0, 2, 1, 3]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn channel_shuffle(&self, groups: i64) -> Result<Tensor> {
        channel_shuffle_of(self, groups)
    }

    /// `torch.vander(x, N, increasing)`: the columns `x^(N-1), ..., x^0`
    /// (`x^0, ...` when `increasing`), products accumulated as PyTorch's
    /// `cumprod`; integer and bool inputs give i64.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let v = tensor![2i64, 3]?.vander(Some(3), false)?;
    /// assert_eq!(v.to_vec::<i64>()?, [4, 2, 1, 9, 3, 1]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn vander(&self, n: Option<i64>, increasing: bool) -> Result<Tensor> {
        vander_of(self, n, increasing)
    }

    /// `torch.swapaxes` (NumPy's name), an alias of [`Tensor::transpose`].
    pub fn swapaxes(&self, d0: i64, d1: i64) -> Result<Tensor> {
        self.transpose(d0, d1)
    }

    /// `torch.swapdims`, an alias of [`Tensor::transpose`].
    pub fn swapdims(&self, d0: i64, d1: i64) -> Result<Tensor> {
        self.transpose(d0, d1)
    }

    /// `torch.moveaxis` (NumPy's name), an alias of [`Tensor::movedim`].
    pub fn moveaxis(&self, source: &[i64], destination: &[i64]) -> Result<Tensor> {
        self.movedim(source, destination)
    }

    /// `torch.ravel`: the elements in row-major order as one dim (a view of
    /// a contiguous tensor, else a copy).
    pub fn ravel(&self) -> Result<Tensor> {
        self.contiguous()?.view(&[-1])
    }

    /// `torch.narrow_copy`: [`Tensor::narrow`] as a new contiguous tensor.
    pub fn narrow_copy(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        self.narrow(dim, start, length)?.clone_contiguous()
    }

    /// `torch.select_scatter(x, src, dim, index)`: a copy of `x` (its
    /// strides kept) whose `x.select(dim, index)` is `src` (converted to
    /// `x`'s dtype, as `copy_`).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let x = tensor![[1., 2.], [3., 4.]]?;
    /// let y = x.select_scatter(&tensor![0., 0.]?, 0, 1)?;
    /// assert_eq!(y.to_vec::<f32>()?, [1., 2., 0., 0.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn select_scatter(&self, src: &Tensor, dim: i64, index: i64) -> Result<Tensor> {
        self.select(dim, index)?;
        let out = self.deep_clone()?;
        let part = out.select(dim, index)?;
        check_scatter_src("select_scatter", part.shape(), src.shape())?;
        part.copy_(src)?;
        Ok(out)
    }

    /// `torch.slice_scatter(x, src, dim, start, end, step)`: a copy of `x`
    /// whose `x[..., start:end:step]` along `dim` is `src`.
    pub fn slice_scatter(
        &self,
        src: &Tensor,
        dim: i64,
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    ) -> Result<Tensor> {
        self.slice(dim, start, end, step)?;
        let out = self.deep_clone()?;
        let part = out.slice(dim, start, end, step)?;
        check_scatter_src("slice_scatter", part.shape(), src.shape())?;
        part.copy_(src)?;
        Ok(out)
    }

    /// `torch.diagonal_scatter(x, src, offset, dim1, dim2)`: a copy of `x`
    /// whose `x.diagonal(offset, dim1, dim2)` is `src`.
    pub fn diagonal_scatter(
        &self,
        src: &Tensor,
        offset: i64,
        dim1: i64,
        dim2: i64,
    ) -> Result<Tensor> {
        self.diagonal(offset, dim1, dim2)?;
        let out = self.deep_clone()?;
        let part = out.diagonal(offset, dim1, dim2)?;
        check_scatter_src("diagonal_scatter", part.shape(), src.shape())?;
        part.copy_(src)?;
        Ok(out)
    }
}

/// A block's rows and columns: 0-d as 1 x 1, 1-D as one row.
pub fn block_of(t: &Tensor) -> (usize, usize) {
    match t.shape() {
        [] => (1, 1),
        [n] => (1, *n),
        s => (s[0], s[1]),
    }
}

type Of<T> = std::result::Result<T, <T as Composite>::Error>;

/// `rot90` on a tensor or a variable: a flip and a transposed view, or
/// the contiguous copy that `k % 4 == 0` gives.
pub fn rot90_of<T: Composite>(x: &T, k: i64, dims: &[i64]) -> Of<T> {
    let (k, d0, d1) = rot90_plan(x.shape().len(), k, dims)?;
    let (d0, d1) = (d0 as i64, d1 as i64);
    match k {
        1 => x.flip(&[d1])?.transpose(d0, d1),
        2 => x.flip(&[d0, d1]),
        3 => x.flip(&[d0])?.transpose(d0, d1),
        _ => x.clone_contiguous(),
    }
}

/// `channel_shuffle` of a tensor or a variable: a reshape to
/// `[N, groups, C / groups, ..]`, a transpose of dims 1 and 2 and a
/// contiguous copy, reshaped back.
pub fn channel_shuffle_of<T: Composite>(x: &T, groups: i64) -> Of<T> {
    let split = channel_shuffle_shape(x.shape(), groups)?;
    if x.shape().contains(&0) {
        // Nothing to move (and the split [N, groups, 0, ..] of more
        // groups than a tensor's sizes allow need not exist).
        return x.clone_contiguous();
    }
    let shape: Vec<i64> = x.shape().iter().map(|&s| s as i64).collect();
    x.reshape(&split)?
        .transpose(1, 2)?
        .clone_contiguous()?
        .reshape(&shape)
}

/// `vander` of a tensor or a variable: a column of ones, then the running
/// product (`cumprod`, whose gradient a variable records) of `x` repeated
/// `n - 1` times; flipped unless `increasing`.
pub fn vander_of<T: Composite>(x: &T, n: Option<i64>, increasing: bool) -> Of<T> {
    let (n, dtype) = vander_plan(x.data(), n)?;
    let len = x.shape()[0];
    let ones = T::constant(Tensor::ones(&[len, n.min(1)], dtype, x.device())?);
    let out = if n > 1 {
        let powers = x
            .to_dtype(dtype)?
            .unsqueeze(1)?
            .expand(&[len as i64, n as i64 - 1])?
            .cumprod(1)?;
        T::cat(&[ones, powers], 1)?
    } else {
        ones
    };
    if increasing {
        Ok(out)
    } else {
        out.flip(&[1])
    }
}

/// `atleast_1d` on a tensor or a variable.
pub fn atleast_1d_of<T: Composite>(x: &T) -> Of<T> {
    match x.shape().len() {
        0 => x.reshape(&[1]),
        _ => Ok(x.clone()),
    }
}

/// `atleast_2d` on a tensor or a variable.
pub fn atleast_2d_of<T: Composite>(x: &T) -> Of<T> {
    match x.shape().len() {
        0 => x.reshape(&[1, 1]),
        1 => x.unsqueeze(0),
        _ => Ok(x.clone()),
    }
}

/// `atleast_3d` on a tensor or a variable.
pub fn atleast_3d_of<T: Composite>(x: &T) -> Of<T> {
    match x.shape().len() {
        0 => x.reshape(&[1, 1, 1]),
        1 => x.unsqueeze(0)?.unsqueeze(-1),
        2 => x.unsqueeze(-1),
        _ => Ok(x.clone()),
    }
}

/// `hstack` of tensors or variables (a `cat`).
pub fn hstack_of<T: Composite>(xs: &[&T]) -> Of<T> {
    let ts = stack_inputs("hstack", xs, atleast_1d_of)?;
    let dim = if ts[0].shape().len() == 1 { 0 } else { 1 };
    T::cat(&ts, dim)
}

/// `vstack` of tensors or variables (a `cat`).
pub fn vstack_of<T: Composite>(xs: &[&T]) -> Of<T> {
    T::cat(&stack_inputs("vstack", xs, atleast_2d_of)?, 0)
}

/// `dstack` of tensors or variables (a `cat`).
pub fn dstack_of<T: Composite>(xs: &[&T]) -> Of<T> {
    T::cat(&stack_inputs("dstack", xs, atleast_3d_of)?, 2)
}

/// `column_stack` of tensors or variables (a `cat`).
pub fn column_stack_of<T: Composite>(xs: &[&T]) -> Of<T> {
    let ts = stack_inputs("column_stack", xs, |t: &T| {
        if t.shape().len() <= 1 {
            t.reshape(&[t.shape().iter().product::<usize>() as i64, 1])
        } else {
            Ok(t.clone())
        }
    })?;
    T::cat(&ts, 1)
}

/// `tensor_split` of a tensor or a variable: PyTorch's checks (rank, dim,
/// sections), then slices.
pub fn tensor_split_of<T: Composite>(
    x: &T,
    how: &TensorSplit,
    dim: i64,
) -> std::result::Result<Vec<T>, T::Error> {
    let ndim = x.shape().len();
    if ndim == 0 {
        return Err(TensorError::dim(
            "tensor_split",
            "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims",
        )
        .into());
    }
    let d = normalize_dim("tensor_split", dim, ndim)?;
    tensor_split_bounds(how, x.shape()[d])?
        .into_iter()
        .map(|(s, e)| x.slice(d as i64, Some(s), Some(e), 1))
        .collect()
}

/// `take_along_dim` of a tensor or a variable: PyTorch's checks, then an
/// expanded `gather` (so the gradient is scatter-added at the indices and
/// summed over the broadcast).
pub fn take_along_dim_of<T: Composite>(x: &T, indices: &Tensor, dim: Option<i64>) -> Of<T> {
    crate::ops::elementwise::same_device("take_along_dim", x.data(), indices)?;
    match dim {
        // PyTorch views both as 1-D: a non-contiguous input is refused.
        None => x.view(&[-1])?.gather(0, &indices.view(&[-1])?),
        Some(dim) => {
            // Only this form asks for i64 indices (the flattened one is
            // `gather`'s, which takes i32 too), as PyTorch's.
            long_indices(indices)?;
            let d = normalize_dim_strict("take_along_dim", dim, x.shape().len())?;
            let (src, idx) = take_along_dim_shapes(x.shape(), indices, d)?;
            x.expand(&src)?.gather(d as i64, &indices.expand(&idx)?)
        }
    }
}

fn stack_inputs<T: Composite>(
    op: &'static str,
    xs: &[&T],
    f: impl Fn(&T) -> Of<T>,
) -> std::result::Result<Vec<T>, T::Error> {
    if xs.is_empty() {
        return Err(TensorError::value(op, format!("{op} expects a non-empty TensorList")).into());
    }
    xs.iter().map(|t| f(t)).collect()
}
