//! Session 79 (helper 134): `torch.nn.functional` ops strata lacked, each a
//! composition of existing ops (every device at once, no kernel of its
//! own), written as PyTorch 2.15 composes them where it does (the checks
//! and messages are PyTorch's): `multi_margin_loss` (the hinge of every
//! class against the target's, p 1 or 2, class weights), `instance_norm`
//! (batch norm of the `[1, N * C, ...]` view, running statistics averaged
//! back over the batch, as `at::instance_norm`), `local_response_norm`
//! (`F.local_response_norm`'s pad and average pool), `lp_pool1d/2d`
//! (`F.lp_pool*d`'s average pool of the powers), `max_unpool1d/2d` (a
//! scatter of the values at their indices into zeros) and `bilinear`
//! (`einsum`). The recorded forms are strata-autograd's `ops/nn_more.rs`,
//! over the same checks.

use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::ops::composite::Composite;
use crate::ops::{PoolOptions, Reduction};
use crate::tensor::Tensor;

/// `multi_margin_loss`'s checks: the input seen as `[N, C]`, the target as
/// `[N, 1]` (i64), the per-sample weights of the targets (`[N, 1]`, `None`
/// without class weights), and whether the result of `reduction = None`
/// is 1-D. Shared with strata-autograd.
pub fn multi_margin_plan(
    x: &Tensor,
    target: &Tensor,
    p: i64,
    weight: Option<&Tensor>,
) -> Result<(Vec<i64>, Tensor, Option<Tensor>, bool)> {
    const OP: &str = "multi_margin_loss";
    if p != 1 && p != 2 {
        return Err(TensorError::value(OP, "only p == 1 and p == 2 supported"));
    }
    let nd = x.ndim();
    let ok = (nd == 2 && x.shape()[1] != 0) || (nd == 1 && x.shape()[0] != 0) || nd == 0;
    if !ok {
        return Err(TensorError::shape(
            OP,
            format!(
                "Expected non-empty vector or matrix with optional 0-dim batch size, but got: {:?}",
                x.shape()
            ),
        ));
    }
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(TensorError::dtype(
            OP,
            format!(
                "\"multi_margin_loss_cpu\" not implemented for {}; convert the input to f32 or f64",
                x.dtype()
            ),
        ));
    }
    let n = if nd <= 1 { 1 } else { x.shape()[0] };
    let c = if nd == 0 { 1 } else { x.shape()[nd - 1] };
    if target.ndim() > 1 || target.numel() != n {
        return Err(TensorError::shape(
            OP,
            format!(
                "inconsistent target size, expected {n} but got {:?}",
                target.shape()
            ),
        ));
    }
    if target.dtype() != DType::I64 {
        return Err(TensorError::dtype(
            OP,
            format!(
                "expected scalar type Long but found {} for the target",
                target.dtype()
            ),
        ));
    }
    crate::ops::elementwise::same_device(OP, x, target)?;
    if n > 0 {
        let bad = target.lt(0i64)?.logical_or(&target.ge(c as i64)?)?;
        if bad.any()?.item::<bool>()? {
            return Err(TensorError::index(
                OP,
                format!("target out of range (the classes are 0..{c})"),
            ));
        }
    }
    let t = target.reshape(&[n as i64, 1])?;
    let w = match weight {
        Some(w) => {
            if w.ndim() > 1 || w.numel() != c {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "inconsistent weight size, expected {c} but got {:?}",
                        w.shape()
                    ),
                ));
            }
            crate::ops::elementwise::same_device(OP, x, w)?;
            if w.dtype() != x.dtype() {
                return Err(TensorError::dtype(
                    OP,
                    format!(
                        "expected scalar type {} but found {} for the weight",
                        x.dtype(),
                        w.dtype()
                    ),
                ));
            }
            Some(
                w.reshape(&[-1])?
                    .index_select(0, &t.reshape(&[-1])?)?
                    .reshape(&[n as i64, 1])?,
            )
        }
        None => None,
    };
    Ok((vec![n as i64, c as i64], t, w, target.ndim() > 0))
}

/// The mask of the non-target classes `[N, C]` (f dtype), shared with
/// strata-autograd.
pub fn non_target_mask(t: &Tensor, c: i64, dtype: DType) -> Result<Tensor> {
    let classes = Tensor::arange(0i64, c, 1i64, Some(DType::I64), t.device())?.reshape(&[1, c])?;
    classes.ne(t)?.to_dtype(dtype)
}

/// `instance_norm`'s checks (PyTorch's and `F.instance_norm`'s).
pub fn instance_norm_check(shape: &[usize], running: bool, use_input_stats: bool) -> Result<()> {
    const OP: &str = "instance_norm";
    if shape.len() < 2 {
        return Err(TensorError::shape(
            OP,
            format!("instance_norm expects an input of at least 2 dims [N, C, ...], got {shape:?}"),
        ));
    }
    if !use_input_stats && !running {
        return Err(TensorError::value(
            OP,
            "Expected running_mean and running_var to be defined when use_input_stats is false",
        ));
    }
    if use_input_stats && shape[2..].iter().product::<usize>() == 1 {
        return Err(TensorError::value(
            OP,
            format!("Expected more than 1 spatial element when training, got input size {shape:?}"),
        ));
    }
    Ok(())
}

/// `F.local_response_norm`'s checks: at least 3 dims, a positive size.
pub fn local_response_norm_check(x: &Tensor, size: i64) -> Result<()> {
    const OP: &str = "local_response_norm";
    let shape = x.shape();
    if shape.len() >= 4
        && matches!(x.dtype(), DType::F16 | DType::BF16)
        && x.device() == crate::Device::Cpu
    {
        // Its 4-D and wider inputs go through an average pool over three
        // dims, which PyTorch's CPU lacks for these dtypes.
        return Err(TensorError::dtype(
            OP,
            format!("\"avg_pool3d_out_frame\" not implemented for {} on the CPU; convert the input to f32", x.dtype()),
        ));
    }
    if shape.len() < 3 {
        return Err(TensorError::shape(
            OP,
            format!(
                "Expected 3D or higher dimensionality input (got {} dimensions)",
                shape.len()
            ),
        ));
    }
    if size <= 0 {
        return Err(TensorError::value(
            OP,
            format!("local_response_norm's size must be positive, got {size}"),
        ));
    }
    Ok(())
}

/// `F.max_unpool{1,2}d`'s output size (default from the kernel, stride and
/// padding, or `output_size` checked against it) and the checks of the
/// input and indices. Shared with strata-autograd.
pub fn max_unpool_plan(
    x: &Tensor,
    indices: &Tensor,
    kernel: &[usize],
    stride: Option<&[usize]>,
    padding: &[usize],
    output_size: Option<&[usize]>,
    d: usize,
) -> Result<Vec<usize>> {
    let op = if d == 1 {
        "max_unpool1d"
    } else {
        "max_unpool2d"
    };
    let tuple = |v: &[usize], what: &str| -> Result<Vec<usize>> {
        match v.len() {
            1 => Ok(vec![v[0]; d]),
            n if n == d => Ok(v.to_vec()),
            _ => Err(TensorError::value(
                op,
                format!("{what} must be an int or a tuple of {d} ints, got {v:?}"),
            )),
        }
    };
    let k = tuple(kernel, "kernel_size")?;
    let s = match stride {
        Some(s) => tuple(s, "stride")?,
        None => k.clone(),
    };
    let p = tuple(padding, "padding")?;
    if indices.dtype() != DType::I64 {
        return Err(TensorError::dtype(
            op,
            format!(
                "elements in indices should be type int64 but got: {}",
                indices.dtype()
            ),
        ));
    }
    if x.shape() != indices.shape() {
        return Err(TensorError::shape(
            op,
            format!(
                "Expected shape of indices to be same as that of the input tensor ({:?}) but got indices tensor with shape: {:?}",
                x.shape(),
                indices.shape()
            ),
        ));
    }
    let nd = x.ndim();
    if nd != d + 1 && nd != d + 2 {
        return Err(TensorError::shape(
            op,
            format!("Input to {op} should be a {}d or {}d Tensor, but got a tensor with {nd} dimensions.", d + 1, d + 2),
        ));
    }
    if x.shape()[nd - d..].contains(&0) || (nd == d + 2 && x.shape()[1] == 0) {
        return Err(TensorError::shape(
            op,
            format!("{op}(): Expected input to have non-zero size for non-batch dimensions, but got {:?}", x.shape()),
        ));
    }
    crate::ops::elementwise::same_device(op, x, indices)?;
    // `(L - 1) * stride + kernel - 2 * padding`, in i128: the usize
    // arguments may be anything (a negative one arrives as a huge value).
    let mut default = Vec::with_capacity(d);
    for i in 0..d {
        let v =
            (x.shape()[nd - d + i] as i128 - 1) * s[i] as i128 + k[i] as i128 - 2 * p[i] as i128;
        if v > crate::shape::MAX_NUMEL as i128 {
            return Err(TensorError::overflow(
                op,
                format!("the output size {v} of dim {i} (from kernel_size {k:?}, stride {s:?}, padding {p:?}) exceeds i64::MAX"),
            ));
        }
        default.push(v as i64);
    }
    let out: Vec<usize> = match output_size {
        None => {
            // PyTorch allows an empty output (kernel_size 0).
            if default.iter().any(|&v| v < 0) {
                return Err(TensorError::value(
                    op,
                    format!("output_size must contain non-negative spatial dimensions, but got {default:?} (from kernel_size {k:?}, stride {s:?}, padding {p:?})"),
                ));
            }
            default.iter().map(|&v| v as usize).collect()
        }
        Some(o) => {
            // d sizes, or d + 2 whose first two (batch, channels) are not
            // read, as PyTorch's `_unpool_output_size`.
            let o = if o.len() == d + 2 { &o[2..] } else { o };
            if o.len() != d {
                return Err(TensorError::value(
                    op,
                    format!("output_size should be a sequence containing {d} or {} elements, but it has a length of '{}'", d + 2, o.len()),
                ));
            }
            for i in 0..d {
                let (lo, hi) = (default[i] - s[i] as i64, default[i] + s[i] as i64);
                let v = o[i] as i64;
                if !(v > lo && v < hi) {
                    return Err(TensorError::value(
                        op,
                        format!(
                            "invalid output_size \"{o:?}\" (dim {i} must be between {lo} and {hi})"
                        ),
                    ));
                }
            }
            o.to_vec()
        }
    };
    let full = [&x.shape()[..nd - d], &out[..]].concat();
    let numel = crate::shape::check_contiguous(op, &full)?;
    crate::shape::checked_nbytes(op, &full, numel, x.dtype().size())?;
    let plane: usize = out.iter().product();
    if indices.numel() > 0 && plane > 0 {
        let bad = indices.lt(0i64)?.logical_or(&indices.ge(plane as i64)?)?;
        if bad.any()?.item::<bool>()? {
            return Err(TensorError::index(
                op,
                format!("Found an invalid max index (the output planes hold {plane} elements)"),
            ));
        }
    }
    Ok(out)
}

impl Tensor {
    /// `F.multi_margin_loss(x, target, p, margin, weight, reduction)`: for
    /// each sample, `sum_{d != y} max(0, margin - x[y] + x[d])^p * w[y] / C`
    /// (a NaN hinge counts 0, as PyTorch's `z > 0` test). f32 and f64, as
    /// PyTorch's CPU.
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let x = tensor![[0.1, 0.2, 0.4, 0.8]]?;
    /// let l = x.multi_margin_loss(&tensor![3i64]?, 1, 1.0, None, Reduction::Mean)?;
    /// assert!((l.item::<f32>()? - 0.325).abs() < 1e-6);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn multi_margin_loss(
        &self,
        target: &Tensor,
        p: i64,
        margin: f64,
        weight: Option<&Tensor>,
        reduction: Reduction,
    ) -> Result<Tensor> {
        multi_margin_loss_of(self, target, p, margin, weight, reduction)
    }

    /// `F.instance_norm`: each `(sample, channel)` plane normalised by its
    /// own statistics (`use_input_stats`) or by the running ones; the
    /// running statistics, where given, updated with the batch's mean of
    /// the per-sample updates (PyTorch's `at::instance_norm`).
    #[allow(clippy::too_many_arguments)]
    pub fn instance_norm(
        &self,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        use_input_stats: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<Tensor> {
        instance_norm_of(
            self,
            running_mean,
            running_var,
            weight,
            bias,
            use_input_stats,
            momentum,
            eps,
        )
    }

    /// `F.local_response_norm(x, size, alpha, beta, k)`: `x / (k + alpha *
    /// mean of x^2 over `size` neighbouring channels)^beta`.
    pub fn local_response_norm(&self, size: i64, alpha: f64, beta: f64, k: f64) -> Result<Tensor> {
        local_response_norm_of(self, size, alpha, beta, k)
    }

    /// `F.lp_pool1d(x, norm_type, kernel_size, stride, ceil_mode)`: the
    /// `norm_type`-norm of each window (`(sum x^p)^(1/p)` through an average
    /// pool times the window's size, as PyTorch).
    pub fn lp_pool1d(
        &self,
        norm_type: f64,
        kernel: usize,
        stride: Option<usize>,
        ceil_mode: bool,
    ) -> Result<Tensor> {
        lp_pool1d_of(self, norm_type, kernel, stride, ceil_mode)
    }

    /// `F.lp_pool2d`: as [`Tensor::lp_pool1d`] over two spatial dims.
    pub fn lp_pool2d(
        &self,
        norm_type: f64,
        kernel: &[usize],
        stride: Option<&[usize]>,
        ceil_mode: bool,
    ) -> Result<Tensor> {
        lp_pool2d_of(self, norm_type, kernel, stride, ceil_mode)
    }

    /// `F.max_unpool1d(x, indices, kernel_size, stride, padding,
    /// output_size)`: zeros with each value at its index (in the flattened
    /// output plane), the inverse of `max_pool1d_with_indices`.
    pub fn max_unpool1d(
        &self,
        indices: &Tensor,
        kernel: usize,
        stride: Option<usize>,
        padding: usize,
        output_size: Option<&[usize]>,
    ) -> Result<Tensor> {
        let stride = stride.map(|s| [s]);
        let stride = stride.as_ref().map(|s| &s[..]);
        max_unpool_of(self, indices, &[kernel], stride, &[padding], output_size, 1)
    }

    /// `F.max_unpool2d`: as [`Tensor::max_unpool1d`] over two spatial dims.
    ///
    /// ```
    /// use strata_tensor::{tensor, PoolOptions};
    /// let x = tensor![[[[1., 5.], [3., 2.]]]]?;
    /// let (v, i) = x.max_pool2d_with_indices(&PoolOptions::new(&[2]))?;
    /// let y = v.max_unpool2d(&i, &[2], None, &[0], None)?;
    /// assert_eq!(y.to_vec::<f32>()?, [0., 5., 0., 0.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn max_unpool2d(
        &self,
        indices: &Tensor,
        kernel: &[usize],
        stride: Option<&[usize]>,
        padding: &[usize],
        output_size: Option<&[usize]>,
    ) -> Result<Tensor> {
        max_unpool_of(self, indices, kernel, stride, padding, output_size, 2)
    }

    /// `F.bilinear(x1, x2, weight, bias)`: `x1^T A_o x2 + b_o` for each
    /// output feature `o` (`weight` `[out, in1, in2]`), over any leading
    /// dims shared by `x1` and `x2`.
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let w = tensor![[[1., 2.], [3., 4.]]]?;
    /// let y = tensor![[1., 0.]]?.bilinear(&tensor![[0., 1.]]?, &w, None)?;
    /// assert_eq!(y.to_vec::<f32>()?, [2.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn bilinear(&self, x2: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        bilinear_of(self, x2, weight, bias)
    }
}

/// `F.bilinear` of tensors or variables: checked by [`bilinear_check`], then
/// `einsum("...i,oij,...j->...o", x1, weight, x2) + bias`.
pub fn bilinear_of<T: Composite>(x1: &T, x2: &T, weight: &T, bias: Option<&T>) -> Of<T> {
    bilinear_check(x1.data(), x2.data(), weight.data(), bias.map(T::data))?;
    let operands = [x1.clone(), weight.clone(), x2.clone()];
    let y = crate::ops::contract::einsum("...i,oij,...j->...o", &operands)?;
    match bias {
        Some(b) => y.add(b),
        None => Ok(y),
    }
}

/// `F.bilinear`'s operand checks (dtypes, devices, shapes) in PyTorch's
/// order (its `_trilinear` path).
pub fn bilinear_check(x1: &Tensor, x2: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<()> {
    const OP: &str = "bilinear";
    let mut all = vec![x1, x2, w];
    all.extend(b);
    if all.iter().any(|t| t.dtype() != x1.dtype()) {
        let names: Vec<String> = all.iter().map(|t| t.dtype().to_string()).collect();
        return Err(TensorError::dtype(
            OP,
            format!(
                "All tensors must have the same dtype, got {}",
                names.join(", ")
            ),
        ));
    }
    if x1.dtype() == DType::Bool && x1.numel() > 0 && x2.numel() > 0 {
        return Err(TensorError::dtype(OP, "\"bmm\" not implemented for 'Bool'"));
    }
    for t in &all[1..] {
        crate::ops::elementwise::same_device(OP, x1, t)?;
    }
    let (x1, x2, w, b) = (x1.shape(), x2.shape(), w.shape(), b.map(|b| b.shape()));
    if x1.len() != x2.len() {
        return Err(TensorError::shape(
            OP,
            format!(
                "bilinear(): input dimensions do not match: got {} and {}",
                x1.len(),
                x2.len()
            ),
        ));
    }
    if x1.is_empty() {
        return Err(TensorError::shape(
            OP,
            "bilinear(): the inputs need at least one dim (the features)",
        ));
    }
    let n = x1.len();
    if x1[..n - 1] != x2[..n - 1] {
        return Err(TensorError::shape(
            OP,
            format!("bilinear(): input batch dimensions do not match: got {x1:?} and {x2:?}"),
        ));
    }
    if w.len() != 3 {
        return Err(TensorError::shape(
            OP,
            format!("bilinear(): weight must be 3-D [out, in1, in2], got {w:?}"),
        ));
    }
    if x1[n - 1] == 0 || x2[n - 1] == 0 {
        // PyTorch's `_trilinear` reshapes an input to [-1, features],
        // which no input of 0 features allows.
        return Err(TensorError::shape(
            OP,
            format!("bilinear(): inputs of no features ({x1:?} and {x2:?}) are not supported: PyTorch cannot reshape them to [-1, 0]"),
        ));
    }
    if x1[n - 1] != w[1] {
        return Err(TensorError::shape(
            OP,
            format!(
                "bilinear(): input1 size does not match weight size: got {} but expected {}",
                x1[n - 1],
                w[1]
            ),
        ));
    }
    if x2[n - 1] != w[2] {
        return Err(TensorError::shape(
            OP,
            format!(
                "bilinear(): input2 size does not match weight size: got {} but expected {}",
                x2[n - 1],
                w[2]
            ),
        ));
    }
    if let Some(b) = b {
        if b.len() != 1 || b[0] != w[0] {
            return Err(TensorError::shape(
                OP,
                format!(
                    "bilinear(): bias size does not match weight size: got {b:?} but expected [{}]",
                    w[0]
                ),
            ));
        }
    }
    Ok(())
}

/// `F.instance_norm` of a tensor or a variable: batch norm of the
/// `[1, N * C, ...]` view with the statistics, weight and bias repeated per
/// sample (the weight and bias differentiable), the running statistics
/// updated in place with the batch's mean of the per-sample updates.
#[allow(clippy::too_many_arguments)]
pub fn instance_norm_of<T: Composite>(
    x: &T,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&T>,
    bias: Option<&T>,
    use_input_stats: bool,
    momentum: f64,
    eps: f64,
) -> Of<T> {
    instance_norm_check(
        x.shape(),
        running_mean.is_some() && running_var.is_some(),
        use_input_stats,
    )?;
    let (b, c) = (x.shape()[0] as i64, x.shape()[1] as i64);
    let rm = running_mean.map(|t| t.repeat(&[b])).transpose()?;
    let rv = running_var.map(|t| t.repeat(&[b])).transpose()?;
    let w = weight.map(|v| v.repeat(&[b])).transpose()?;
    let bi = bias.map(|v| v.repeat(&[b])).transpose()?;
    let mut shape: Vec<i64> = x.shape().iter().map(|&s| s as i64).collect();
    shape[1] = b * c;
    shape[0] = 1;
    // PyTorch's instance_norm does not check eps (batch_norm does).
    let out = crate::ops::norms::batch_norm_any_eps(
        &x.contiguous()?.view(&shape)?,
        rm.as_ref(),
        rv.as_ref(),
        w.as_ref(),
        bi.as_ref(),
        use_input_stats,
        momentum,
        eps,
    )?;
    // Only a batch's own statistics update the running ones (PyTorch's
    // `at::instance_norm`); without them the running ones are read, never
    // written (for an empty batch their mean over no samples is NaN).
    if use_input_stats {
        instance_norm_write_back(running_mean, rm.as_ref(), b, c)?;
        instance_norm_write_back(running_var, rv.as_ref(), b, c)?;
    }
    out.view(&x.shape().iter().map(|&s| s as i64).collect::<Vec<_>>())
}

fn instance_norm_write_back(
    running: Option<&Tensor>,
    repeated: Option<&Tensor>,
    b: i64,
    c: i64,
) -> Result<()> {
    if let (Some(r), Some(rep)) = (running, repeated) {
        r.copy_(&rep.view(&[b, c])?.mean(Some(&[0]), false)?)?;
    }
    Ok(())
}

type Of<T> = std::result::Result<T, <T as Composite>::Error>;

/// `F.local_response_norm` on a tensor or a variable (PyTorch's
/// composition: an average pool of the squares over the channels).
pub fn local_response_norm_of<T: Composite>(
    x: &T,
    size: i64,
    alpha: f64,
    beta: f64,
    k: f64,
) -> Of<T> {
    if x.shape().len() >= 3 && x.shape().contains(&0) {
        // PyTorch returns an empty input as it is, before the size is used.
        return Ok(x.clone());
    }
    local_response_norm_check(x.data(), size)?;
    let div = x.mul(x)?;
    let (lo, hi) = (size / 2, (size - 1) / 2);
    let s = size as usize;
    let sh = x.shape();
    let padded = (sh[1] as i64)
        .checked_add(lo)
        .and_then(|n| n.checked_add(hi));
    let div = if hi as usize >= sh[1] - 1 && padded.is_some() {
        // Every channel's window holds all the channels: the padded pool
        // (whose padding alone can outgrow memory for a huge size, where
        // PyTorch fails to allocate) is their sum over `size`. A padded
        // length past i64 goes to the pad, which refuses it as PyTorch's.
        div.sum(Some(&[1]), true)?.div_scalar(size as f64)?
    } else if sh.len() == 3 {
        div.unsqueeze(1)?
            .pad_with(&[0, 0, lo, hi], 0.0.into())?
            .avg_pool2d(&PoolOptions::new(&[s, 1]).stride(&[1]))?
            .squeeze_dims(&[1])?
    } else {
        let v = div.view(&[sh[0] as i64, 1, sh[1] as i64, sh[2] as i64, -1])?;
        let v = v
            .pad_with(&[0, 0, 0, 0, lo, hi], 0.0.into())?
            .avg_pool3d(&PoolOptions::new(&[s, 1, 1]).stride(&[1]))?
            .squeeze_dims(&[1])?;
        v.view(&sh.iter().map(|&d| d as i64).collect::<Vec<_>>())?
    };
    let div = div.mul_scalar(alpha)?.add_scalar(k)?.pow_scalar(beta)?;
    x.div(&div)
}

/// `F.lp_pool1d` on a tensor or a variable (PyTorch's composition).
pub fn lp_pool1d_of<T: Composite>(
    x: &T,
    norm_type: f64,
    kernel: usize,
    stride: Option<usize>,
    ceil_mode: bool,
) -> Of<T> {
    lp_norm_type_check("lp_pool1d", norm_type)?;
    let mut o = PoolOptions::new(&[kernel]).ceil_mode(ceil_mode);
    if let Some(s) = stride {
        o = o.stride(&[s]);
    }
    if norm_type.is_infinite() {
        // The pool's checks and output size, then its windows' extreme.
        let shape = x.avg_pool1d(&o)?;
        return lp_extreme(
            x,
            &shape,
            &[kernel],
            &[stride.unwrap_or(kernel)],
            norm_type < 0.0,
        );
    }
    let out = x.pow_scalar(norm_type)?.avg_pool1d(&o)?;
    lp_finish(&out, kernel as f64, norm_type)
}

/// PyTorch 2.15's `lp_pool*d` refuses a `norm_type` of 0 (its power
/// average would be `x^0`).
fn lp_norm_type_check(op: &'static str, norm_type: f64) -> Result<()> {
    if norm_type == 0.0 {
        return Err(TensorError::value(
            op,
            format!("norm_type must be a non-zero value, but got {norm_type:?}"),
        ));
    }
    Ok(())
}

/// `lp_pool*d` for an infinite `norm_type`, as PyTorch 2.15 computes it:
/// `max_pool(|x|)` for +inf, `-max_pool(-|x|)` (the windows' least
/// magnitude) for -inf, NaN propagating. `pooled` is the average pool of
/// `x` with the same options (its checks passed; its shape is the
/// output's); the windows are `x`'s unfolded by `kernel` and `stride`,
/// padded on the right with -inf where `ceil_mode` lets the last one run
/// past the input.
fn lp_extreme<T: Composite>(
    x: &T,
    pooled: &T,
    kernel: &[usize],
    stride: &[usize],
    negative: bool,
) -> Of<T> {
    let out = pooled.shape().to_vec();
    if out.contains(&0) {
        return Ok(pooled.clone());
    }
    let d = kernel.len();
    let nd = x.shape().len();
    let a = if negative { x.abs()?.neg()? } else { x.abs()? };
    // F.pad's order: the last dim's (left, right) first.
    let mut pad = Vec::with_capacity(2 * d);
    for i in (0..d).rev() {
        let reach = (out[nd - d + i] - 1) * stride[i] + kernel[i];
        pad.extend([0, reach.saturating_sub(x.shape()[nd - d + i]) as i64]);
    }
    let a = if pad.iter().any(|&p| p > 0) {
        a.pad_with(&pad, f64::NEG_INFINITY.into())?
    } else {
        a
    };
    let mut w = a;
    for i in 0..d {
        w = w.unfold((nd - d + i) as i64, kernel[i] as i64, stride[i] as i64)?;
    }
    let mut shape: Vec<i64> = out.iter().map(|&v| v as i64).collect();
    shape.push(-1);
    let m = w
        .reshape(&shape)?
        .sort_values(-1, true, false)?
        .select(-1, 0)?;
    if negative {
        m.neg()
    } else {
        Ok(m)
    }
}

/// `F.lp_pool2d` on a tensor or a variable (PyTorch's composition; a
/// kernel of one or two sizes).
pub fn lp_pool2d_of<T: Composite>(
    x: &T,
    norm_type: f64,
    kernel: &[usize],
    stride: Option<&[usize]>,
    ceil_mode: bool,
) -> Of<T> {
    let k = match kernel {
        [a] => [*a, *a],
        [a, b] => [*a, *b],
        _ => {
            return Err(TensorError::value(
                "lp_pool2d",
                format!("kernel_size must be an int or a tuple of 2 ints, got {kernel:?}"),
            )
            .into())
        }
    };
    lp_norm_type_check("lp_pool2d", norm_type)?;
    let mut o = PoolOptions::new(&k).ceil_mode(ceil_mode);
    if let Some(s) = stride {
        o = o.stride(s);
    }
    if norm_type.is_infinite() {
        let pooled = x.avg_pool2d(&o)?;
        let st = match stride {
            Some([a]) => [*a, *a],
            Some([a, b, ..]) => [*a, *b],
            _ => k,
        };
        return lp_extreme(x, &pooled, &k, &st, norm_type < 0.0);
    }
    let out = x.pow_scalar(norm_type)?.avg_pool2d(&o)?;
    lp_finish(&out, (k[0] * k[1]) as f64, norm_type)
}

type LossOf<T> = std::result::Result<T, <T as Composite>::Error>;

/// `F.multi_margin_loss` of a tensor or a variable (the target, the
/// weights and the mask are constants; a NaN hinge counts 0).
pub fn multi_margin_loss_of<T: Composite>(
    x: &T,
    target: &Tensor,
    p: i64,
    margin: f64,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> LossOf<T> {
    let (nc, t, w, batched) = multi_margin_plan(x.data(), target, p, weight)?;
    let x = x.reshape(&nc)?;
    let xt = x.gather(1, &t)?;
    // PyTorch's order: (margin - x[y]) + x[d].
    let z = xt.neg()?.add_scalar(margin)?.add(&x)?;
    let zeros = T::constant(z.data().zeros_like(None)?);
    // The target's own hinge is left out by the selection, not by a
    // product with 0 (an infinite margin makes it inf, and inf * 0 NaN).
    let counted = z
        .data()
        .gt(0.0)?
        .logical_and(&non_target_mask(&t, nc[1], DType::Bool)?)?;
    let h = T::where_cond(&counted, &z, &zeros)?;
    let h = if p == 2 { h.mul(&h)? } else { h };
    let h = match w {
        Some(w) => h.mul(&T::constant(w))?,
        None => h,
    };
    let per = h.sum(Some(&[1]), false)?.div_scalar(nc[1] as f64)?;
    margin_reduce(per, reduction, batched)
}

/// `F.multilabel_margin_loss` of a tensor or a variable (the hinges of the
/// counted pairs; a NaN hinge counts 0).
pub fn multilabel_margin_loss_of<T: Composite>(
    x: &T,
    target: &Tensor,
    reduction: Reduction,
) -> LossOf<T> {
    let (nc, tc, counts, batched) = multilabel_margin_plan(x.data(), target)?;
    let x = x.reshape(&nc)?;
    // PyTorch's order: (1 - x[j]) + x[d].
    let z = x
        .gather(1, &tc)?
        .neg()?
        .add_scalar(1.0)?
        .unsqueeze(2)?
        .add(&x.unsqueeze(1)?)?;
    let on = counts.logical_and(&z.data().gt(0.0)?)?;
    let zeros = T::constant(z.data().zeros_like(None)?);
    let h = T::where_cond(&on, &z, &zeros)?;
    let per = h.sum(Some(&[1, 2]), false)?.div_scalar(nc[1] as f64)?;
    margin_reduce(per, reduction, batched)
}

/// The per-sample losses of a batch, a 0-d one of a single sample, or
/// their sum or mean.
fn margin_reduce<T: Composite>(per: T, reduction: Reduction, batched: bool) -> LossOf<T> {
    match reduction {
        Reduction::None if batched => Ok(per),
        Reduction::None => per.reshape(&[]),
        Reduction::Sum => per.sum(None, false),
        Reduction::Mean => per.mean(None, false),
    }
}

/// `F.max_unpool{1,2}d` of a tensor or a variable: PyTorch's checks, then
/// each value scattered at its index into constant zeros (so the gradient
/// is gathered at the indices); `d` spatial dims.
pub fn max_unpool_of<T: Composite>(
    x: &T,
    indices: &Tensor,
    kernel: &[usize],
    stride: Option<&[usize]>,
    padding: &[usize],
    output_size: Option<&[usize]>,
    d: usize,
) -> Of<T> {
    let out = max_unpool_plan(x.data(), indices, kernel, stride, padding, output_size, d)?;
    let lead = &x.shape()[..x.shape().len() - d];
    let mut flat: Vec<i64> = lead.iter().map(|&s| s as i64).collect();
    // The input plane's size (not -1: an empty batch leaves it ambiguous).
    flat.push(x.shape()[lead.len()..].iter().product::<usize>() as i64);
    let plane: usize = out.iter().product();
    let mut zshape: Vec<usize> = lead.to_vec();
    zshape.push(plane);
    let zeros = T::constant(Tensor::zeros(&zshape, x.dtype(), x.device())?);
    if plane == 0 || x.shape().contains(&0) {
        // Nothing to scatter (PyTorch reads no index for an empty output).
        let mut shape: Vec<i64> = lead.iter().map(|&s| s as i64).collect();
        shape.extend(out.iter().map(|&s| s as i64));
        return zeros.view(&shape);
    }
    let dim = lead.len() as i64;
    let y = zeros.scatter(dim, &indices.reshape(&flat)?, &x.reshape(&flat)?)?;
    let mut shape: Vec<i64> = lead.iter().map(|&s| s as i64).collect();
    shape.extend(out.iter().map(|&s| s as i64));
    y.view(&shape)
}

/// `(sign(out) * relu(|out|)) * size` to the power `1 / p`, as `F.lp_pool*d`.
fn lp_finish<T: Composite>(out: &T, size: f64, p: f64) -> Of<T> {
    out.sign()?
        .mul(&out.abs()?.relu()?)?
        .mul_scalar(size)?
        .pow_scalar(1.0 / p)
}

/// `adaptive_max_pool{1,2}d`'s checks and, for each output position, the
/// flat input-plane positions of its window (`[O, K]`, short windows
/// padded with their last position, which leaves the maximum and its index
/// unchanged): PyTorch's windows `floor(i * n / o) .. ceil((i + 1) * n / o)`.
/// Returns the output's spatial sizes too. Shared with strata-autograd.
pub fn adaptive_max_windows(
    x: &Tensor,
    output_size: &[usize],
    d: usize,
) -> Result<(Tensor, Vec<usize>)> {
    let op = if d == 1 {
        "adaptive_max_pool1d"
    } else {
        "adaptive_max_pool2d"
    };
    let nd = x.ndim();
    if nd != d + 1 && nd != d + 2 {
        return Err(TensorError::shape(
            op,
            format!(
                "Expected {} to {} dimensions, but got {nd}-dimensional tensor for argument #1 'self' (while checking arguments for {op})",
                d + 1,
                d + 2
            ),
        ));
    }
    for i in 1..nd {
        if x.shape()[i] == 0 {
            return Err(TensorError::shape(
                op,
                format!(
                    "{op}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes {:?} with dimension {i} being empty",
                    x.shape()
                ),
            ));
        }
    }
    if !x.dtype().is_float() {
        return Err(TensorError::dtype(
            op,
            format!(
                "\"{op}\" not implemented for {}; convert the input to a float dtype",
                x.dtype()
            ),
        ));
    }
    let out: Vec<usize> = match output_size.len() {
        1 => vec![output_size[0]; d],
        n if n == d => output_size.to_vec(),
        n => {
            return Err(TensorError::value(
                op,
                format!("{op}: output_size must be {d} ints, got {n}"),
            ))
        }
    };
    // The output (and its i64 indices) must be a tensor that can exist, as
    // PyTorch's sizes `[.., 1, o]` for 1-d: an output size beyond i64::MAX
    // is a negative one passed through usize; then no window table is
    // built for an output that cannot be allocated.
    let mut full: Vec<usize> = x.shape()[..nd - d].to_vec();
    full.extend(&out);
    if let Some(o) = out.iter().find(|&&o| o > crate::shape::MAX_NUMEL) {
        return Err(TensorError::value(
            op,
            format!(
                "Trying to create tensor with negative dimension {}: output_size {out:?}",
                *o as i64
            ),
        ));
    }
    let numel = crate::shape::check_contiguous(op, &full)?;
    crate::shape::checked_nbytes(op, &full, numel, 8)?;
    let oom = |what: &str| {
        TensorError::overflow(
            op,
            format!("{what} of output size {out:?} do not fit in host memory"),
        )
    };
    let spatial = &x.shape()[nd - d..];
    // Per dim: the window positions [o, K_j] (i * n fits: o and n are
    // sizes of tensors that exist, and the rows are allocated first).
    let mut tables: Vec<(Vec<Vec<usize>>, usize)> = Vec::with_capacity(d);
    for (&n, &o) in spatial.iter().zip(&out) {
        let mut rows: Vec<Vec<usize>> = Vec::new();
        rows.try_reserve_exact(o).map_err(|_| oom("the windows"))?;
        for i in 0..o {
            let s = (i as u128 * n as u128 / o as u128) as usize;
            let e = ((i as u128 + 1) * n as u128).div_ceil(o as u128) as usize;
            rows.push((s..e).collect());
        }
        let k = rows.iter().map(Vec::len).max().unwrap_or(1);
        tables.push((rows, k));
    }
    let kk: usize = tables.iter().map(|t| t.1).product();
    let oo: usize = out.iter().product();
    let mut pos = Vec::new();
    oo.checked_mul(kk)
        .and_then(|len| pos.try_reserve_exact(len).ok())
        .ok_or_else(|| oom("the window positions"))?;
    if d == 1 {
        for row in &tables[0].0 {
            for k in 0..tables[0].1 {
                pos.push(row[k.min(row.len() - 1)] as i64);
            }
        }
    } else {
        let w = spatial[1];
        for rh in &tables[0].0 {
            for rw in &tables[1].0 {
                for kh in 0..tables[0].1 {
                    for kw in 0..tables[1].1 {
                        let (h, c) = (rh[kh.min(rh.len() - 1)], rw[kw.min(rw.len() - 1)]);
                        pos.push((h * w + c) as i64);
                    }
                }
            }
        }
    }
    Ok((Tensor::from_slice(&pos, &[oo, kk], x.device())?, out))
}

/// The indices of `adaptive_max_pool*d` (PyTorch's: the first maximum of a
/// window, its last NaN where it holds NaN), in the input's flattened
/// spatial plane, shaped as the output. Shared with strata-autograd.
pub fn adaptive_max_indices(x: &Tensor, output_size: &[usize], d: usize) -> Result<Tensor> {
    let (pos, out) = adaptive_max_windows(x, output_size, d)?;
    let nd = x.ndim();
    let lead = &x.shape()[..nd - d];
    let mut shape: Vec<i64> = lead.iter().map(|&s| s as i64).collect();
    shape.extend(out.iter().map(|&s| s as i64));
    let (oo, kk) = (pos.shape()[0], pos.shape()[1]);
    let b: usize = lead.iter().product();
    if oo == 0 || b == 0 {
        let s: Vec<usize> = shape.iter().map(|&v| v as usize).collect();
        return Tensor::zeros(&s, DType::I64, x.device());
    }
    let plane: i64 = x.shape()[nd - d..].iter().product::<usize>() as i64;
    let xf = x.reshape(&[b as i64, plane])?;
    let g = xf
        .index_select(1, &pos.reshape(&[-1])?)?
        .reshape(&[b as i64, oo as i64, kk as i64])?;
    let first = g.max_dim(-1, true)?.1;
    let isnan = g.isnan()?;
    let has = isnan.any_dim(-1, true)?;
    let last = isnan
        .flip(&[-1])?
        .to_dtype(DType::U8)?
        .max_dim(-1, true)?
        .1
        .neg()?
        .add(kk as i64 - 1)?;
    let k = Tensor::where_cond(&has, &last, &first)?;
    let idx = pos
        .unsqueeze(0)?
        .expand(&[b as i64, oo as i64, kk as i64])?
        .gather(-1, &k)?;
    idx.reshape(&shape)
}

impl Tensor {
    /// `F.adaptive_max_pool1d(x, output_size, return_indices=True)`: the
    /// maximum of each of PyTorch's adaptive windows and its index in the
    /// input's length (the first maximum; a window's last NaN).
    ///
    /// ```
    /// use strata_tensor::tensor;
    /// let (v, i) = tensor![[[1., 3., 3., 2., 5.]]]?.adaptive_max_pool1d(&[2])?;
    /// assert_eq!(v.to_vec::<f32>()?, [3., 5.]);
    /// assert_eq!(i.to_vec::<i64>()?, [1, 4]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn adaptive_max_pool1d(&self, output_size: &[usize]) -> Result<(Tensor, Tensor)> {
        adaptive_max_pool_of(self, output_size, 1)
    }

    /// `F.adaptive_max_pool2d(x, output_size, return_indices=True)`: as
    /// [`Tensor::adaptive_max_pool1d`] over two spatial dims (indices in
    /// the flattened `H * W` plane).
    pub fn adaptive_max_pool2d(&self, output_size: &[usize]) -> Result<(Tensor, Tensor)> {
        adaptive_max_pool_of(self, output_size, 2)
    }
}

/// `adaptive_max_pool{1,2}d` of a tensor or a variable: the values, a
/// `gather` at the indices (so the gradient goes to each window's
/// maximum), and the indices; an empty result is constant zeros.
pub fn adaptive_max_pool_of<T: Composite>(
    x: &T,
    output_size: &[usize],
    d: usize,
) -> std::result::Result<(T, Tensor), T::Error> {
    let idx = adaptive_max_indices(x.data(), output_size, d)?;
    let nd = x.shape().len();
    let mut flat: Vec<i64> = x.shape()[..nd - d].iter().map(|&s| s as i64).collect();
    flat.push(-1);
    let shape: Vec<i64> = idx.shape().iter().map(|&s| s as i64).collect();
    if idx.numel() == 0 {
        let zeros = Tensor::zeros(idx.shape(), x.dtype(), x.device())?;
        return Ok((T::constant(zeros), idx));
    }
    let v = x
        .reshape(&flat)?
        .gather((nd - d) as i64, &idx.reshape(&flat)?)?
        .reshape(&shape)?;
    Ok((v, idx))
}

/// `multilabel_margin_loss`'s checks and masks: the input as `[N, C]`, the
/// targets' gather indices `[N, C]` (0 past each row's first negative
/// label), and the condition `[N, C, C]` under which the hinge of label
/// slot `a` against class `d` counts (slot `a` before the row's first
/// negative label, class `d` not among the row's labels); whether the
/// result of `reduction = None` is 1-D. Shared with strata-autograd.
pub fn multilabel_margin_plan(
    x: &Tensor,
    target: &Tensor,
) -> Result<(Vec<i64>, Tensor, Tensor, bool)> {
    const OP: &str = "multilabel_margin_loss";
    let nd = x.ndim();
    let ok = (nd == 2 && x.shape()[1] != 0) || (nd == 1 && x.shape()[0] != 0) || nd == 0;
    if !ok {
        return Err(TensorError::shape(
            OP,
            format!(
                "Expected non-empty vector or matrix with optional 0-dim batch size, but got: {:?}",
                x.shape()
            ),
        ));
    }
    let (n, c) = if nd <= 1 {
        (1, if nd == 0 { 1 } else { x.shape()[0] })
    } else {
        (x.shape()[0], x.shape()[1])
    };
    let target_ok = if nd <= 1 {
        target.ndim() <= 1 && target.numel() == c
    } else {
        target.ndim() == 2 && target.shape() == [n, c]
    };
    if !target_ok {
        return Err(TensorError::shape(
            OP,
            format!(
                "inconsistent target size: {:?} for input of size: {:?}",
                target.shape(),
                x.shape()
            ),
        ));
    }
    if !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Err(TensorError::dtype(
            OP,
            format!("\"multilabel_margin_loss_forward_out_frame\" not implemented for {}; convert the input to f32 or f64", x.dtype()),
        ));
    }
    if target.dtype() != DType::I64 {
        return Err(TensorError::dtype(
            OP,
            format!(
                "expected scalar type Long but found {} for the target",
                target.dtype()
            ),
        ));
    }
    crate::ops::elementwise::same_device(OP, x, target)?;
    let (ni, ci) = (n as i64, c as i64);
    let t = target.reshape(&[ni, ci])?;
    // A label slot counts while every label up to it is non-negative.
    let valid = t
        .ge(0i64)?
        .to_dtype(DType::I64)?
        .cumprod(1, None)?
        .gt(0i64)?;
    // Every entry, even past the first -1, must be a class or -1.
    let bad = t.lt(-1i64)?.logical_or(&t.ge(ci)?)?;
    if n > 0 && bad.any()?.item::<bool>()? {
        return Err(TensorError::index(
            OP,
            format!("argument #2 'target' is out of range (the classes are 0..{c}, or -1)"),
        ));
    }
    let tc = Tensor::where_cond(&valid, &t, 0i64)?;
    let is_target = Tensor::zeros(&[n, c], DType::I64, x.device())?
        .scatter_add(1, &tc, &valid.to_dtype(DType::I64)?)?
        .gt(0i64)?;
    let counts = valid
        .unsqueeze(2)?
        .logical_and(&is_target.logical_not()?.unsqueeze(1)?)?;
    Ok((vec![ni, ci], tc, counts, target.ndim() > 1))
}

impl Tensor {
    /// `F.multilabel_margin_loss(x, target, reduction)`: for each sample,
    /// `sum_{labels j} sum_{classes d not labels} max(0, 1 - x[j] + x[d]) / C`,
    /// the labels being the target's entries before its first negative one
    /// (a NaN hinge counts 0, as PyTorch's `z > 0` test). f32 and f64.
    ///
    /// ```
    /// use strata_tensor::{tensor, Reduction};
    /// let x = tensor![[0.1, 0.2, 0.4, 0.8]]?;
    /// let y = tensor![[3i64, 0, -1, 1]]?;
    /// let l = x.multilabel_margin_loss(&y, Reduction::Mean)?;
    /// assert!((l.item::<f32>()? - 0.85).abs() < 1e-6);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn multilabel_margin_loss(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        multilabel_margin_loss_of(self, target, reduction)
    }
}

/// How `embedding_bag` reduces each bag (PyTorch's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EmbeddingBagMode {
    /// `"sum"` (with optional per-sample weights).
    Sum,
    /// `"mean"` (over the bag's non-padding entries; an empty bag is 0).
    #[default]
    Mean,
    /// `"max"` (elementwise over the bag; an empty bag is 0).
    Max,
}

/// `embedding_bag`'s checks and its plan: the kept entries' rows of the
/// weight (`rows`, i64) and bags (`bags`, i64), the bag count, each bag's
/// count of kept entries and the kept entries' positions (to take their
/// per-sample weights). Entries equal to `padding_idx` are dropped. Shared with
/// strata-autograd.
pub struct EmbeddingBagPlan {
    /// The weight rows of the kept entries.
    pub rows: Tensor,
    /// The bag of each kept entry.
    pub bags: Tensor,
    /// The number of bags.
    pub num_bags: usize,
    /// Each bag's number of kept entries, `[B, 1]` in the weight's dtype.
    pub counts: Tensor,
    /// The flat positions of the kept entries among the indices.
    pub kept: Tensor,
}

/// Plans `F.embedding_bag(indices, weight, offsets, ...)` (PyTorch's checks;
/// the indices and offsets are read to the host).
pub fn embedding_bag_plan(
    indices: &Tensor,
    weight: &Tensor,
    offsets: Option<&Tensor>,
    mode: EmbeddingBagMode,
    per_sample_weights: Option<&Tensor>,
    include_last_offset: bool,
    padding_idx: Option<i64>,
) -> Result<EmbeddingBagPlan> {
    const OP: &str = "embedding_bag";
    if weight.ndim() != 2 {
        return Err(TensorError::shape(
            OP,
            format!(
                "weight has to be a 2D Tensor, but got Tensor of dimension {}",
                weight.ndim()
            ),
        ));
    }
    if !matches!(indices.dtype(), DType::I64 | DType::I32) {
        return Err(TensorError::dtype(
            OP,
            format!(
                "expected the indices to be int64 or int32, got {}",
                indices.dtype()
            ),
        ));
    }
    crate::ops::elementwise::same_device(OP, weight, indices)?;
    let ne = weight.shape()[0] as i64;
    let pad = match padding_idx {
        None => None,
        Some(p) if p >= -ne && p < ne => Some(if p < 0 { p + ne } else { p }),
        Some(p) => {
            return Err(TensorError::value(
                OP,
                format!("padding_idx must be within the number of embeddings ({ne}), got {p}"),
            ))
        }
    };
    let idx: Vec<i64> = indices
        .to_dtype(DType::I64)?
        .contiguous()?
        .to_vec::<i64>()?;
    let n = idx.len();
    let (starts, ends, b): (Vec<usize>, Vec<usize>, usize) = match indices.ndim() {
        2 => {
            if offsets.is_some() {
                return Err(TensorError::value(OP, "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length sequences."));
            }
            let (rows, len) = (indices.shape()[0], indices.shape()[1]);
            if len == 0 {
                // PyTorch builds the offsets as arange(0, n, len).
                return Err(TensorError::value(
                    OP,
                    "step must be nonzero (2-D indices need at least one column)",
                ));
            }
            (
                (0..rows).map(|r| r * len).collect(),
                (0..rows).map(|r| (r + 1) * len).collect(),
                rows,
            )
        }
        1 => {
            let Some(o) = offsets else {
                return Err(TensorError::value(
                    OP,
                    "offsets has to be a 1D Tensor but got None",
                ));
            };
            if o.ndim() != 1 {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "offsets has to be a 1D Tensor, but got Tensor of dimension {}",
                        o.ndim()
                    ),
                ));
            }
            // i32 or i64, either with either indices (PyTorch promotes).
            if !matches!(o.dtype(), DType::I32 | DType::I64) {
                return Err(TensorError::dtype(
                    OP,
                    format!(
                        "Expected tensor for argument #1 'offsets' to have one of the following scalar types: Long, Int; but got {} instead",
                        o.dtype()
                    ),
                ));
            }
            let ov: Vec<i64> = o.to_dtype(DType::I64)?.contiguous()?.to_vec::<i64>()?;
            if let Some(&first) = ov.first() {
                if first != 0 {
                    return Err(TensorError::value(
                        OP,
                        format!("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, got {first}"),
                    ));
                }
            }
            if let Some(&last) = ov.last() {
                if last > n as i64 {
                    return Err(TensorError::value(
                        OP,
                        format!("offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {last}"),
                    ));
                }
            }
            if ov.windows(2).any(|w| w[1] < w[0]) {
                return Err(TensorError::value(
                    OP,
                    format!("offsets must be non-decreasing, got {ov:?}"),
                ));
            }
            if include_last_offset && ov.last().is_some_and(|&l| l != n as i64) {
                // PyTorch's documented contract; its CPU kernels disagree
                // among themselves otherwise (the sum stops at the last
                // offset or runs to the end, the mean's count runs to the end).
                return Err(TensorError::value(
                    OP,
                    format!("include_last_offset: the last offset must be the number of indices ({n}), got {ov:?}"),
                ));
            }
            let b = if include_last_offset {
                ov.len().saturating_sub(1)
            } else {
                ov.len()
            };
            let starts: Vec<usize> = ov[..b].iter().map(|&v| v as usize).collect();
            // The last bag runs to the end of the indices, even with
            // include_last_offset (PyTorch's: the last offset only counts).
            let ends: Vec<usize> = (0..b)
                .map(|i| if i + 1 < b { ov[i + 1] as usize } else { n })
                .collect();
            (starts, ends, b)
        }
        d => {
            return Err(TensorError::shape(
                OP,
                format!("input has to be 1D or 2D Tensor, but got Tensor of dimension {d}"),
            ))
        }
    };
    if let Some((k, &v)) = idx.iter().enumerate().find(|(_, &v)| v < 0 || v >= ne) {
        return Err(TensorError::index(
            OP,
            format!("Index {k} of input takes value {v} which is not in the valid range [0, {ne})"),
        ));
    }
    if let Some(w) = per_sample_weights {
        if mode != EmbeddingBagMode::Sum {
            return Err(TensorError::value(
                OP,
                format!("embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' (got mode='{}')", if mode == EmbeddingBagMode::Mean { "mean" } else { "max" }),
            ));
        }
        if w.shape() != indices.shape() {
            return Err(TensorError::shape(
                OP,
                format!("embedding_bag: If per_sample_weights ({:?}) is not None, then it must have the same shape as the input ({:?})", w.shape(), indices.shape()),
            ));
        }
        if w.dtype() != weight.dtype() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "expected per_sample_weights of the weight's dtype {}, got {}",
                    weight.dtype(),
                    w.dtype()
                ),
            ));
        }
        crate::ops::elementwise::same_device(OP, weight, w)?;
    }
    // The bag of each entry: the last start at or before it.
    let mut bag_of = vec![usize::MAX; n];
    for (bi, (&st, &en)) in starts.iter().zip(&ends).enumerate() {
        for slot in bag_of.iter_mut().take(en).skip(st) {
            *slot = bi;
        }
    }
    let kept: Vec<usize> = (0..n)
        .filter(|&k| bag_of[k] != usize::MAX && Some(idx[k]) != pad)
        .collect();
    let dev = weight.device();
    let rows: Vec<i64> = kept.iter().map(|&k| idx[k]).collect();
    let bags: Vec<i64> = kept.iter().map(|&k| bag_of[k] as i64).collect();
    let mut counts = vec![0.0f64; b];
    for &bg in &bags {
        counts[bg as usize] += 1.0;
    }
    let m = kept.len();
    let keep = Tensor::from_slice(
        &kept.iter().map(|&k| k as i64).collect::<Vec<_>>(),
        &[m],
        dev,
    )?;
    Ok(EmbeddingBagPlan {
        rows: Tensor::from_slice(&rows, &[m], dev)?,
        bags: Tensor::from_slice(&bags, &[m], dev)?,
        num_bags: b,
        counts: Tensor::from_slice(&counts, &[b, 1], dev)?.to_dtype(weight.dtype())?,
        kept: keep,
    })
}

impl Tensor {
    /// `F.embedding_bag(indices, weight, offsets, mode, per_sample_weights,
    /// include_last_offset, padding_idx)` with `self` the weight: the sum,
    /// mean or maximum of each bag's embeddings (bags: the rows of 2-D
    /// indices, or the runs of 1-D indices starting at `offsets`); entries
    /// equal to `padding_idx` are left out, an empty bag is zeros.
    ///
    /// ```
    /// use strata_tensor::{tensor, Device, EmbeddingBagMode, Tensor};
    /// let w = Tensor::arange(0.0, 6.0, 1.0, None, Device::Cpu)?.reshape(&[3, 2])?;
    /// let i = tensor![0i64, 2, 1]?;
    /// let o = tensor![0i64, 2]?;
    /// let y = w.embedding_bag(&i, Some(&o), EmbeddingBagMode::Sum, None, false, None)?;
    /// assert_eq!(y.to_vec::<f32>()?, [4., 6., 2., 3.]);
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn embedding_bag(
        &self,
        indices: &Tensor,
        offsets: Option<&Tensor>,
        mode: EmbeddingBagMode,
        per_sample_weights: Option<&Tensor>,
        include_last_offset: bool,
        padding_idx: Option<i64>,
    ) -> Result<Tensor> {
        embedding_bag_of(
            self,
            indices,
            offsets,
            mode,
            per_sample_weights,
            include_last_offset,
            padding_idx,
        )
    }
}

/// `F.embedding_bag` of a weight that is a tensor or a variable (the
/// per-sample weights likewise): the kept rows gathered by `index_select`
/// and added into their bags by `index_add` (`Max`: an `amax`
/// `scatter_reduce`), so the gradients are those ops'.
pub fn embedding_bag_of<T: Composite>(
    weight: &T,
    indices: &Tensor,
    offsets: Option<&Tensor>,
    mode: EmbeddingBagMode,
    per_sample_weights: Option<&T>,
    include_last_offset: bool,
    padding_idx: Option<i64>,
) -> Of<T> {
    let psw = per_sample_weights.map(|w| w.data().clone());
    let p = embedding_bag_plan(
        indices,
        weight.data(),
        offsets,
        mode,
        psw.as_ref(),
        include_last_offset,
        padding_idx,
    )?;
    let d = weight.shape()[1];
    let emb = weight.index_select(0, &p.rows)?;
    let zeros = T::constant(Tensor::zeros(
        &[p.num_bags, d],
        weight.dtype(),
        weight.device(),
    )?);
    let one: crate::scalar::Scalar = 1.into();
    match mode {
        EmbeddingBagMode::Sum => {
            let emb = match per_sample_weights {
                // The kept entries' weights, `[kept, 1]`.
                Some(w) => {
                    let m = p.rows.numel() as i64;
                    let w = w
                        .reshape(&[-1])?
                        .index_select(0, &p.kept)?
                        .reshape(&[m, 1])?;
                    emb.mul(&w)?
                }
                None => emb,
            };
            zeros.index_add(0, &p.bags, &emb, one)
        }
        EmbeddingBagMode::Mean => {
            let s = zeros.index_add(0, &p.bags, &emb, one)?;
            s.div(&T::constant(p.counts.clamp(Some(1.0), None::<f64>)?))
        }
        EmbeddingBagMode::Max => {
            let idx = p
                .bags
                .unsqueeze(1)?
                .expand(&[p.bags.numel() as i64, d as i64])?;
            zeros.scatter_reduce(0, &idx, &emb, crate::ops::ScatterReduce::Amax, false)
        }
    }
}
