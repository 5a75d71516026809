//! Normalisation, losses and dropout (issue 12), as plain tensor functions
//! (strata-autograd records them): `layer_norm` (fused kernels,
//! [`NnKernel::LayerNorm`] and its backward), `cross_entropy` (a fused
//! log-softmax + NLL kernel that writes each row's logsumexp and loss, never
//! the probabilities), `nll_loss`, `mse_loss`, `dropout`.
//!
//! Statistics are kept in the Acc dtype: f64 for f64 inputs, f32 for f32,
//! f16 and bf16 (PyTorch's accumulate types).

use super::elementwise::{launch, same_device};
use crate::backend::NnKernel;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::shape::broadcast_shapes;
use crate::tensor::Tensor;

/// How a loss reduces its per-element values (PyTorch's `reduction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    /// One loss per element.
    None,
    /// The (weighted) mean.
    #[default]
    Mean,
    /// The sum.
    Sum,
}

/// The statistics dtype of a float dtype.
pub fn acc_dtype(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

fn float_only(op: &'static str, t: &Tensor) -> Result<()> {
    float_dtype_only(op, t.dtype())
}

/// [`float_only`] for a dtype asked for rather than an input's.
fn float_dtype_only(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(TensorError::dtype(
            op,
            format!("expected a floating-point input, got {dtype}; convert it with to_dtype"),
        ))
    }
}

/// What cross-entropy's forward keeps for its backward: the per-row
/// logsumexp in two parts (Acc, `[rows, 2]`), the class targets as i64
/// `[rows]`, and the mean reduction's denominator (Σ w\[t\] over non-ignored
/// rows, 0-d Acc).
#[derive(Clone, Debug)]
pub struct CrossEntropySaved {
    /// Each row's logsumexp as `[m, s]`: m the row's maximum, s = log Σ
    /// exp(x - m), the logsumexp m + s. Kept apart so that the backward's
    /// softmax exp((x - m) - s) does not lose s where |m| is huge (a row
    /// [-1e30, -1e30] has probabilities 1/2, though m + s rounds to m). NaN
    /// in both for a row holding NaN or +inf; `[-inf, 0]` for an all -inf row.
    pub lse: Tensor,
    /// The targets, flattened to the rows, as i64.
    pub target: Tensor,
    /// Σ w\[t_i\] over the rows not ignored.
    pub total_weight: Tensor,
}

/// Arguments of [`Tensor::cross_entropy`] beyond input and target.
#[derive(Clone, Copy, Debug)]
pub struct CrossEntropyArgs<'a> {
    /// Per-class weights `[C]` (input's dtype).
    pub weight: Option<&'a Tensor>,
    /// Targets equal to this are ignored (-100 by default).
    pub ignore_index: i64,
    /// The reduction (mean by default).
    pub reduction: Reduction,
    /// Label smoothing ε in [0, 1] (negative or NaN acts as 0, as in
    /// PyTorch; above 1 is an error).
    pub label_smoothing: f64,
}

impl Default for CrossEntropyArgs<'_> {
    fn default() -> Self {
        CrossEntropyArgs {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
            label_smoothing: 0.0,
        }
    }
}

/// Label smoothing must be at most 1 (PyTorch's check); a negative value or
/// NaN acts as 0, as in PyTorch, whose `label_smoothing > 0.0` is false for
/// both (`F.cross_entropy(x, t, label_smoothing=nan)` is the unsmoothed
/// loss, and so are its gradients).
fn check_label_smoothing(op: &'static str, eps: f64) -> Result<()> {
    if eps > 1.0 {
        return Err(TensorError::value(
            op,
            format!(
                "label_smoothing must be in [0, 1], got {eps}; pass a value such as 0.1, or 0.0 for none"
            ),
        ));
    }
    Ok(())
}

/// Logits as contiguous `[rows, C]` (class dim moved last), with the shape
/// of the rows (input's shape without the class dim).
fn class_rows(op: &'static str, x: &Tensor) -> Result<(Tensor, Vec<usize>, usize)> {
    match x.ndim() {
        0 => Err(TensorError::shape(
            op,
            "the input must be (C), (N, C) or (N, C, d1, ...), got a 0-d tensor",
        )),
        // Rows are counted rather than left to -1: with no class (C = 0) a
        // -1 would be ambiguous.
        1 => Ok((
            x.reshape(&[1, x.shape()[0] as i64])?.contiguous()?,
            vec![],
            x.shape()[0],
        )),
        n => {
            let c = x.shape()[1];
            let mut perm: Vec<i64> = vec![0];
            perm.extend(2..n as i64);
            perm.push(1);
            let rows_shape: Vec<usize> = perm[..n - 1]
                .iter()
                .map(|&d| x.shape()[d as usize])
                .collect();
            let rows: usize = rows_shape.iter().product();
            let t = x
                .permute(&perm)?
                .contiguous()?
                .reshape(&[rows as i64, c as i64])?;
            Ok((t, rows_shape, c))
        }
    }
}

/// The inverse of [`class_rows`]: `[rows, C]` back to input's shape.
fn from_class_rows(t: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if shape.len() == 1 {
        return t.reshape(&[shape[0] as i64]);
    }
    let n = shape.len();
    let mut moved: Vec<i64> = vec![shape[0] as i64];
    moved.extend(shape[2..].iter().map(|&s| s as i64));
    moved.push(shape[1] as i64);
    let t = t.reshape(&moved)?;
    let mut perm: Vec<i64> = vec![0, n as i64 - 1];
    perm.extend(1..n as i64 - 1);
    t.permute(&perm)
}

/// Checks layer norm's input and parameters (the forward's rules, shared by
/// its backward): a float input whose trailing dims are the non-empty
/// `normalized_shape`; each parameter given on the input's device, of shape
/// `normalized_shape`, of the input's dtype or f32 beside f16/bf16 input, all
/// of one dtype (PyTorch rejects an f16 weight beside an f32 bias, and the
/// reverse). Returns the parameters' dtype, if any was given.
fn layer_norm_operands<const N: usize>(
    op: &'static str,
    x: &Tensor,
    normalized_shape: &[usize],
    params: [(&str, Option<&Tensor>); N],
) -> Result<Option<DType>> {
    // PyTorch's CPU layer_norm first checks a mixed-dtype call (the first
    // parameter given has another dtype than the input): every parameter
    // must then be f32 ("mixed dtype (CPU): expect parameter to have scalar
    // type of Float") and the input f16 or bf16 ("all inputs must share same
    // datatype"), before any shape (fuzz_conformance_s80: an f32 input [2]
    // with normalized_shape [2, 3, 1] and a u8 weight is a dtype error).
    let first = params.iter().find_map(|&(_, t)| t);
    if first.is_some_and(|p| p.dtype() != x.dtype()) {
        for (name, t) in params {
            let Some(t) = t else { continue };
            if t.dtype() != DType::F32 {
                return Err(TensorError::dtype(
                    op,
                    format!(
                        "the {name} is {} but the input is {}: parameters of another dtype than \
                         the input must be f32 (for an f16/bf16 input)",
                        t.dtype(),
                        x.dtype()
                    ),
                ));
            }
        }
        if !matches!(x.dtype(), DType::F16 | DType::BF16) {
            return Err(TensorError::dtype(
                op,
                format!(
                    "f32 parameters need an f16 or bf16 input, got {}; the input and the \
                     parameters must share a dtype",
                    x.dtype()
                ),
            ));
        }
    }
    // Then PyTorch's order: the shapes (normalized_shape, the parameters',
    // the input's trailing dims), then the dtypes (the parameters' against
    // the input's, then the input's own): a 0-d i32 input with
    // normalized_shape [1] is a shape error (fuzz_ops s3401_empty_0d_0298).
    let k = normalized_shape.len();
    if k == 0 || k > x.ndim() || x.shape()[x.ndim() - k..] != *normalized_shape {
        return Err(TensorError::shape(
            op,
            format!(
                "normalized_shape {normalized_shape:?} must be non-empty and equal the trailing dims of the input {:?}",
                x.shape()
            ),
        ));
    }
    for (name, t) in params {
        let Some(t) = t else { continue };
        same_device(op, x, t)?;
        if t.shape() != normalized_shape {
            return Err(TensorError::shape(
                op,
                format!(
                    "the {name} has shape {:?}, expected {normalized_shape:?}",
                    t.shape()
                ),
            ));
        }
    }
    let mut wdt = None;
    for (name, t) in params {
        let Some(t) = t else { continue };
        let ok = (t.dtype() == x.dtype()
            || (t.dtype() == DType::F32 && matches!(x.dtype(), DType::F16 | DType::BF16)))
            && wdt.is_none_or(|d| d == t.dtype());
        if !ok {
            return Err(TensorError::dtype(
                op,
                format!("the {name} is {} but the input is {}", t.dtype(), x.dtype()),
            ));
        }
        wdt = Some(wdt.map_or(t.dtype(), |d: DType| d.promote(t.dtype())));
    }
    float_only(op, x)?;
    Ok(wdt)
}

/// Checks class targets and returns them as contiguous i64 `[rows]`.
///
/// `long_only`: the targets must be i64 (see [`nd_targets_long_only`]),
/// checked after their shape and before their values, as PyTorch does.
fn class_targets(
    op: &'static str,
    target: &Tensor,
    rows_shape: &[usize],
    classes: usize,
    ignore_index: i64,
    long_only: bool,
) -> Result<Tensor> {
    if !matches!(target.dtype(), DType::I64 | DType::U8) {
        return Err(TensorError::dtype(
            op,
            format!(
                "class targets must be int64 (or uint8), not {}; convert with to_dtype(DType::I64)",
                target.dtype()
            ),
        ));
    }
    if target.shape() != rows_shape {
        return Err(TensorError::shape(
            op,
            format!(
                "the target has shape {:?}, expected {rows_shape:?} (the input's shape without the class dim)",
                target.shape()
            ),
        ));
    }
    if long_only && target.dtype() != DType::I64 {
        return Err(TensorError::dtype(
            op,
            format!(
                "class targets of an input of 3 or more dims must be int64, not {} (PyTorch's \
                 (N, C, d1, ...) loss reads them as int64: \"expected scalar type Long but found Byte\"); \
                 convert with to_dtype(DType::I64)",
                target.dtype()
            ),
        ));
    }
    let t = target
        .to_dtype_contiguous(DType::I64)?
        .reshape(&[-1])?
        .contiguous()?;
    // Every target in [0, classes) or equal to ignore_index: known without a
    // device read when the range is cached (host data, randint, or an
    // earlier check of these very targets).
    let known_ok = t
        .known_value_range_besides(ignore_index)
        .is_some_and(|(lo, hi)| lo >= 0 && hi < classes as i64);
    if t.numel() > 0 && !known_ok {
        let stamp = t.storage().write_stamp();
        if classes == 0 {
            // No class: only ignored targets are valid (PyTorch's loss is
            // then that of no row), and no in-range value can stand in for
            // them, so every target must equal ignore_index.
            check_all_ignored(op, &t, ignore_index, "the input has no class (C = 0)")?;
            return Ok(t);
        }
        let checked = Tensor::where_cond(&t.eq(ignore_index)?, 0i64, &t)?;
        let (lo, hi) = super::index::read_extremes(&checked)?;
        if lo < 0 || hi >= classes as i64 {
            let bad = if lo < 0 { lo } else { hi };
            return Err(TensorError::index(
                op,
                format!("target {bad} is out of bounds for {classes} classes (and is not ignore_index {ignore_index})"),
            ));
        }
        // What was read holds until the targets are written again: the
        // backward's check of the same targets needs no second read.
        t.remember_value_range_besides(lo, hi, ignore_index, stamp);
    }
    Ok(t)
}

/// Whether the class targets of `x` must be i64: PyTorch computes the loss
/// of an input of 3 or more dims (N, C, d1, ...) with `nll_loss2d`, which
/// reads its targets as int64 and refuses u8 ones ("expected scalar type Long
/// but found Byte"), except where a reduced loss returns before it reads
/// them (no target; an unreduced loss reads them even then). Inputs of 1 or
/// 2 dims take u8 targets.
fn nd_targets_long_only(x: &Tensor, target: &Tensor, reduction: Reduction) -> bool {
    x.ndim() >= 3 && (reduction == Reduction::None || target.numel() > 0)
}

/// With no class, only ignored targets are valid (PyTorch's loss is then
/// that of no row): the first target (non-empty `t`) that is not
/// `ignore_index` is an index error; `why` says what has no class.
fn check_all_ignored(op: &'static str, t: &Tensor, ignore_index: i64, why: &str) -> Result<()> {
    let (lo, hi) = super::index::read_extremes(t)?;
    if lo != ignore_index || hi != ignore_index {
        let bad = if lo != ignore_index { lo } else { hi };
        return Err(TensorError::index(
            op,
            format!(
                "target {bad} is out of bounds: {why}, so every target must be ignore_index {ignore_index}"
            ),
        ));
    }
    Ok(())
}

/// PyTorch's `nll_loss_nd` (behind `cross_entropy` and `nll_loss`) views
/// an input of 3 or 5+ dims as `(N, C, 1, -1)`; with no class (C = 0) and
/// a non-empty target that view has no size for -1, and PyTorch 2.15 fails
/// ("size mismatch (got input: [2, 0, 0, 0] , target: [2, 1, 2])"). A 4-d
/// input, (C), (N, C) and empty targets are fine.
fn check_no_class_nd(op: &'static str, x: &Tensor, classes: usize, targets: usize) -> Result<()> {
    let nd = x.ndim();
    if classes == 0 && targets > 0 && (nd == 3 || nd > 4) {
        return Err(TensorError::shape(
            op,
            format!(
                "an input of shape {:?} has no class (C = 0) beside {targets} targets; PyTorch refuses \
                 (N, C, d1, ...) inputs of {nd} dims without classes (only 4-d ones are accepted); \
                 give the input at least one class, or reshape it to (N * d1 * ..., 0) with the target flattened",
                x.shape()
            ),
        ));
    }
    Ok(())
}

/// PyTorch's checks of `nll_loss_nd` (behind `nll_loss` and class-index
/// `cross_entropy`), and of the `nll_loss` it calls for an input of 1 or 2
/// dims, on the shapes and the targets' dtype, in its order; its kernel looks
/// at the input's dtype and the weight's only after these. So an i32 (2, 3)
/// input with 3 targets is a shape error (the batch sizes), not a dtype one
/// (fuzz_conformance_s80's programs with several faults at once).
fn nll_nd_checks(
    op: &'static str,
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
) -> Result<()> {
    let nd = x.ndim();
    if nd == 0 {
        return Err(TensorError::shape(
            op,
            "the input must be (C), (N, C) or (N, C, d1, ...), got a 0-d tensor",
        ));
    }
    if nd != 1 {
        // PyTorch 2.15 reads a 0-d target's batch size as 0 here (sizes()[0]
        // of no sizes): an (N, C) input with N > 0 and a 0-d target is this
        // shape error, with N = 0 it passes on to the checks below.
        let batch = target.shape().first().copied().unwrap_or(0);
        if x.shape()[0] != batch {
            return Err(TensorError::shape(
                op,
                format!(
                    "the input's batch size {} does not match the target's {batch}",
                    x.shape()[0]
                ),
            ));
        }
    }
    if nd > 2 {
        if target.ndim() == 0 || target.shape()[1..] != x.shape()[2..] {
            return Err(TensorError::shape(
                op,
                format!(
                    "the target has shape {:?}, expected {:?} (the input's without the class dim)",
                    target.shape(),
                    [&x.shape()[..1], &x.shape()[2..]].concat()
                ),
            ));
        }
    } else if target.ndim() > 1 {
        return Err(TensorError::shape(
            op,
            format!(
                "the target of an input of {nd} dims must be 0-d or 1-D, got shape {:?}",
                target.shape()
            ),
        ));
    }
    // (PyTorch's (N, C, d1, ...) path checks this before the weight too.)
    if !matches!(target.dtype(), DType::I64 | DType::U8) {
        return Err(TensorError::dtype(
            op,
            format!(
                "class targets must be int64 (or uint8), not {}; convert with to_dtype(DType::I64)",
                target.dtype()
            ),
        ));
    }
    if nd > 2 {
        return Ok(());
    }
    if target.ndim() == 0 && nd == 2 {
        return Err(TensorError::dim(
            op,
            format!(
                "the target is 0-d: it has no batch dim to match the input's {:?}",
                x.shape()
            ),
        ));
    }
    let rows_ok = match (nd, target.ndim()) {
        (1, 1) => target.shape()[0] == 1,
        (1, 0) => true,
        _ => target.shape().first() == x.shape().first(),
    };
    if !rows_ok {
        return Err(TensorError::shape(
            op,
            format!(
                "the target has shape {:?}, expected {:?} for an input of shape {:?}",
                target.shape(),
                if nd == 1 { vec![] } else { vec![x.shape()[0]] },
                x.shape()
            ),
        ));
    }
    let classes = x.shape()[nd - 1];
    if let Some(w) = weight {
        if w.shape() != [classes] {
            return Err(TensorError::shape(
                op,
                format!(
                    "the weight must have shape [{classes}], got {:?}",
                    w.shape()
                ),
            ));
        }
    }
    Ok(())
}

/// A (C) input takes a 1-D target of one element as its 0-d target (PyTorch's
/// nll_loss: "For 1D input, 1D target must have size 1"; the loss of
/// reduction `none` is then 0-d too): that target viewed as 0-d, or `None`
/// to keep the target as it is (also a target of the input's own shape, the
/// class probabilities of a (1) input).
fn one_target(x: &Tensor, target: &Tensor) -> Result<Option<Tensor>> {
    if x.ndim() == 1 && target.shape() == [1] && x.shape() != target.shape() {
        return target.reshape(&[]).map(Some);
    }
    Ok(None)
}

/// PyTorch's checks of `cross_entropy` before its kernels, in its order. A
/// target of the input's very shape is read as class probabilities, whatever
/// its dtype (an i64 target of the input's shape is a dtype error, not a
/// shape one); any other as class indices, which go through `log_softmax`
/// along the class dim (a 0-d input has none: a dim error; an integer input
/// with elements: a dtype error) and then [`nll_nd_checks`].
fn cross_entropy_order_checks(x: &Tensor, target: &Tensor, args: &CrossEntropyArgs) -> Result<()> {
    const OP: &str = "cross_entropy";
    let log_softmax = || -> Result<()> {
        if x.ndim() == 0 {
            return Err(TensorError::dim(
                OP,
                "a 0-d input has no class dim (dim 1) to take log_softmax along",
            ));
        }
        if !x.dtype().is_float() && x.numel() > 0 {
            return float_only(OP, x);
        }
        Ok(())
    };
    if x.shape() == target.shape() {
        if !target.dtype().is_float() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "a target of the input's shape holds class probabilities and must be a float \
                     tensor, got {}",
                    target.dtype()
                ),
            ));
        }
        if args.ignore_index >= 0 {
            // (the message of the check below, made first in PyTorch)
            return check_cross_entropy_prob_ignore(args.ignore_index);
        }
        if x.ndim() == 0 {
            return log_softmax();
        }
        let classes = x.shape()[if x.ndim() == 1 { 0 } else { 1 }];
        if let Some(w) = args.weight {
            if w.shape() != [classes] {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "the weight must have shape [{classes}], got {:?}",
                        w.shape()
                    ),
                ));
            }
        }
        check_label_smoothing(OP, args.label_smoothing)?;
        return log_softmax();
    }
    if args.label_smoothing > 0.0 {
        check_label_smoothing(OP, args.label_smoothing)?;
    }
    log_softmax()?;
    nll_nd_checks(OP, x, target, args.weight)
}

/// Probability targets take no non-negative ignore_index.
fn check_cross_entropy_prob_ignore(ignore_index: i64) -> Result<()> {
    Err(TensorError::value(
        "cross_entropy",
        format!(
            "ignore_index {ignore_index} is not supported for probability targets (PyTorch takes \
             only a negative one); leave it at the default -100"
        ),
    ))
}

/// The class weight PyTorch's loss kernels see for `input` with class-index
/// targets: an input of more than two dims (`(N, C, d1, ...)`, PyTorch's
/// `nll_loss2d` path, which checks only the weight's element count) takes a
/// weight of any shape with one element per class, flattened here to `[C]`;
/// any other weight is returned as given (the losses then check it is
/// `[C]`).
///
/// ```
/// use strata_tensor::{class_weight, Device, Tensor};
/// let x = Tensor::zeros(&[2, 3, 4], strata_tensor::DType::F32, Device::Cpu).unwrap();
/// let w = Tensor::ones(&[3, 1], strata_tensor::DType::F32, Device::Cpu).unwrap();
/// assert_eq!(class_weight(&x, Some(&w)).unwrap().unwrap().shape(), &[3]);
/// ```
pub fn class_weight(input: &Tensor, weight: Option<&Tensor>) -> Result<Option<Tensor>> {
    match weight {
        Some(w) if input.ndim() > 2 && w.ndim() != 1 && w.numel() == input.shape()[1] => {
            Ok(Some(w.reshape(&[-1])?))
        }
        w => Ok(w.cloned()),
    }
}

/// Checks a class weight: `[classes]`, on the input's device and (with
/// `same_dtype`: class-index targets, whose kernels take one dtype) of the
/// input's dtype. With probability targets PyTorch multiplies by the weight
/// as a tensor op, which promotes (an f64 weight of f32 logits gives an f64
/// loss).
fn check_class_weight(
    op: &'static str,
    x: &Tensor,
    w: Option<&Tensor>,
    classes: usize,
    same_dtype: bool,
) -> Result<()> {
    if let Some(w) = w {
        same_device(op, x, w)?;
        if w.shape() != [classes] {
            return Err(TensorError::shape(
                op,
                format!(
                    "the weight must have shape [{classes}], got {:?}",
                    w.shape()
                ),
            ));
        }
        if same_dtype && w.dtype() != x.dtype() {
            return Err(TensorError::dtype(
                op,
                format!(
                    "the weight is {} but the input is {}; they must match",
                    w.dtype(),
                    x.dtype()
                ),
            ));
        }
    }
    Ok(())
}

/// The reduction PyTorch's `nll_loss` kernel runs: a (C) input's single
/// loss under "none" comes from its summing loop (`0 - x[t] * w[t]`, so a
/// log-probability of +0.0 gives +0.0, where the per-row "none" loop of an
/// (N, C) input gives -0.0), the same value otherwise.
fn nll_reduction(x: &Tensor, reduction: Reduction) -> Reduction {
    if x.ndim() == 1 && reduction == Reduction::None {
        Reduction::Sum
    } else {
        reduction
    }
}

fn reduce_loss(per: &Tensor, reduction: Reduction, denom: &Tensor) -> Result<Tensor> {
    match reduction {
        Reduction::None => Ok(per.clone()),
        Reduction::Sum => per.sum(None, false),
        Reduction::Mean => per.sum(None, false)?.div(denom),
    }
}

/// The loss and total weight of a class-index `nll_loss` (and of
/// `cross_entropy`'s NLL term) from the per-row losses `per` and weights
/// `wt` (both `[rows]`, the accumulation dtype; 0 for an ignored row) and the
/// targets `t`: with `None` reduction the losses in `rows_shape`. On the CPU
/// a reduction adds the rows in the order of PyTorch's CPU kernel
/// ([`nll_cascade`]), which shows where losses cancel (1e30 against -1e30);
/// other devices use their sum.
fn nll_reduce(
    per: &Tensor,
    wt: &Tensor,
    t: &Tensor,
    ignore_index: i64,
    reduction: Reduction,
    rows_shape: &[usize],
) -> Result<(Tensor, Tensor)> {
    if reduction == Reduction::None {
        let shape: Vec<i64> = rows_shape.iter().map(|&s| s as i64).collect();
        return Ok((per.reshape(&shape)?, wt.sum(None, false)?));
    }
    if per.device() != crate::Device::Cpu {
        let total = wt.sum(None, false)?;
        return Ok((reduce_loss(per, reduction, &total)?, total));
    }
    let targets = t.to_vec::<i64>()?;
    let kept = |r: usize| targets[r] != ignore_index;
    // Added in the accumulation dtype (f32 or f64); the f32 sums widen to
    // f64 exactly.
    let (loss, total) = if per.dtype() == DType::F64 {
        nll_cascade(&per.to_vec::<f64>()?, &wt.to_vec::<f64>()?, kept)
    } else {
        let (l, w) = nll_cascade(&per.to_vec::<f32>()?, &wt.to_vec::<f32>()?, kept);
        (f64::from(l), f64::from(w))
    };
    let dev = per.device();
    let total = Tensor::scalar(total, per.dtype(), dev)?;
    let loss = Tensor::scalar(loss, per.dtype(), dev)?;
    let loss = match reduction {
        Reduction::Mean => loss.div(&total)?,
        _ => loss,
    };
    Ok((loss, total))
}

/// PyTorch's CPU `nll_loss` sums (`nll_loss_out_frame`, and the same in
/// `nll_loss2d`): each kept row is added to the first of eight partial sums,
/// and after row `b`, for each level `j` whose 4 bits of `b` (`b >> 4j`) are
/// all zero, level `j` is moved up into level `j + 1`. Row 0 therefore
/// reaches the top level on its own, and the levels are added lowest first
/// at the end: row 0's loss is added last. Returns the loss and the weight
/// sums. (PyTorch adds in the input's dtype; this adds in `T`, f32 for the
/// half types.)
fn nll_cascade<T>(loss: &[T], weight: &[T], kept: impl Fn(usize) -> bool) -> (T, T)
where
    T: Copy + Default + std::ops::Add<Output = T>,
{
    const LEVELS: usize = 8;
    let n = loss.len() as u64;
    // CeilLog2: 1 up to 2, else the bits of n - 1.
    let ceil_log2 = if n <= 2 {
        1
    } else {
        64 - (n - 1).leading_zeros()
    };
    let power = 4.max(ceil_log2 / LEVELS as u32);
    let mask = (1u64 << power) - 1;
    let (mut l, mut w) = ([T::default(); LEVELS], [T::default(); LEVELS]);
    for b in 0..loss.len() {
        if !kept(b) {
            continue;
        }
        l[0] = l[0] + loss[b];
        w[0] = w[0] + weight[b];
        for j in 0..LEVELS - 1 {
            if (b as u64) & (mask << (j as u32 * power)) != 0 {
                break;
            }
            l[j + 1] = l[j + 1] + l[j];
            w[j + 1] = w[j + 1] + w[j];
            l[j] = T::default();
            w[j] = T::default();
        }
    }
    let sum = |v: &[T]| v.iter().fold(T::default(), |a, &x| a + x);
    (sum(&l), sum(&w))
}

impl Tensor {
    /// `F.layer_norm(self, normalized_shape, weight, bias, eps)`: over the
    /// trailing dims `normalized_shape`, `(x - mean) / sqrt(var + eps) *
    /// weight + bias` (biased variance). Float only; weight and bias have
    /// shape `normalized_shape` and self's dtype, or f32 for f16/bf16 input.
    pub fn layer_norm(
        &self,
        normalized_shape: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        Ok(self
            .layer_norm_forward(normalized_shape, weight, bias, eps)?
            .0)
    }

    /// [`Tensor::layer_norm`] that also returns the per-row mean and
    /// 1/sqrt(var + eps) (Acc dtype, shape `[rows]`), which its backward needs.
    pub fn layer_norm_forward(
        &self,
        normalized_shape: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        const OP: &str = "layer_norm";
        // Any eps, as PyTorch's `F.layer_norm` takes it: a negative one
        // gives NaN rows where `var + eps < 0` (finite ones elsewhere), a
        // NaN one NaN everywhere; the kernels compute `1 / sqrt(var + eps)`
        // as PyTorch's do.
        let wdt = layer_norm_operands(
            OP,
            self,
            normalized_shape,
            [("weight", weight), ("bias", bias)],
        )?;
        let prep = |t: Option<&Tensor>| -> Result<Option<Tensor>> {
            t.map(|t| {
                t.to_dtype_contiguous(wdt.unwrap_or(t.dtype()))?
                    .contiguous()
            })
            .transpose()
        };
        let (w, b) = (prep(weight)?, prep(bias)?);
        // Saturating: trailing dims of an empty input may multiply past usize
        // (rows is then 0).
        let cols = crate::shape::numel(normalized_shape);
        let rows = self.numel().checked_div(cols).unwrap_or(0);
        let x = self.contiguous()?;
        let acc = acc_dtype(self.dtype());
        let out = Tensor::uninit("layer_norm", self.shape(), self.dtype(), self.device())?;
        let mean = Tensor::uninit("layer_norm", &[rows], acc, self.device())?;
        let rstd = Tensor::uninit("layer_norm", &[rows], acc, self.device())?;
        if rows > 0 && cols > 0 {
            let mut reads = vec![&x, &mean];
            reads.extend(w.iter());
            reads.extend(b.iter());
            let (wa, ba) = (w.as_ref().map(|t| t.arg()), b.as_ref().map(|t| t.arg()));
            let (ma, ra) = (mean.arg(), rstd.arg());
            let _keep = &rstd;
            launch(&out, &reads, |be| {
                be.nn(NnKernel::LayerNorm {
                    out: &out.arg(),
                    mean: &ma,
                    rstd: &ra,
                    x: &x.arg(),
                    weight: wa.as_ref(),
                    bias: ba.as_ref(),
                    rows,
                    cols,
                    eps,
                })
            })?;
        } else if rows > 0 {
            mean.fill_(f64::NAN)?;
            rstd.fill_(f64::NAN)?;
        }
        Ok((out, mean, rstd))
    }

    /// The gradients of [`Tensor::layer_norm`] from the saved input, weight,
    /// mean and rstd: `[dx, dweight, dbias]`, each computed where `needs`
    /// says. dx: one fused kernel per row; dweight/dbias: a column reduction
    /// in two passes (per-part partials, then a sum).
    #[allow(clippy::too_many_arguments)]
    pub fn layer_norm_backward(
        dy: &Tensor,
        x: &Tensor,
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        normalized_shape: &[usize],
        needs: [bool; 3],
    ) -> Result<[Option<Tensor>; 3]> {
        const OP: &str = "layer_norm_backward";
        // The kernels read `rows * cols` elements of dy and x, `rows` of mean
        // and rstd and `cols` of the weight: check every operand against the
        // forward's rules first (an operand from another call is an error,
        // never a read outside its storage).
        layer_norm_operands(OP, x, normalized_shape, [("weight", weight)])?;
        same_device(OP, x, dy)?;
        if dy.shape() != x.shape() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the gradient has shape {:?} but the input has {:?}; pass the gradient of the forward's output",
                    dy.shape(),
                    x.shape()
                ),
            ));
        }
        // Saturating: trailing dims of an empty input may multiply past usize
        // (rows is then 0).
        let cols = crate::shape::numel(normalized_shape);
        let rows = x.numel().checked_div(cols).unwrap_or(0);
        let acc = acc_dtype(x.dtype());
        for (name, t) in [("mean", mean), ("rstd", rstd)] {
            same_device(OP, x, t)?;
            if t.shape() != [rows] || t.dtype() != acc {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "the saved {name} is a {} tensor of shape {:?}, expected {acc} [{rows}] \
                         (one per row of the input {:?}); pass what layer_norm_forward returned for this input",
                        t.dtype(),
                        t.shape(),
                        x.shape()
                    ),
                ));
            }
        }
        let (mean, rstd) = (&mean.contiguous()?, &rstd.contiguous()?);
        let x = x.contiguous()?;
        let dy = dy.to_dtype_contiguous(x.dtype())?.contiguous()?;
        let w = weight.map(|w| w.contiguous()).transpose()?;
        let mut res: [Option<Tensor>; 3] = [None, None, None];
        if needs[0] {
            let dx = Tensor::uninit("layer_norm_backward", x.shape(), x.dtype(), x.device())?;
            if rows > 0 && cols > 0 {
                let wa = w.as_ref().map(|t| t.arg());
                let mut reads = vec![&dy, &x, mean, rstd];
                reads.extend(w.iter());
                launch(&dx, &reads, |be| {
                    be.nn(NnKernel::LayerNormBackward {
                        dx: &dx.arg(),
                        dy: &dy.arg(),
                        x: &x.arg(),
                        mean: &mean.arg(),
                        rstd: &rstd.arg(),
                        weight: wa.as_ref(),
                        rows,
                        cols,
                    })
                })?;
            }
            res[0] = Some(dx);
        }
        if needs[1] || needs[2] {
            // The CPU kernel keeps its per-part partials in f64: rounded to
            // f32 before they are added, partials that cancel (a few rows
            // of opposite sign) would lose what the f64 sums kept.
            let acc = if x.device() == crate::Device::Cpu {
                DType::F64
            } else {
                mean.dtype()
            };
            let parts = rows.clamp(1, 256);
            let dw = Tensor::zeros(&[parts, cols], acc, x.device())?;
            let db = Tensor::zeros(&[parts, cols], acc, x.device())?;
            if rows > 0 && cols > 0 {
                let (dwa, dba) = (dw.arg(), db.arg());
                launch(&dw, &[&db, &dy, &x, mean, rstd], |be| {
                    be.nn(NnKernel::LayerNormParamsBackward {
                        dw: needs[1].then_some(&dwa),
                        db: needs[2].then_some(&dba),
                        dy: &dy.arg(),
                        x: &x.arg(),
                        mean: &mean.arg(),
                        rstd: &rstd.arg(),
                        rows,
                        cols,
                        parts,
                    })
                })?;
            }
            let shape: Vec<i64> = normalized_shape.iter().map(|&s| s as i64).collect();
            let wdt = w.as_ref().map_or(x.dtype(), |w| w.dtype());
            let fin = |t: &Tensor| -> Result<Tensor> {
                t.sum(Some(&[0]), false)?
                    .to_dtype_contiguous(wdt)?
                    .reshape(&shape)
            };
            if needs[1] {
                res[1] = Some(fin(&dw)?);
            }
            if needs[2] {
                res[2] = Some(fin(&db)?);
            }
        }
        Ok(res)
    }

    /// `F.cross_entropy(self, target, weight, ignore_index, reduction,
    /// label_smoothing)` over class logits (C), (N, C) or (N, C, d1, ...)
    /// with class-index targets (i64, or u8 for an input of 1 or 2 dims
    /// unless a label-smoothed, weighted mean reads them as an index, as in
    /// PyTorch) or class-probability targets (a float tensor of self's
    /// shape).
    pub fn cross_entropy(&self, target: &Tensor, args: CrossEntropyArgs) -> Result<Tensor> {
        Ok(self.cross_entropy_forward(target, args)?.0)
    }

    /// The checks [`cross_entropy_forward`](Self::cross_entropy_forward)
    /// makes before it computes anything, in its order: a float input, the
    /// target on the input's device, the label smoothing, the input's rank,
    /// the class weight, and for probability targets (a float `target`) the
    /// input's shape. Class targets' values are checked by the forward
    /// itself. Autograd composes the probability-target loss from recorded
    /// ops and needs only these checks.
    pub fn check_cross_entropy_args(&self, target: &Tensor, args: &CrossEntropyArgs) -> Result<()> {
        const OP: &str = "cross_entropy";
        float_only(OP, self)?;
        same_device(OP, self, target)?;
        check_label_smoothing(OP, args.label_smoothing)?;
        let classes = match self.ndim() {
            0 => return class_rows(OP, self).map(|_| ()),
            1 => self.shape()[0],
            _ => self.shape()[1],
        };
        check_class_weight(OP, self, args.weight, classes, !target.dtype().is_float())?;
        if target.dtype().is_float() && target.shape() != self.shape() {
            return Err(TensorError::shape(
                OP,
                format!(
                    "probability targets must have the input's shape {:?}, got {:?}",
                    self.shape(),
                    target.shape()
                ),
            ));
        }
        // PyTorch: "ignore_index is not supported for floating point target"
        // (a negative one, such as the default -100, is taken).
        if target.dtype().is_float() && args.ignore_index >= 0 {
            return check_cross_entropy_prob_ignore(args.ignore_index);
        }
        Ok(())
    }

    /// [`Tensor::cross_entropy`] with what its backward needs (`None` for
    /// probability targets, whose backward is composed from tensor ops).
    pub fn cross_entropy_forward(
        &self,
        target: &Tensor,
        args: CrossEntropyArgs,
    ) -> Result<(Tensor, Option<CrossEntropySaved>)> {
        const OP: &str = "cross_entropy";
        cross_entropy_order_checks(self, target, &args)?;
        let one = one_target(self, target)?;
        let target = one.as_ref().unwrap_or(target);
        let flat = match target.dtype().is_float() {
            true => args.weight.cloned(),
            false => class_weight(self, args.weight)?,
        };
        let args = CrossEntropyArgs {
            weight: flat.as_ref(),
            ..args
        };
        self.check_cross_entropy_args(target, &args)?;
        let eps = args.label_smoothing.max(0.0);
        let (x, rows_shape, classes) = class_rows(OP, self)?;
        let rows = x.shape()[0];
        let w = args.weight.map(|w| w.contiguous()).transpose()?;
        if target.dtype().is_float() {
            // Each step in PyTorch's dtypes: the log-probabilities in the
            // input's, the smoothed targets in the targets', the products
            // (and the sum) in the promoted one, which is the loss's dtype.
            // A bf16 input's products are rounded to bf16 and summed as a
            // bf16 tensor, in that sum's order: where products cancel
            // (1e30 against -1e30) the order shows.
            let (p, _, _) = class_rows(OP, target)?;
            // PyTorch smooths the targets only when ε > 0 (so a -0.0
            // target keeps its sign otherwise).
            let p = if eps > 0.0 {
                p.mul(1.0 - eps)?.add(eps / classes as f64)?
            } else {
                p
            };
            // log_softmax subtracts the row maximum before the log-sum, so
            // x - lse does not cancel on rows of large logits. It runs along
            // the input's own class dim, as PyTorch's does: on the CPU a
            // 2-byte float's last dim rounds as no other dim does
            // (`SoftmaxMode::round_log_sum`).
            let class_dim = if self.ndim() == 1 { 0 } else { 1 };
            let (logp, _, _) = class_rows(OP, &self.log_softmax(class_dim, None)?)?;
            let mut t = logp.mul(&p)?;
            if let Some(w) = &w {
                t = t.mul(w)?;
            }
            let loss = match args.reduction {
                // Summed over the class dim in the input's layout, as
                // PyTorch sums it: along a dim followed by others (an (N, C,
                // d1, ...) input) its CPU sum adds in another order than
                // along the last.
                Reduction::None => {
                    let all = from_class_rows(&t, self.shape())?.contiguous()?;
                    all.sum(Some(&[class_dim]), false)?.neg()?
                }
                // PyTorch sums every product at once, in the input's layout
                // (N, C, d1, ...), and divides by the number of rows (a
                // Python integer): where losses cancel (1e200 against
                // -1e200) the order shows, and the rows' losses summed one
                // by one would differ.
                Reduction::Sum | Reduction::Mean => {
                    let all = from_class_rows(&t, self.shape())?.contiguous()?;
                    let total = all.sum(None, false)?;
                    let total = if args.reduction == Reduction::Mean {
                        // The mean of no element is NaN, even with rows of
                        // no class.
                        let n = if self.numel() == 0 { 0 } else { rows };
                        total.div(n as f64)?
                    } else {
                        total
                    };
                    total.neg()?
                }
            };
            return Ok((loss, None));
        }
        // PyTorch's view of an (N, 0, d1) input fails before it reads a
        // target.
        check_no_class_nd(OP, self, classes, target.numel())?;
        let long_only = nd_targets_long_only(self, target, args.reduction);
        let t = class_targets(
            OP,
            target,
            &rows_shape,
            classes,
            args.ignore_index,
            long_only,
        )?;
        // PyTorch's smoothed, weighted mean divides by the weights of the
        // kept targets, gathered with the targets as the index
        // (`weight.gather(0, target.masked_select(~ignore_mask))`), and
        // gather refuses a u8 index that holds an element.
        if eps > 0.0
            && w.is_some()
            && args.reduction == Reduction::Mean
            && target.dtype() == DType::U8
            && t.ne(args.ignore_index)?.sum(None, false)?.item::<i64>()? > 0
        {
            return Err(TensorError::dtype(
                OP,
                "a label-smoothed, weighted mean needs int64 class targets, not u8 (PyTorch \
                 gathers the weights with the targets: \"gather(): Expected dtype int32/int64 \
                 for index\"); convert with to_dtype(DType::I64)",
            ));
        }
        let acc = acc_dtype(self.dtype());
        let lse = Tensor::uninit("cross_entropy", &[rows, 2], acc, self.device())?;
        let nll = Tensor::uninit("cross_entropy", &[rows], acc, self.device())?;
        let smooth = Tensor::uninit("cross_entropy", &[rows], acc, self.device())?;
        let wt = Tensor::uninit("cross_entropy", &[rows], acc, self.device())?;
        if rows > 0 {
            let (na, sa, wa) = (nll.arg(), smooth.arg(), wt.arg());
            let wca = w.as_ref().map(|t| t.arg());
            let mut reads = vec![&x, &t, &nll, &smooth, &wt];
            reads.extend(w.iter());
            launch(&lse, &reads, |be| {
                be.nn(NnKernel::CrossEntropy {
                    lse: &lse.arg(),
                    nll: Some(&na),
                    smooth: (eps > 0.0).then_some(&sa),
                    wt: Some(&wa),
                    logits: &x.arg(),
                    target: Some(&t.arg()),
                    weight: wca.as_ref(),
                    ignore_index: args.ignore_index,
                    rows,
                    classes,
                    class_last: self.ndim() <= 2,
                    inner: self.shape().iter().skip(2).product(),
                })
            })?;
        }
        let (nll_loss, total_weight) = nll_reduce(
            &nll,
            &wt,
            &t,
            args.ignore_index,
            nll_reduction(self, args.reduction),
            &rows_shape,
        )?;
        // (1 - ε)·L + (ε / C)·S with L and S each reduced first, as PyTorch
        // does: a zero total weight gives NaN for L's 0/0 even where S/0 is
        // infinite. S's weighted mean divides by the kept rows' weights
        // summed as a tensor of those weights alone (PyTorch's
        // `weight.gather(0, target.masked_select(~ignored)).sum()`), which
        // on the CPU is not the NLL's cascade (elsewhere it is that sum):
        // the ignored rows' zeros are left out, since where they stand
        // changes which lanes of the vectorised sum the weights fall in.
        let loss = if eps > 0.0 {
            let cascaded = self.device() == crate::Device::Cpu;
            let denom = if cascaded && args.reduction == Reduction::Mean && args.weight.is_some() {
                wt.masked_select(&t.ne(args.ignore_index)?)?
                    .sum(None, false)?
            } else {
                total_weight.clone()
            };
            let shape: Vec<i64> = rows_shape.iter().map(|&s| s as i64).collect();
            let s = reduce_loss(&smooth.reshape(&shape)?, args.reduction, &denom)?;
            nll_loss
                .mul(1.0 - eps)?
                .add(&s.mul(eps / classes as f64)?)?
        } else {
            nll_loss
        };
        let loss = loss.to_dtype_contiguous(self.dtype())?;
        Ok((
            loss,
            Some(CrossEntropySaved {
                lse,
                target: t,
                total_weight,
            }),
        ))
    }

    /// The gradient of class-index [`Tensor::cross_entropy`] with respect
    /// to `logits` (self), from the saved logsumexp and targets: one fused
    /// kernel computing, on the fly, PyTorch's chain of nll_loss's gradient
    /// (with weights and smoothing) and log_softmax's (`softmax - one-hot`
    /// in value, with PyTorch's NaNs and zeros' signs: NaN in every class
    /// of a row whose logits hold NaN or +inf, even an ignored row).
    /// `grad` has the loss's shape.
    pub fn cross_entropy_backward(
        &self,
        grad: &Tensor,
        saved: &CrossEntropySaved,
        args: CrossEntropyArgs,
    ) -> Result<Tensor> {
        const OP: &str = "cross_entropy_backward";
        let flat = class_weight(self, args.weight)?;
        let args = CrossEntropyArgs {
            weight: flat.as_ref(),
            ..args
        };
        float_only(OP, self)?;
        same_device(OP, self, grad)?;
        let (x, rows_shape, classes) = class_rows(OP, self)?;
        let rows = x.shape()[0];
        let acc = acc_dtype(self.dtype());
        // The kernel reads `rows` targets and logsumexps and indexes the
        // weight by target: check `saved` against these logits (a `saved`
        // from another call, or edited, is an error, never a read outside a
        // storage).
        for t in [&saved.lse, &saved.target, &saved.total_weight] {
            same_device(OP, self, t)?;
        }
        if saved.lse.shape() != [rows, 2] || saved.lse.dtype() != acc {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the saved logsumexp is a {} tensor of shape {:?}, expected {acc} [{rows}, 2] for logits of shape {:?}; \
                     pass what cross_entropy_forward returned for these logits",
                    saved.lse.dtype(),
                    saved.lse.shape(),
                    self.shape()
                ),
            ));
        }
        if saved.target.dtype() != DType::I64 || saved.target.shape() != [rows] {
            return Err(TensorError::shape(
                OP,
                format!(
                    "the saved targets are a {} tensor of shape {:?}, expected i64 [{rows}] for logits of shape {:?}; \
                     pass what cross_entropy_forward returned for these logits",
                    saved.target.dtype(),
                    saved.target.shape(),
                    self.shape()
                ),
            ));
        }
        check_label_smoothing(OP, args.label_smoothing)?;
        check_class_weight(OP, self, args.weight, classes, true)?;
        // Targets in [0, classes) or ignore_index (checked as the forward does).
        let target = class_targets(
            OP,
            &saved
                .target
                .reshape(&rows_shape.iter().map(|&s| s as i64).collect::<Vec<_>>())?,
            &rows_shape,
            classes,
            args.ignore_index,
            false,
        )?;
        let lse = saved.lse.contiguous()?;
        let g = grad.to_dtype_contiguous(acc)?;
        let coef = match args.reduction {
            Reduction::None => g.reshape(&[-1])?,
            Reduction::Sum => g.reshape(&[1])?,
            Reduction::Mean => g.div(&saved.total_weight)?.reshape(&[1])?,
        }
        .broadcast_to(&[rows])?
        .contiguous()?;
        let eps = args.label_smoothing.max(0.0);
        let w = args.weight.map(|w| w.contiguous()).transpose()?;
        let weight_sum = match &w {
            Some(w) => w
                .to_dtype_contiguous(DType::F64)?
                .sum(None, false)?
                .item::<f64>()?,
            None => classes as f64,
        };
        let dx = Tensor::uninit(
            "cross_entropy_backward",
            x.shape(),
            self.dtype(),
            self.device(),
        )?;
        if rows > 0 {
            let wa = w.as_ref().map(|t| t.arg());
            let mut reads = vec![&x, &lse, &target, &coef];
            reads.extend(w.iter());
            launch(&dx, &reads, |be| {
                be.nn(NnKernel::CrossEntropyBackward {
                    dx: &dx.arg(),
                    logits: &x.arg(),
                    lse: &lse.arg(),
                    target: &target.arg(),
                    weight: wa.as_ref(),
                    coef: &coef.arg(),
                    ignore_index: args.ignore_index,
                    smoothing: eps,
                    weight_sum,
                    rows,
                    classes,
                    // PyTorch's log_softmax runs along dim 1 of (N, C, d1,
                    // ...), the last dim only for (C) and (N, C).
                    class_last: self.ndim() <= 2,
                })
            })?;
        }
        from_class_rows(&dx, self.shape())
    }

    /// `F.nll_loss(self, target, weight, ignore_index, reduction)`:
    /// `loss_i = -w[t_i] * self_i[t_i]` over log-probabilities (C), (N, C)
    /// or (N, C, d1, ...); class targets i64, or u8 for an input of 1 or 2
    /// dims (PyTorch's (N, C, d1, ...) loss refuses u8 targets).
    pub fn nll_loss(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        ignore_index: i64,
        reduction: Reduction,
    ) -> Result<Tensor> {
        const OP: &str = "nll_loss";
        nll_nd_checks(OP, self, target, weight)?;
        let one = one_target(self, target)?;
        let target = one.as_ref().unwrap_or(target);
        let flat = class_weight(self, weight)?;
        let weight = flat.as_ref();
        float_only(OP, self)?;
        same_device(OP, self, target)?;
        let (x, rows_shape, classes) = class_rows(OP, self)?;
        check_class_weight(OP, self, weight, classes, true)?;
        check_no_class_nd(OP, self, classes, target.numel())?;
        let long_only = nd_targets_long_only(self, target, reduction);
        let t = class_targets(OP, target, &rows_shape, classes, ignore_index, long_only)?;
        let (wt, safe) = nll_weights(&t, weight, ignore_index, acc_dtype(self.dtype()))?;
        let per = if classes == 0 {
            // No class: every target is ignore_index (class_targets), so
            // every row's loss and weight is 0, and there is no column to
            // gather.
            wt.clone()
        } else {
            let picked = x.gather(1, &safe.unsqueeze(1)?)?.reshape(&[-1])?;
            Tensor::where_cond(
                &t.eq(ignore_index)?,
                0.0,
                &picked.to_dtype_contiguous(wt.dtype())?.mul(&wt)?.neg()?,
            )?
        };
        let (loss, _) = nll_reduce(
            &per,
            &wt,
            &t,
            ignore_index,
            nll_reduction(self, reduction),
            &rows_shape,
        )?;
        loss.to_dtype_contiguous(self.dtype())
    }

    /// `F.mse_loss(self, target, reduction, weight)`: `(x - y)²` with
    /// broadcasting and promotion (two integer operands rejected); with a
    /// weight of self's shape, `w·(x - y)²` (any dtypes, as PyTorch's
    /// composition) and the weighted mean `Σ w·(x - y)² / Σ w`.
    pub fn mse_loss(
        &self,
        target: &Tensor,
        reduction: Reduction,
        weight: Option<&Tensor>,
    ) -> Result<Tensor> {
        const OP: &str = "mse_loss";
        same_device(OP, self, target)?;
        // PyTorch's kernel needs a float promoted dtype (an integer operand
        // beside a float one is fine); with a weight, F.mse_loss composes
        // sub, pow and mul instead, whose own dtype rules apply.
        // F.mse_loss broadcasts the operands (torch.broadcast_tensors) and
        // checks the weight's shape before its kernel sees a dtype: an i64
        // [2, 3] input with an i64 [5, 1] target is a broadcast error.
        let promoted = self.dtype().promote(target.dtype());
        let shape = broadcast_shapes(OP, self.shape(), target.shape())?;
        if let Some(w) = weight {
            if w.shape() != self.shape() {
                return Err(TensorError::shape(
                    OP,
                    format!(
                        "the weight must have the input's shape {:?}, got {:?}",
                        self.shape(),
                        w.shape()
                    ),
                ));
            }
        }
        if weight.is_none() && !promoted.is_float() {
            return Err(TensorError::dtype(
                OP,
                format!(
                    "mse_loss needs a floating-point operand, got {} and {}",
                    self.dtype(),
                    target.dtype()
                ),
            ));
        }
        // PyTorch broadcasts input and target before anything else, so a
        // 0-d operand beside a dimensioned one promotes as a dimensioned one
        // (f16 [3] with a bf16 0-d target gives f32), and its kernel's
        // TensorIterator lays the result out in the order of the broadcast
        // operands' strides (a transposed input gives a transposed loss).
        // With a weight, F.mse_loss composes `expanded_input -
        // expanded_target` (whose own rules apply: a bool operand is an
        // error); without, its kernel converts both to the promoted dtype.
        let (x, y) = (self.broadcast_to(&shape)?, target.broadcast_to(&shape)?);
        let sq = if let Some(w) = weight {
            let d = x.sub(&y)?;
            d.mul(&d)?.mul(w)?
        } else {
            // One TensorIterator over the converted operands in PyTorch:
            // the square is taken in place, keeping the difference's layout
            // (a `[4, 1]` input of strides `[1, 4]` keeps them).
            let d = x.to_dtype(promoted)?.sub(&y.to_dtype(promoted)?)?;
            d.mul_(&d)?
        };
        match (reduction, weight) {
            (Reduction::None, _) => Ok(sq),
            (Reduction::Sum, _) => sq.sum(None, false),
            (Reduction::Mean, None) => sq.mean(None, false),
            // Σ w·(x - y)² / Σ w, the second sum over the weight itself (of
            // input's shape, even where the target broadcasts it larger).
            (Reduction::Mean, Some(w)) => sq.sum(None, false)?.div(&w.sum(None, false)?),
        }
    }

    /// The keep-mask of [`Tensor::dropout`] for `seed`: element `i` is kept
    /// when the `i`-th uniform f32 of the Philox stream `seed` is `>= p`. The
    /// same (seed, shape) gives the same mask on every device, so a backward
    /// regenerates it instead of storing it.
    pub fn dropout_mask(
        shape: &[usize],
        p: f64,
        seed: u64,
        device: crate::Device,
    ) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(TensorError::value(
                "dropout_mask",
                format!("dropout probability has to be between 0 and 1, but got {p}"),
            ));
        }
        Tensor::rand(shape, DType::F32, seed, device)?.ge(p)
    }

    /// The multiplier that [`Tensor::dropout`] applies for `seed`, of float
    /// `dtype`: `1 / (1 - p)` (rounded to `dtype`, as PyTorch's CPU kernel
    /// rounds it) where [`Tensor::dropout_mask`] keeps an element, 0 where it
    /// drops one (everywhere for p = 1). Also the factor of dropout's
    /// gradient, regenerated from the seed instead of stored.
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let n = Tensor::dropout_noise(&[1000], 0.5, 7, DType::F32, Device::Cpu).unwrap();
    /// let v = n.to_vec::<f32>().unwrap();
    /// assert!(v.iter().all(|&x| x == 0.0 || x == 2.0));
    /// ```
    pub fn dropout_noise(
        shape: &[usize],
        p: f64,
        seed: u64,
        dtype: DType,
        device: crate::Device,
    ) -> Result<Tensor> {
        float_dtype_only("dropout_noise", dtype)?;
        let keep = Tensor::dropout_mask(shape, p, seed, device)?;
        let scale = Tensor::full(&[], 1.0 / (1.0 - p), dtype, device)?;
        Tensor::where_cond(&keep, &scale, 0.0)
    }

    /// `F.dropout(self, p, train)` with the mask drawn from the Philox stream
    /// `seed`: `self * noise`, with [`Tensor::dropout_noise`]'s `1 / (1 - p)`
    /// for kept elements and 0 for dropped ones, so that, as in PyTorch, a
    /// dropped NaN or infinity gives NaN and a dropped negative value -0.0.
    /// Not training, p = 0 or an empty tensor returns self; p = 1 gives
    /// `self * 0` (zeros of any non-float dtype). As in PyTorch, those hold
    /// for every dtype; otherwise the input must be a float tensor.
    ///
    /// ```
    /// use strata_tensor::{Device, Tensor};
    /// let x = Tensor::from_slice(&[-1.0f32, f32::NAN, 2.0], &[3], Device::Cpu).unwrap();
    /// let y = x.dropout(1.0, true, 0).unwrap().to_vec::<f32>().unwrap();
    /// assert!(y[0] == 0.0 && y[0].is_sign_negative() && y[1].is_nan() && y[2] == 0.0);
    /// ```
    pub fn dropout(&self, p: f64, train: bool, seed: u64) -> Result<Tensor> {
        self.dropout_of("dropout", p, train, seed, |s| Ok(s.to_vec()))
    }

    /// `torch.feature_dropout(self, p, train)` (what `F.dropout2d` runs):
    /// [`dropout`](Tensor::dropout) of whole channels, one draw per `(n, c)`
    /// of an `[N, C, *]` input (noise of shape [`feature_dropout_shape`]),
    /// each kept channel scaled by `1 / (1 - p)`. Drawing a mask needs at
    /// least 2 dims ([`TensorError::Shape`]).
    ///
    /// ```
    /// use strata_tensor::{DType, Device, Tensor};
    /// let x = Tensor::ones(&[8, 16, 5], DType::F32, Device::Cpu)?;
    /// let y = x.feature_dropout(0.5, true, 3)?.to_vec::<f32>()?;
    /// // Each channel's five values are all 0 or all 2.
    /// assert!(y.chunks(5).all(|c| c.iter().all(|&v| v == c[0]) && (c[0] == 0.0 || c[0] == 2.0)));
    /// # Ok::<(), strata_tensor::TensorError>(())
    /// ```
    pub fn feature_dropout(&self, p: f64, train: bool, seed: u64) -> Result<Tensor> {
        self.dropout_of("feature_dropout", p, train, seed, feature_dropout_shape)
    }

    /// `F.dropout1d(self, p, train)`: channel dropout of a `[N, C, L]` input
    /// or an unbatched `[C, L]` one; other ranks are [`TensorError::Shape`].
    pub fn dropout1d(&self, p: f64, train: bool, seed: u64) -> Result<Tensor> {
        self.channel_dropout(1, p, train, seed)
    }

    /// `F.dropout2d(self, p, train)`: [`feature_dropout`](Tensor::feature_dropout)
    /// (`[N, C, H, W]`; PyTorch warns for other ranks and runs the same, a
    /// 3-D input taken as `[N, C, L]`).
    pub fn dropout2d(&self, p: f64, train: bool, seed: u64) -> Result<Tensor> {
        self.channel_dropout(2, p, train, seed)
    }

    /// `F.dropout3d(self, p, train)`: channel dropout of a `[N, C, D, H, W]`
    /// input; any other rank is taken as unbatched (PyTorch warns unless it
    /// is 4-D `[C, D, H, W]`).
    pub fn dropout3d(&self, p: f64, train: bool, seed: u64) -> Result<Tensor> {
        self.channel_dropout(3, p, train, seed)
    }

    /// `F.dropout{spatial}d`: channel dropout, through a leading batch dim
    /// of 1 where [`channel_dropout_batched`] says the input has none.
    fn channel_dropout(&self, spatial: usize, p: f64, train: bool, seed: u64) -> Result<Tensor> {
        if channel_dropout_batched(spatial, self.ndim())? {
            return self.feature_dropout(p, train, seed);
        }
        self.unsqueeze(0)?
            .feature_dropout(p, train, seed)?
            .squeeze_dims(&[0])
    }

    /// [`dropout`](Tensor::dropout) with noise of `noise_shape(self.shape())`
    /// broadcast over self.
    fn dropout_of(
        &self,
        op: &'static str,
        p: f64,
        train: bool,
        seed: u64,
        noise_shape: impl FnOnce(&[usize]) -> Result<Vec<usize>>,
    ) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(TensorError::value(
                op,
                format!("dropout probability has to be between 0 and 1, but got {p}"),
            ));
        }
        // PyTorch's `_dropout`: the input itself when nothing is dropped
        // (eval, p = 0, or no element) and zeros of its dtype for p = 1,
        // whatever the dtype; only the scaling needs a float tensor (an
        // integer input with 0 < p < 1 is its "result type Float can't be
        // cast to the desired output type").
        if !train || p == 0.0 || self.numel() == 0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            // PyTorch's `input * zeros({})`: NaN * 0 is NaN, -1 * 0 is -0.0.
            return if self.dtype().is_float() {
                self.mul(0.0)
            } else {
                Tensor::zeros(self.shape(), self.dtype(), self.device())
            };
        }
        let shape = noise_shape(self.shape())?;
        float_only(op, self)?;
        let noise = Tensor::dropout_noise(&shape, p, seed, self.dtype(), self.device())?;
        self.mul(&noise)
    }
}

/// Whether `F.dropout{spatial}d` (1, 2 or 3) takes an input of `ndim` dims
/// as batched (`[N, C, *]`) rather than unbatched (`[C, *]`), PyTorch's
/// rules: dropout1d batched at 3 dims, unbatched at 2, and refuses other
/// ranks ([`TensorError::Shape`]); dropout2d always batched; dropout3d
/// batched at 5 dims only.
pub fn channel_dropout_batched(spatial: usize, ndim: usize) -> Result<bool> {
    match spatial {
        1 if !matches!(ndim, 2 | 3) => Err(TensorError::shape(
            "dropout1d",
            format!("expected a 2-D or 3-D input, got {ndim}-D"),
        )),
        2 => Ok(true),
        _ => Ok(ndim == spatial + 2),
    }
}

/// The shape of `torch.feature_dropout`'s noise for an input of `shape`:
/// `[N, C, 1, ...]`, one draw per channel of each sample; fewer than 2 dims
/// is [`TensorError::Shape`].
pub fn feature_dropout_shape(shape: &[usize]) -> Result<Vec<usize>> {
    if shape.len() < 2 {
        return Err(TensorError::shape(
            "feature_dropout",
            format!("feature dropout needs at least 2 dims ([N, C, ...]), got shape {shape:?}"),
        ));
    }
    let mut s = vec![1; shape.len()];
    s[..2].copy_from_slice(&shape[..2]);
    Ok(s)
}

/// The per-row weights of nll_loss (Acc, `[rows]`, 0 for ignored rows) and
/// the targets with ignored ones replaced by 0 (safe to gather with).
///
/// Errors: [`TensorError::DType`] for targets that are not class indices
/// (i64 or u8; PyTorch: "expected target dtype to be Long or Byte") or
/// an `acc` that is not a float dtype; [`TensorError::Shape`] for a class
/// weight that is not 1-d (PyTorch: "weight tensor should be defined
/// either for all classes or no classes"); [`TensorError::Index`] for a
/// target outside the weight's classes.
pub fn nll_weights(
    t: &Tensor,
    weight: Option<&Tensor>,
    ignore_index: i64,
    acc: DType,
) -> Result<(Tensor, Tensor)> {
    const OP: &str = "nll_weights";
    if !matches!(t.dtype(), DType::I64 | DType::U8) {
        return Err(TensorError::dtype(
            OP,
            format!(
                "the targets must be class indices (i64 or u8), got {}; convert them with \
                 to_dtype(DType::I64)",
                t.dtype()
            ),
        ));
    }
    if !acc.is_float() {
        return Err(TensorError::dtype(
            OP,
            format!("the weights' dtype must be a float dtype (acc_dtype of the input), got {acc}"),
        ));
    }
    if let Some(w) = weight.filter(|w| w.ndim() != 1) {
        return Err(TensorError::shape(
            OP,
            format!(
                "the class weight must be 1-d (one weight per class), got shape {:?}",
                w.shape()
            ),
        ));
    }
    let ignored = t.eq(ignore_index)?;
    let safe = Tensor::where_cond(&ignored, 0i64, t)?;
    let w = match weight {
        // No class (an empty weight): valid only where every target is
        // ignored, and then there is no weight to select.
        Some(w) if w.numel() == 0 => {
            if t.numel() > 0 {
                check_all_ignored(
                    "nll_weights",
                    t,
                    ignore_index,
                    "the class weight is empty (no class)",
                )?;
            }
            Tensor::zeros(t.shape(), acc, t.device())?
        }
        Some(w) => w.to_dtype_contiguous(acc)?.index_select(0, &safe)?,
        None => Tensor::ones(t.shape(), acc, t.device())?,
    };
    Ok((
        Tensor::where_cond(&ignored, 0.0, &w)?.to_dtype_contiguous(acc)?,
        safe,
    ))
}
