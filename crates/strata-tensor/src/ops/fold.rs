//! `F.unfold` and `F.fold` (session 76): the sliding blocks of an image
//! batch laid out as columns (im2col, [`Tensor::im2col`]) and columns added
//! back into an image (col2im, [`Tensor::col2im`]), with PyTorch 2.15's
//! checks ([`im2col_plan`], [`col2im_plan`]: positive kernel, stride and
//! dilation; 3-D or 4-D images and 2-D or 3-D columns with only the batch
//! possibly empty; the block count rounded toward negative infinity and at
//! least one; columns whose channels divide by the kernel and whose length
//! is the block count; a positive output size) and its dtypes (floats and bool; PyTorch's CPU has
//! no integer kernels). Each is one fused pass ([`Tensor::window_columns`],
//! [`Tensor::window_columns_sum`]; bool columns add as a logical or).

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::windows::{per_dim, with_batch, without_batch, Windows};
use crate::tensor::Tensor;

/// The options of `F.unfold` and `F.fold`: each one value for both spatial
/// dims or one per dim (PyTorch's int-or-pair).
///
/// ```
/// use strata_tensor::{Device, FoldOptions, Tensor};
/// let x = Tensor::arange(0.0, 9.0, 1.0, None, Device::Cpu)?.reshape(&[1, 1, 3, 3])?;
/// let opts = FoldOptions::new(&[2]);
/// let cols = x.im2col(&opts)?; // [1, 4, 4]: each 2x2 block a column
/// assert_eq!(cols.to_vec::<f32>()?[..4], [0., 1., 3., 4.]);
/// // Folding adds overlapping blocks back: the centre was in all four.
/// let back = cols.col2im(&[3, 3], &opts)?;
/// assert_eq!(back.to_vec::<f32>()?[4], 16.);
/// # Ok::<(), strata_tensor::TensorError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldOptions {
    /// The block's size.
    pub kernel_size: Vec<usize>,
    /// The spacing of a block's elements (PyTorch's default 1).
    pub dilation: Vec<usize>,
    /// Implicit zeros on both sides of each spatial dim (default 0).
    pub padding: Vec<usize>,
    /// The step between blocks (default 1).
    pub stride: Vec<usize>,
}

impl FoldOptions {
    /// Blocks of `kernel_size`, PyTorch's defaults otherwise.
    pub fn new(kernel_size: &[usize]) -> Self {
        FoldOptions {
            kernel_size: kernel_size.to_vec(),
            dilation: vec![1],
            padding: vec![0],
            stride: vec![1],
        }
    }

    /// Sets the dilation.
    pub fn dilation(mut self, dilation: &[usize]) -> Self {
        self.dilation = dilation.to_vec();
        self
    }

    /// Sets the padding.
    pub fn padding(mut self, padding: &[usize]) -> Self {
        self.padding = padding.to_vec();
        self
    }

    /// Sets the stride.
    pub fn stride(mut self, stride: &[usize]) -> Self {
        self.stride = stride.to_vec();
        self
    }
}

/// The options as pairs, checked as PyTorch's `im2col`/`col2im` do.
#[derive(Debug)]
struct Pairs {
    k: Vec<usize>,
    d: Vec<usize>,
    p: Vec<usize>,
    s: Vec<usize>,
}

fn pairs(op: &'static str, o: &FoldOptions) -> Result<Pairs> {
    let k = per_dim(op, "kernel_size", &o.kernel_size, 2)?;
    let d = per_dim(op, "dilation", &o.dilation, 2)?;
    let p = per_dim(op, "padding", &o.padding, 2)?;
    let s = per_dim(op, "stride", &o.stride, 2)?;
    for (name, v) in [("kernel size", &k), ("stride", &s), ("dilation", &d)] {
        if v.contains(&0) {
            return Err(TensorError::value(
                op,
                format!("{name} should be greater than zero, but got {v:?}"),
            ));
        }
    }
    Ok(Pairs { k, d, p, s })
}

/// `floor((size + 2 pad - (dilation (k - 1) + 1)) / stride) + 1`: the
/// number of blocks along a dim (PyTorch's `div_rtn`), in i128 (every term
/// is below 2^64, so only the product can overflow: then a typed error).
fn blocks(op: &'static str, size: usize, pr: &Pairs, i: usize) -> Result<i128> {
    let extent = (pr.d[i] as i128)
        .checked_mul(pr.k[i] as i128 - 1)
        .ok_or_else(|| TensorError::overflow(op, format!("the dilated kernel {pr:?} overflows")))?;
    let span = size as i128 + 2 * pr.p[i] as i128 - (extent + 1);
    Ok(span.div_euclid(pr.s[i] as i128) + 1)
}

/// Whether an input of `shape` (`rank` dims, or `rank + 1` with a batch
/// first) is batched; every dim but the batch must be non-empty, as
/// PyTorch's `im2col`/`col2im` shape checks require.
fn is_batched(op: &'static str, shape: &[usize], rank: usize) -> Result<bool> {
    let batched = shape.len() == rank + 1;
    if !(batched || shape.len() == rank) || shape[usize::from(batched)..].contains(&0) {
        return Err(TensorError::shape(
            op,
            format!(
                "expected a {rank}-D or {}-D (batch mode) input with possibly 0 batch size and \
                 other non-zero dims, but got input of shape {shape:?}",
                rank + 1
            ),
        ));
    }
    Ok(batched)
}

fn check_dtype(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_float() || dtype == DType::Bool {
        Ok(())
    } else {
        Err(TensorError::unsupported(op, dtype))
    }
}

fn windows(input: [usize; 2], out: [usize; 2], pr: &Pairs) -> Windows {
    Windows::new(&input, &out, &pr.k, &pr.s, &pr.p, &pr.d)
}

/// Checks `F.unfold`'s input (`[N, C, H, W]` with only `N` possibly 0, or
/// `[C, H, W]` with none 0) and options as PyTorch 2.15 does; whether it is
/// batched and its blocks.
pub fn im2col_plan(shape: &[usize], dtype: DType, opts: &FoldOptions) -> Result<(bool, Windows)> {
    const OP: &str = "im2col";
    let pr = pairs(OP, opts)?;
    let batched = is_batched(OP, shape, 3)?;
    let (h, w) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let (bh, bw) = (blocks(OP, h, &pr, 0)?, blocks(OP, w, &pr, 1)?);
    if bh < 1 || bw < 1 {
        return Err(TensorError::shape(
            OP,
            format!(
                "given input with spatial size ({h}, {w}), kernel_size={:?}, dilation={:?}, \
                 padding={:?}, the array of sliding blocks would be ({bh}, {bw}), but its \
                 components must be at least one",
                pr.k, pr.d, pr.p
            ),
        ));
    }
    check_dtype(OP, dtype)?;
    let fit =
        |v: i128| usize::try_from(v).map_err(|_| TensorError::overflow(OP, "too many blocks"));
    Ok((batched, windows([h, w], [fit(bh)?, fit(bw)?], &pr)))
}

/// Checks `F.fold`'s input (`[N, C * K, L]` with only `N` possibly 0, or
/// `[C * K, L]` with neither 0), output size and options as PyTorch 2.15
/// does; whether it is batched and its blocks.
pub fn col2im_plan(
    shape: &[usize],
    dtype: DType,
    output_size: &[usize],
    opts: &FoldOptions,
) -> Result<(bool, Windows)> {
    const OP: &str = "col2im";
    let out = per_dim(OP, "output_size", output_size, 2)?;
    let pr = pairs(OP, opts)?;
    let batched = is_batched(OP, shape, 2)?;
    let (planes, length) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let k = pr.k[0] as u128 * pr.k[1] as u128;
    if !(planes as u128).is_multiple_of(k) {
        return Err(TensorError::shape(
            OP,
            format!(
                "expected size of input's dimension {} to be divisible by the product of \
                 kernel_size, but got {planes} and kernel_size={:?}",
                shape.len() - 2,
                pr.k
            ),
        ));
    }
    let (bh, bw) = (blocks(OP, out[0], &pr, 0)?, blocks(OP, out[1], &pr, 1)?);
    if bh < 1 || bw < 1 || bh.checked_mul(bw) != Some(length as i128) {
        return Err(TensorError::shape(
            OP,
            format!(
                "given output_size={out:?}, kernel_size={:?}, dilation={:?}, padding={:?}, \
                 stride={:?}, expected the input's last dim to be the number of sliding blocks \
                 {bh} * {bw} (each at least 1), but got {length}",
                pr.k, pr.d, pr.p, pr.s
            ),
        ));
    }
    if out.contains(&0) {
        return Err(TensorError::shape(
            OP,
            format!("expected output spatial size to be positive, but got output_size={out:?}"),
        ));
    }
    check_dtype(OP, dtype)?;
    Ok((
        batched,
        windows([out[0], out[1]], [bh as usize, bw as usize], &pr),
    ))
}

impl Tensor {
    /// `F.unfold(input, kernel_size, dilation, padding, stride)` (im2col):
    /// the sliding blocks of this `[N, C, H, W]` (or `[C, H, W]`) image as
    /// columns, `[N, C * kh * kw, L]` (or `[C * kh * kw, L]`), row
    /// `c * kh * kw + k` holding channel `c`'s element at offset `k`
    /// (row-major) of every block, zero in the padding. Floats and bool.
    #[doc(alias = "unfold")]
    pub fn im2col(&self, opts: &FoldOptions) -> Result<Tensor> {
        let (batched, w) = im2col_plan(self.shape(), self.dtype(), opts)?;
        without_batch(with_batch(self, batched)?.window_columns(&w)?, batched)
    }

    /// `F.fold(input, output_size, kernel_size, dilation, padding, stride)`
    /// (col2im): these columns (`[N, C * kh * kw, L]` or `[C * kh * kw,
    /// L]`, `L` the number of blocks of `output_size`) added back into
    /// `[N, C, H, W]` (or `[C, H, W]`) at the positions
    /// [`Tensor::im2col`] reads them from; overlapping blocks add up (bool:
    /// or), padding is dropped.
    #[doc(alias = "fold")]
    pub fn col2im(&self, output_size: &[usize], opts: &FoldOptions) -> Result<Tensor> {
        let (batched, w) = col2im_plan(self.shape(), self.dtype(), output_size, opts)?;
        without_batch(with_batch(self, batched)?.window_columns_sum(&w)?, batched)
    }
}
