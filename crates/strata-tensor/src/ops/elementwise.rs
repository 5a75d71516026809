//! Element-wise ops: out-of-place, in-place (`_` suffix), comparisons, `where`.

use crate::backend::{Backend, BinaryOp, UnaryOp};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use crate::ops::table::{binary_op_table, unary_op_table, BinaryDTypes, UnaryDTypes};
use crate::scalar::Scalar;
use crate::shape::broadcast_shapes;
use crate::storage::AccessGuard;
use crate::tensor::Tensor;

/// The second operand of a binary op: a tensor or a Python-like scalar.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A tensor (broadcast against the first operand).
    Tensor(&'a Tensor),
    /// A scalar (takes part in type promotion with lower priority).
    Scalar(Scalar),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}

macro_rules! operand_from_scalar {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(x: $t) -> Self {
                Operand::Scalar(Scalar::from(x))
            }
        }
    )*};
}
operand_from_scalar!(Scalar, f32, f64, i32, i64, u8, bool, half::f16, half::bf16);

impl Operand<'_> {
    fn shape(&self) -> &[usize] {
        match self {
            Operand::Tensor(t) => t.shape(),
            Operand::Scalar(_) => &[],
        }
    }
    pub(crate) fn dtype(&self) -> DType {
        match self {
            Operand::Tensor(t) => t.dtype(),
            Operand::Scalar(s) => s.promotion_dtype(),
        }
    }
}

/// PyTorch's `result_type`: tensors with dims outrank 0-d tensors, which
/// outrank scalars, unless the lower-ranked operand is of a higher category.
pub(crate) fn result_type(ops: &[Operand]) -> DType {
    let mut groups: [Option<DType>; 3] = [None; 3];
    for op in ops {
        let (g, d) = match op {
            Operand::Tensor(t) if t.ndim() > 0 => (0, t.dtype()),
            Operand::Tensor(t) => (1, t.dtype()),
            Operand::Scalar(s) => (2, s.promotion_dtype()),
        };
        groups[g] = Some(groups[g].map_or(d, |x| x.promote(d)));
    }
    fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
        match (higher, lower) {
            (None, l) => l,
            (h, None) => h,
            (Some(h), Some(l)) => {
                if h.is_float() {
                    Some(h)
                } else if h == DType::Bool || l.is_float() {
                    Some(h.promote(l))
                } else {
                    Some(h)
                }
            }
        }
    }
    combine(groups[0], combine(groups[1], groups[2])).unwrap_or(DType::F32)
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Overlap {
    No,
    Full,
    Partial,
    TooHard,
}

/// How an input's memory relates to an in-place output's (PyTorch's `get_overlap_status`).
pub(crate) fn overlap(out: &Tensor, input: &Tensor) -> Overlap {
    // PyTorch's get_overlap_status: the same tensor overlaps itself fully,
    // even with no elements (`x.scatter_add_(d, i, x)` of an empty x fails).
    if out.is_same(input) {
        return Overlap::Full;
    }
    if !out.same_storage(input) || out.numel() == 0 || input.numel() == 0 {
        return Overlap::No;
    }
    let (a, b) = (out.layout(), input.layout());
    if a == b {
        return Overlap::Full;
    }
    let (a0, a1) = (a.offset, a.storage_extent());
    let (b0, b1) = (b.offset, b.storage_extent());
    if a0 >= b1 || b0 >= a1 {
        return Overlap::No;
    }
    if !a.is_dense() || !b.is_dense() {
        return Overlap::TooHard;
    }
    if a0 == b0 && a1 == b1 && a.strides == b.strides {
        Overlap::Full
    } else {
        Overlap::Partial
    }
}

/// Checks an in-place output against itself and its inputs; inputs whose
/// aliasing cannot be ruled safe are replaced by copies.
pub(crate) fn check_inplace(op: &'static str, out: &Tensor, inputs: &mut [Tensor]) -> Result<()> {
    if out.layout().may_overlap() {
        return Err(TensorError::overlap(
            op,
            format!(
                "the output (shape {:?}, strides {:?}) has elements that share memory; clone it first",
                out.shape(),
                out.strides()
            ),
        ));
    }
    for t in inputs.iter_mut() {
        match overlap(out, t) {
            Overlap::No | Overlap::Full => {}
            Overlap::Partial => return Err(overlap_error(op, t, out, "partially overlaps", "")),
            Overlap::TooHard => *t = t.clone_contiguous()?,
        }
    }
    Ok(())
}

/// The part of [`check_inplace`] that PyTorch's in-place ops run before
/// their shape and dtype checks: an output with a stride-0 dim of size > 1
/// (all PyTorch's `assert_no_internal_overlap` can see; it lets other
/// self-aliasing layouts through) and an input that partially overlaps the
/// output. An op calls this where PyTorch checks the memory and
/// [`check_inplace`] after its last PyTorch check, so that an error
/// PyTorch reports (a dtype that cannot hold the result, a broadcast) comes
/// before strata's stricter refusal of an output whose elements share
/// memory through small strides (fuzz_ops s3400_inplace_alias_0215:
/// `sigmoid_` of an i32 `as_strided` view with strides [1, 1] is
/// PyTorch's dtype error).
pub(crate) fn check_inplace_early(op: &'static str, out: &Tensor, inputs: &[Tensor]) -> Result<()> {
    if out.numel() > 0 && out.layout().has_internal_overlap() {
        return Err(TensorError::overlap(
            op,
            format!(
                "the output (shape {:?}, strides {:?}) has elements that share memory; clone it first",
                out.shape(),
                out.strides()
            ),
        ));
    }
    for t in inputs {
        if overlap(out, t) == Overlap::Partial {
            return Err(overlap_error(op, t, out, "partially overlaps", ""));
        }
    }
    Ok(())
}

/// PyTorch's `assert_no_overlap` for ops that read an input while they write
/// the output element by element in an order of their own (`scatter_add_`):
/// an input that shares memory with the output, wholly or in part, is an
/// error. (Layouts too complex to compare are left to the caller, which
/// reads a copy of such an input.)
pub(crate) fn check_no_overlap(op: &'static str, out: &Tensor, inputs: &[&Tensor]) -> Result<()> {
    for t in inputs {
        if matches!(overlap(out, t), Overlap::Full | Overlap::Partial) {
            return Err(overlap_error(
                op,
                t,
                out,
                "shares memory with",
                "; clone() the input first",
            ));
        }
    }
    Ok(())
}

/// PyTorch's `assert_no_partial_overlap` for an in-place op that reads an
/// input element by element beside its output (`masked_fill_`'s mask): an
/// input that is the output itself, or shares no memory with it, is fine;
/// one that shares only part of it is an error. The output's own aliasing
/// is left to the caller (`masked_fill_` allows an expanded output).
pub(crate) fn check_no_partial_overlap(
    op: &'static str,
    out: &Tensor,
    input: &Tensor,
) -> Result<()> {
    if overlap(out, input) == Overlap::Partial {
        return Err(overlap_error(
            op,
            input,
            out,
            "partially overlaps",
            "; clone() the input first",
        ));
    }
    Ok(())
}

/// The overlap error naming the input's and the output's layouts: "an input
/// (…) `how` the output (…)`advice`".
fn overlap_error(
    op: &'static str,
    input: &Tensor,
    out: &Tensor,
    how: &str,
    advice: &str,
) -> TensorError {
    TensorError::overlap(
        op,
        format!(
            "an input (shape {:?}, strides {:?}, offset {}) {how} the output (shape {:?}, strides {:?}, offset {}){advice}",
            input.shape(),
            input.strides(),
            input.offset(),
            out.shape(),
            out.strides(),
            out.offset()
        ),
    )
}

pub(crate) fn same_device(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.device() != b.device() {
        return Err(TensorError::DeviceMismatch {
            op,
            lhs: a.device(),
            rhs: b.device(),
        });
    }
    Ok(())
}

/// Runs `f` on the output's backend with the storages locked.
pub(crate) fn launch(
    out: &Tensor,
    inputs: &[&Tensor],
    f: impl FnOnce(&dyn Backend) -> Result<()>,
) -> Result<()> {
    let be = out.backend()?;
    // The storages to read, without a heap allocation for up to 4 inputs.
    let mut few = [out.storage(); 4];
    let many: Vec<&crate::storage::Storage>;
    let reads: &[&crate::storage::Storage] = if inputs.len() <= few.len() {
        for (slot, t) in few.iter_mut().zip(inputs) {
            *slot = t.storage();
        }
        &few[..inputs.len()]
    } else {
        many = inputs.iter().map(|t| t.storage()).collect();
        &many
    };
    let _g = AccessGuard::lock(Some(out.storage()), reads);
    f(be)
}

/// Whether every element of operand `t`, computed in `compute`, is one
/// stored element (0-d, sizes of 1, or dims broadcast with stride 0):
/// PyTorch's `TensorIterator::is_scalar` for an operand broadcast to any
/// output shape. On the CPU, PyTorch first converts an operand of another
/// dtype into a new tensor of its own shape (an expanded one becomes
/// contiguous), so such an operand is one element only when it holds one.
fn one_element(t: &Tensor, compute: DType) -> bool {
    if t.dtype() != compute {
        return t.numel() <= 1;
    }
    t.shape()
        .iter()
        .zip(t.strides())
        .all(|(&n, &s)| n <= 1 || s == 0)
}

/// The layout with which PyTorch's TensorIterator sees operand `t` of an
/// op computing in `compute`, for choosing the layout of the output it
/// allocates ([`Tensor::uninit_iter_output`]). On the CPU (or on any device
/// where `always` says the op converts its operands itself, as
/// `torch.where` does) an operand of another dtype is first converted with
/// `.to(compute)`, which keeps a dense layout and makes any other dense in
/// the order of its strides ([`crate::layout::preserve_format_strides`]);
/// on a GPU the kernel casts as it reads, so the operand's own layout
/// counts.
pub(crate) fn iter_operand_layout(t: &Tensor, compute: DType, always: bool) -> Layout {
    let converted = t.dtype() != compute && (always || t.device() == crate::Device::Cpu);
    if converted {
        Layout {
            shape: t.shape().to_vec(),
            strides: crate::layout::preserve_format_strides(t.shape(), t.strides()),
            offset: 0,
        }
    } else {
        t.layout().clone()
    }
}

/// A new output of `shape` and `dtype` for an op of `inputs` computing in
/// `compute`, laid out as PyTorch's TensorIterator lays it out
/// ([`Tensor::uninit_iter_output`] of the [`iter_operand_layout`]s; `always`
/// as there). `scalar` says that PyTorch has a wrapped Python scalar among
/// its operands too (`x + 1`, `x.lt(0)`: a 0-d operand, which keeps a
/// non-0-d output from its same-shape layouts). Inputs that all have
/// `shape` and are contiguous (with a scalar: row-major on every dim, and
/// not empty) give a row-major output without building their layouts.
pub(crate) fn iter_output(
    name: &'static str,
    shape: &[usize],
    inputs: &[&Tensor],
    scalar: bool,
    (compute, always): (DType, bool),
    dtype: DType,
    device: crate::Device,
) -> Result<Tensor> {
    let scalar = scalar && !shape.is_empty();
    // With a scalar, TensorIterator orders the dims by the strides, which
    // for strides row-major on every dim (and elements) is the row-major
    // order again.
    let fast = |t: &&Tensor| {
        t.shape() == shape
            && if scalar {
                t.numel() > 0 && row_major_on_every_dim(t.layout())
            } else {
                t.is_contiguous()
            }
    };
    if inputs.iter().all(fast) {
        return Tensor::uninit(name, shape, dtype, device);
    }
    let mut layouts: Vec<Layout> = inputs
        .iter()
        .map(|t| iter_operand_layout(t, compute, always))
        .collect();
    if scalar {
        layouts.push(Layout::contiguous(&[]));
    }
    Tensor::uninit_iter_output(name, shape, &layouts, dtype, device)
}

/// Whether `l`'s strides are row-major on every dim, those of dims of
/// size 1 too (what `Tensor::uninit` gives).
fn row_major_on_every_dim(l: &Layout) -> bool {
    let mut expected = 1usize;
    for (&n, &st) in l.shape.iter().zip(&l.strides).rev() {
        if st != expected {
            return false;
        }
        expected = expected.saturating_mul(n.max(1));
    }
    l.is_well_formed()
}

/// Rounding mode of [`Tensor::div_mode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundingMode {
    /// Round toward zero.
    Trunc,
    /// Round toward negative infinity.
    Floor,
}

impl Tensor {
    pub(crate) fn binary(&self, op: BinaryOp, b: Operand, inplace: bool) -> Result<Tensor> {
        let name = op.name(inplace);
        if let Operand::Tensor(t) = b {
            same_device(name, self, t)?;
        }
        let compute = result_type(&[Operand::Tensor(self), b]);
        // PyTorch's order of checks: an op's own operand check (bool `-`),
        // then the output's memory overlap, the broadcast, the cast of the
        // result into an in-place output, and last the kernel's dtype.
        if let BinaryDTypes::NoBoolOperand(why) = op.dtypes() {
            if self.dtype() == DType::Bool || b.dtype() == DType::Bool {
                return Err(TensorError::dtype(name, why));
            }
        }
        // PyTorch allows a bool tensor to a bool scalar power (x^true = x,
        // x^false = true), though not to a bool tensor power.
        let no_bool_kernel = matches!(op.dtypes(), BinaryDTypes::NoBoolCompute)
            && compute == DType::Bool
            && !(op == BinaryOp::Pow && matches!(b, Operand::Scalar(_)));
        let compute = match op.dtypes() {
            BinaryDTypes::Float if !compute.is_float() => DType::F32,
            _ => compute,
        };
        let out_dtype = if op.is_comparison() {
            DType::Bool
        } else {
            compute
        };
        let mut inputs: Vec<Tensor> = match b {
            Operand::Tensor(t) => vec![t.clone()],
            Operand::Scalar(_) => vec![],
        };
        // Checked before the in-place checks, as PyTorch does (an expanded
        // integer tensor's pow_(-1) is a value error, not an overlap).
        if op == BinaryOp::Pow && !compute.is_float() {
            if let Operand::Scalar(Scalar::Int(e)) = b {
                if e < 0 {
                    return Err(TensorError::value(
                        name,
                        format!(
                            "integers to negative integer powers are not allowed (exponent {e}); \
                             use a float exponent or convert the tensor to a float dtype"
                        ),
                    ));
                }
            }
        }
        if inplace {
            check_inplace_early(name, self, &inputs)?;
        }
        let shape = broadcast_shapes(name, self.shape(), b.shape())?;
        if inplace {
            if shape != self.shape() {
                return Err(TensorError::InPlaceBroadcast {
                    op: name,
                    out: self.shape().to_vec(),
                    result: shape,
                });
            }
            if !out_dtype.can_cast_to(self.dtype()) {
                return Err(TensorError::dtype(
                    name,
                    format!(
                        "result type {out_dtype} cannot be stored in the {} output",
                        self.dtype()
                    ),
                ));
            }
        }
        if no_bool_kernel || (matches!(op.dtypes(), BinaryDTypes::Integral) && compute.is_float()) {
            return Err(TensorError::unsupported(name, compute));
        }
        // PyTorch's pow kernels for f16/bf16 and the integer dtypes convert a
        // scalar exponent with `checked_convert` (an i32 tensor to the power
        // 2^40 is an error, not a power of the exponent wrapped to 0), even
        // for an empty tensor; the f32/f64 kernels take any exponent.
        if op == BinaryOp::Pow && !matches!(compute, DType::F32 | DType::F64 | DType::Bool) {
            if let Operand::Scalar(s) = b {
                crate::ops::checks::check_fits(name, s, compute)?;
            }
        }
        if matches!(
            op,
            BinaryOp::DivTrunc | BinaryOp::DivFloor | BinaryOp::Remainder | BinaryOp::Fmod
        ) && !compute.is_float()
        {
            let zero = match (&b, inputs.first()) {
                // The scalar is first converted to the dtype (2^31 wraps to 0 in u8).
                (Operand::Scalar(s), _) => s.cast_to(compute).to_i64() == 0,
                // A tensor divisor too is converted first (a 0-d i64
                // -2^20 divides a u8 tensor as 0).
                (_, Some(t)) => t
                    .to_dtype_contiguous(compute)?
                    .eq(0)?
                    .to_vec::<bool>()?
                    .contains(&true),
                _ => false,
            };
            // Nothing is divided when the result is empty (PyTorch too).
            if zero && crate::shape::numel(&shape) > 0 {
                return Err(TensorError::value(name, "integer division by zero"));
            }
        }
        // Everything PyTorch checks has passed: now strata's own refusal of
        // an output whose elements share memory (which PyTorch would write
        // in an order of its own), and copies of inputs whose overlap with
        // the output is too hard to tell.
        if inplace {
            check_inplace(name, self, &mut inputs)?;
        }
        // PyTorch's f16/bf16 division by a tensor of one element (0-d, or
        // broadcast from a single element) is its kernel for a scalar
        // divisor: the divisor's own value (a 0-d f32 or i64 divisor is not
        // rounded to the dtype first), the quotient, trunc or floor in f32,
        // and one rounding of the result. Computed here in f32 and
        // converted; a true division by a divisor of the dtype itself gives
        // the same in the dtype's kernel. Multiplication by a second operand
        // of one element is the same kernel in PyTorch (`mul` of a bf16
        // tensor by a 0-d f32 tensor uses the f32 value unrounded); addition
        // and subtraction round it to the dtype first.
        let kernel = match b {
            Operand::Tensor(t)
                if matches!(compute, DType::F16 | DType::BF16)
                    && (matches!(op, BinaryOp::DivTrunc | BinaryOp::DivFloor)
                        || (matches!(op, BinaryOp::Div | BinaryOp::Mul)
                            && t.dtype() != compute))
                    && one_element(t, compute) =>
            {
                DType::F32
            }
            _ => compute,
        };
        // CPU maximum/minimum of floats: which of two equal operands (+0.0,
        // -0.0) PyTorch returns depends on which of its loops visits the
        // element (see the CPU backend's `extremes_typed`), so the operands
        // are converted and the output laid out as PyTorch's TensorIterator
        // does, and the kernel walks PyTorch's rows.
        let pytorch_rows = matches!(op, BinaryOp::Maximum | BinaryOp::Minimum)
            && compute.is_float()
            && !inplace
            && self.device() == crate::Device::Cpu;
        let convert = |t: &Tensor, dt: DType| {
            if pytorch_rows {
                t.to_dtype(dt)
            } else {
                t.to_dtype_contiguous(dt)
            }
        };
        // self is converted to the compute dtype first (an i32 dividend of a
        // bf16 divisor is rounded to bf16), the divisor straight to `kernel`.
        let a_c = convert(&convert(self, compute)?, kernel)?;
        let b_c = match inputs.first() {
            Some(t) => Some(convert(t, kernel)?),
            None => None,
        };
        // A new output is laid out as PyTorch's TensorIterator lays it out:
        // dense in the order of the operands' strides (a transposed input
        // gives a transposed result).
        let target = if inplace && self.dtype() == out_dtype && a_c.same_storage(self) {
            self.clone()
        } else {
            let operands: Vec<&Tensor> = std::iter::once(self).chain(inputs.first()).collect();
            let dt = if kernel != compute { kernel } else { out_dtype };
            // PyTorch wraps a scalar into a 0-d operand, but for `pow`,
            // whose scalar exponent is an argument of a unary kernel.
            let scalar = matches!(b, Operand::Scalar(_)) && op != BinaryOp::Pow;
            let (sh, dev) = (&shape, self.device());
            iter_output(name, sh, &operands, scalar, (compute, false), dt, dev)?
        };
        match (&b_c, b) {
            (Some(bt), _) => launch(&target, &[&a_c, bt], |be| {
                be.binary(op, &target.arg(), &a_c.arg_as(&shape), &bt.arg_as(&shape))
            })?,
            (None, Operand::Scalar(s)) => match pow_root(op, compute, s, self.device()) {
                // PyTorch computes x^0.5, x^-0.5 and x^-1 as sqrt, rsqrt
                // and reciprocal.
                Some(f) => launch(&target, &[&a_c], |be| {
                    be.unary(UnaryOp::Map(f), &target.arg(), &a_c.arg_as(&shape))
                })?,
                None => match pow_products(op, compute, s) {
                    // x^2, x^3 and x^-2 as products, rounded as PyTorch's.
                    Some(k) => k.apply(&a_c, &target, &shape)?,
                    None if pow_in_f64(op, compute, s, &a_c) => {
                        let a64 = a_c.to_dtype_contiguous(DType::F64)?;
                        let t64 = Tensor::zeros(&shape, DType::F64, self.device())?;
                        launch(&t64, &[&a64], |be| {
                            be.binary_scalar(op, &t64.arg(), &a64.arg_as(&shape), s)
                        })?;
                        target.copy_raw(&t64)?;
                    }
                    None => launch(&target, &[&a_c], |be| {
                        be.binary_scalar(
                            op,
                            &target.arg(),
                            &a_c.arg_as(&shape),
                            pow_exponent(op, compute, s),
                        )
                    })?,
                },
            },
            (None, Operand::Tensor(_)) => unreachable!(),
        }
        if inplace {
            if !target.same_storage(self) {
                self.copy_raw(&target)?;
            }
            self.bump_version();
            Ok(self.clone())
        } else if target.dtype() != out_dtype {
            target.to_dtype(out_dtype)
        } else {
            Ok(target)
        }
    }

    /// Copies `src` (same shape, checked) into `self` with conversion.
    fn copy_raw(&self, src: &Tensor) -> Result<()> {
        launch(self, &[src], |be| {
            be.copy(&self.arg(), &src.arg_as(self.shape()))
        })
    }

    /// Division with a rounding mode (keeps the promoted dtype).
    pub fn div_mode<'a>(&self, b: impl Into<Operand<'a>>, mode: RoundingMode) -> Result<Tensor> {
        self.binary(mode_op(mode), b.into(), false)
    }
    /// In place division with a rounding mode.
    pub fn div_mode_<'a>(&self, b: impl Into<Operand<'a>>, mode: RoundingMode) -> Result<Tensor> {
        self.binary(mode_op(mode), b.into(), true)
    }

    pub(crate) fn unary(&self, op: UnaryOp, name: &'static str, inplace: bool) -> Result<Tensor> {
        let rule = match op {
            UnaryOp::Map(f) => f.dtypes(),
            UnaryOp::Clamp(..) => UnaryDTypes::All,
        };
        let float_only = rule == UnaryDTypes::Float;
        // PyTorch rejects a bool `neg_`/`relu_` on entry, but an `abs_` of a
        // bool tensor or a `silu_` of an integer one only in its kernel,
        // after TensorIterator's check of the output's memory: on an
        // expanded tensor those are overlap errors (fuzz_ops
        // s3310o_half_layout_0131: `abs_` of an expanded bool tensor).
        let kernel_rejects = matches!(
            op,
            UnaryOp::Map(crate::ops::table::UnaryFn::Abs | crate::ops::table::UnaryFn::Silu)
        );
        if inplace
            && kernel_rejects
            && ((rule == UnaryDTypes::NotBool && self.dtype() == DType::Bool)
                || (rule == UnaryDTypes::FloatOnly && !self.dtype().is_float()))
        {
            check_inplace_early(name, self, &[])?;
        }
        if rule == UnaryDTypes::NotBool && self.dtype() == DType::Bool {
            return Err(TensorError::unsupported(name, DType::Bool));
        }
        if rule == UnaryDTypes::FloatOnly && !self.dtype().is_float() {
            return Err(TensorError::dtype(
                name,
                format!(
                    "not defined for dtype {} (float tensors only; convert with to_dtype first)",
                    self.dtype()
                ),
            ));
        }
        let compute = match op {
            UnaryOp::Clamp(lo, hi) => match crate::ops::checks::clamp_dtype(name, self, lo, hi) {
                Ok(d) => d,
                // Bool bounds on a bool tensor: PyTorch finds no kernel only
                // after checking the output's memory (an overlap error first).
                Err(e) => {
                    if inplace {
                        check_inplace_early(name, self, &[])?;
                    }
                    return Err(e);
                }
            },
            _ if float_only && !self.dtype().is_float() => DType::F32,
            _ => self.dtype(),
        };
        // PyTorch checks the output's memory overlap before the cast of the
        // result into it, except for clamp_ (whose cast check comes first);
        // strata's stricter check of an output sharing memory through small
        // strides comes after both (see `check_inplace_early`).
        let clamp = matches!(op, UnaryOp::Clamp(..));
        if inplace {
            if !clamp {
                check_inplace_early(name, self, &[])?;
            }
            if !compute.can_cast_to(self.dtype()) || (float_only && !self.dtype().is_float()) {
                return Err(TensorError::dtype(
                    name,
                    format!(
                        "result type {compute} cannot be stored in the {} tensor",
                        self.dtype()
                    ),
                ));
            }
            check_inplace(name, self, &mut [])?;
        }
        if let UnaryOp::Clamp(Some(lo), Some(hi)) = op {
            let nan = |v: Scalar| matches!(v, Scalar::Float(f) if f.is_nan());
            if nan(lo) || nan(hi) {
                // PyTorch fills the result with NaN when both bounds are
                // given and one is NaN, without converting the other bound
                // (which may therefore lie outside the dtype's range).
                let target = if inplace {
                    self.clone()
                } else {
                    self.uninit_unary_output(name, compute, true)?
                };
                return target.fill_(f64::NAN);
            }
        }
        let op = match op {
            UnaryOp::Clamp(lo, hi) => {
                let (lo, hi) = crate::ops::checks::clamp_bounds(name, compute, lo, hi)?;
                UnaryOp::Clamp(lo, hi)
            }
            op => op,
        };
        let a_c = self.to_dtype_contiguous(compute)?;
        let target = if inplace && a_c.same_storage(self) {
            self.clone()
        } else {
            self.uninit_unary_output(name, compute, clamp)?
        };
        // f16/bf16 rsqrt: the elements PyTorch's CPU scalar functor takes
        // (`1 / std::sqrt(x)` with the square root rounded to the dtype
        // first) differ from its vectorised `1 / sqrt(x)` in f32 on 8,387
        // f16 and 9,033 bf16 values (fuzz_ops s3303_unary_0574: bf16
        // rsqrt(0.0009994) is 31.75 there, 31.625 vectorised); they are
        // computed before the launch (which may overwrite the input).
        let scalar_loop = if op == UnaryOp::Map(crate::ops::table::UnaryFn::Rsqrt)
            && matches!(compute, DType::F16 | DType::BF16)
            && self.device() == crate::Device::Cpu
        {
            let scalar_rsqrt = |x: &Tensor| x.sqrt()?.reciprocal();
            let n = self.numel();
            if self.is_contiguous() && a_c.is_contiguous() && target.is_contiguous() {
                // One inner row: the scalar loop takes the last `n % 32`.
                let tail = n % HALF_VEC_CHUNK;
                match tail {
                    0 => None,
                    _ => Some((None, tail, scalar_rsqrt(&last_of(&a_c, tail)?)?)),
                }
            } else {
                let out_strides = if inplace {
                    self.strides().to_vec()
                } else {
                    pytorch_out_strides(self)
                };
                match half_scalar_loop_mask(self, &out_strides)? {
                    Some(mask) => Some((Some(mask), n, scalar_rsqrt(&a_c)?)),
                    None => None,
                }
            }
        } else {
            None
        };
        launch(&target, &[&a_c], |be| {
            be.unary(op, &target.arg(), &a_c.arg())
        })?;
        match scalar_loop {
            Some((None, tail, scalar)) => last_of(&target, tail)?.copy_raw(&scalar)?,
            Some((Some(mask), _, scalar)) => {
                let mask = Tensor::from_vec(mask, self.shape(), crate::Device::Cpu)?;
                target.copy_raw(&Tensor::where_cond(&mask, &scalar, &target)?)?;
            }
            None => {}
        }
        if inplace {
            if !target.same_storage(self) {
                self.copy_raw(&target)?;
            }
            self.bump_version();
            Ok(self.clone())
        } else {
            Ok(target)
        }
    }

    /// The output of a unary op of `self` computing in `compute`, laid out
    /// as PyTorch's TensorIterator lays it out (a transposed input gives a
    /// transposed result; [`iter_operand_layout`]). `converts`: the op
    /// converts its input to `compute` itself on every device, as PyTorch's
    /// `clamp` does (`build_unary_op(out, self.to(result_type))`), so a GPU
    /// lays the output out as the CPU does.
    fn uninit_unary_output(
        &self,
        name: &'static str,
        compute: DType,
        converts: bool,
    ) -> Result<Tensor> {
        iter_output(
            name,
            self.shape(),
            &[self],
            false,
            (compute, converts),
            compute,
            self.device(),
        )
    }

    fn clamp_args(name: &'static str, min: Option<Scalar>, max: Option<Scalar>) -> Result<UnaryOp> {
        if min.is_none() && max.is_none() {
            return Err(TensorError::value(
                name,
                "at least one of min and max must be given",
            ));
        }
        Ok(UnaryOp::Clamp(min, max))
    }

    /// `min(max(self, min), max)`; a float bound on an integer tensor gives f32.
    pub fn clamp(
        &self,
        min: Option<impl Into<Scalar>>,
        max: Option<impl Into<Scalar>>,
    ) -> Result<Tensor> {
        let op = Tensor::clamp_args("clamp", min.map(Into::into), max.map(Into::into))?;
        self.unary(op, "clamp", false)
    }
    /// In place clamp.
    pub fn clamp_(
        &self,
        min: Option<impl Into<Scalar>>,
        max: Option<impl Into<Scalar>>,
    ) -> Result<Tensor> {
        let op = Tensor::clamp_args("clamp_", min.map(Into::into), max.map(Into::into))?;
        self.unary(op, "clamp_", true)
    }

    /// Sets every element to `value` (allowed on expanded tensors and on views
    /// whose elements share memory); the value must be representable in the
    /// dtype, except that, as in PyTorch, a single f16/bf16 element takes an
    /// out-of-range value as ±inf.
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        if !value.fill_fits(self.dtype(), self.numel()) {
            return Err(TensorError::value(
                "fill_",
                format!(
                    "value {value} cannot be converted to {} without overflow",
                    self.dtype()
                ),
            ));
        }
        // Stride-0 dims alias one element: write it once. Other elements that
        // share memory (an `as_strided` view) all get the same value, so, as
        // in PyTorch, that is no error either (the backends write them
        // without racing).
        let l = self.layout();
        let dedup = Layout {
            shape: l
                .shape
                .iter()
                .zip(&l.strides)
                .map(|(&s, &st)| if st == 0 { s.min(1) } else { s })
                .collect(),
            strides: l.strides.clone(),
            offset: l.offset,
        };
        let target = self.with_layout(dedup);
        launch(&target, &[], |be| be.fill(&target.arg(), value))?;
        self.bump_version();
        Ok(self.clone())
    }

    /// Sets every element to zero.
    pub fn zero_(&self) -> Result<Tensor> {
        self.fill_(Scalar::Int(0))
    }

    /// Copies `src` into `self`: src broadcasts to self's shape, any dtypes,
    /// any layouts.
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        same_device("copy_", self, src)?;
        // PyTorch's copy_ returns at once when src is self or a view of the
        // same elements (same storage, offset, sizes, strides and dtype),
        // before any check: `x.copy_(x)` of an expanded x is no error.
        if self.same_storage(src) && self.layout() == src.layout() && self.dtype() == src.dtype() {
            self.bump_version();
            return Ok(self.clone());
        }
        // PyTorch checks the memory overlaps before the broadcast.
        let mut inputs = [src.clone()];
        check_inplace_early("copy_", self, &inputs)?;
        let shape = broadcast_shapes("copy_", self.shape(), src.shape())?;
        if shape != self.shape() {
            return Err(TensorError::InPlaceBroadcast {
                op: "copy_",
                out: self.shape().to_vec(),
                result: shape,
            });
        }
        check_inplace("copy_", self, &mut inputs)?;
        let [src] = inputs;
        if !(self.same_storage(&src)
            && self.layout() == src.layout()
            && self.dtype() == src.dtype())
        {
            self.copy_raw(&src)?;
        }
        self.bump_version();
        Ok(self.clone())
    }

    /// In place `self += value * t1 * t2`.
    pub fn addcmul_(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        same_device("addcmul_", self, t1)?;
        same_device("addcmul_", self, t2)?;
        // PyTorch checks the output's memory overlap first, then the
        // broadcast, the cast, the kernel's dtype and last the value.
        let mut inputs = [t1.clone(), t2.clone()];
        check_inplace_early("addcmul_", self, &inputs)?;
        let shape = broadcast_shapes("addcmul_", t1.shape(), t2.shape())?;
        let shape = broadcast_shapes("addcmul_", self.shape(), &shape)?;
        if shape != self.shape() {
            return Err(TensorError::InPlaceBroadcast {
                op: "addcmul_",
                out: self.shape().to_vec(),
                result: shape,
            });
        }
        let compute = result_type(&[
            Operand::Tensor(self),
            Operand::Tensor(t1),
            Operand::Tensor(t2),
        ]);
        if !compute.can_cast_to(self.dtype()) {
            return Err(TensorError::dtype(
                "addcmul_",
                format!(
                    "result type {compute} cannot be stored in the {} output",
                    self.dtype()
                ),
            ));
        }
        if compute == DType::Bool {
            return Err(TensorError::unsupported("addcmul_", compute));
        }
        if !compute.is_float() {
            // Converted to the integer dtype like fill_'s value (a float
            // truncates; out of range is an error): PyTorch's
            // addcmul_(i32, value=1.25) adds 1 * t1 * t2.
            crate::ops::checks::check_fits("addcmul_", value, compute)?;
        } else {
            // A float kernel converts the value (checked) to its opmath
            // type: f32 for f16/bf16/f32, so value=1e300 fails there.
            let opmath = if compute == DType::F64 {
                DType::F64
            } else {
                DType::F32
            };
            crate::ops::checks::check_fits("addcmul_", value, opmath)?;
        }
        check_inplace("addcmul_", self, &mut inputs)?;
        let t1c = inputs[0].to_dtype_contiguous(compute)?;
        let t2c = inputs[1].to_dtype_contiguous(compute)?;
        let target = if compute == self.dtype() {
            self.clone()
        } else {
            self.to_dtype_contiguous(compute)?
        };
        launch(&target, &[&t1c, &t2c], |be| {
            be.addcmul(
                &target.arg(),
                &t1c.arg_as(&shape),
                &t2c.arg_as(&shape),
                value,
            )
        })?;
        if !target.same_storage(self) {
            self.copy_raw(&target)?;
        }
        self.bump_version();
        Ok(self.clone())
    }

    /// `self + value * t1 * t2` (all three broadcast) as a new tensor.
    pub fn addcmul(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let shape = broadcast_shapes("addcmul", t1.shape(), t2.shape())?;
        let shape = broadcast_shapes("addcmul", self.shape(), &shape)?;
        let dtype = result_type(&[
            Operand::Tensor(self),
            Operand::Tensor(t1),
            Operand::Tensor(t2),
        ]);
        // Laid out as PyTorch's TensorIterator lays out its output.
        let out = iter_output(
            "addcmul",
            &shape,
            &[self, t1, t2],
            false,
            (dtype, false),
            dtype,
            self.device(),
        )?;
        out.copy_(self)?;
        out.addcmul_(t1, t2, value)?;
        Ok(out)
    }

    /// `cond ? a : b` element-wise; `cond` must be bool; all three broadcast.
    pub fn where_cond<'a, 'b>(
        cond: &Tensor,
        a: impl Into<Operand<'a>>,
        b: impl Into<Operand<'b>>,
    ) -> Result<Tensor> {
        Tensor::where_impl(cond, a.into(), b.into(), false)
    }

    /// [`Tensor::where_cond`] with a row-major result when `row_major`
    /// (the ops PyTorch computes through a contiguous output of its own:
    /// `masked_fill`, `triu`, `tril`), else one laid out as PyTorch's
    /// `torch.where` lays it out.
    pub(crate) fn where_impl(
        cond: &Tensor,
        a: Operand,
        b: Operand,
        row_major: bool,
    ) -> Result<Tensor> {
        // PyTorch also accepts a u8 condition (deprecated), nonzero meaning true.
        let cond_u8;
        let cond = if cond.dtype() == DType::U8 {
            cond_u8 = cond.ne(0)?;
            &cond_u8
        } else {
            cond
        };
        let dtype = result_type(&[a, b]);
        // PyTorch converts a scalar to an f32 or integer result with its
        // range check (1e39 into f32, 2^31 into u8 are errors), before it
        // looks at the condition or the shapes; into f16/bf16 an
        // out-of-range scalar becomes inf (below).
        if dtype == DType::F32 || !dtype.is_float() {
            for o in [a, b] {
                if let Operand::Scalar(s) = o {
                    crate::ops::checks::check_fits("where", s, dtype)?;
                }
            }
        }
        if cond.dtype() != DType::Bool {
            return Err(TensorError::dtype(
                "where",
                format!("the condition must be bool (or u8), not {}", cond.dtype()),
            ));
        }
        let shape = broadcast_shapes("where", cond.shape(), a.shape())?;
        let shape = broadcast_shapes("where", &shape, b.shape())?;
        let materialise = |o: Operand| -> Result<Tensor> {
            match o {
                Operand::Tensor(t) => {
                    same_device("where", cond, t)?;
                    t.to_dtype_contiguous(dtype)
                }
                // A float scalar beyond a float dtype's range becomes inf
                // (PyTorch's where); integers keep fill_'s range check.
                Operand::Scalar(s @ Scalar::Float(_)) if dtype.is_float() => {
                    Tensor::from_scalars(&[s], &[], dtype, cond.device())
                }
                Operand::Scalar(s) => Tensor::scalar(s, dtype, cond.device()),
            }
        };
        let (ta, tb) = (materialise(a)?, materialise(b)?);
        // PyTorch converts the operands with `.to(dtype)` (a u8 condition
        // with `.to(bool)`) on every device, and its TensorIterator lays the
        // output out in the order of the condition's, then the operands'
        // strides.
        // A scalar is a 0-d operand, whose strides (all 0 once broadcast)
        // decide nothing.
        let tensors: Vec<&Tensor> = [a, b]
            .into_iter()
            .filter_map(|o| match o {
                Operand::Tensor(t) => Some(t),
                Operand::Scalar(_) => None,
            })
            .collect();
        // A scalar is a 0-d operand: its strides (all 0 once broadcast)
        // decide nothing, but beside a tensor of another shape it takes
        // TensorIterator off its same-shape fast path.
        let scalar = tensors.len() < 2 && !shape.is_empty();
        let row_major = row_major
            || (!scalar
                && std::iter::once(&cond)
                    .chain(&tensors)
                    .all(|t| t.shape() == shape.as_slice() && t.is_contiguous()));
        let out = if row_major {
            Tensor::uninit("where", &shape, dtype, cond.device())?
        } else {
            let layouts: Vec<Layout> =
                std::iter::once(iter_operand_layout(cond, DType::Bool, true))
                    .chain(tensors.iter().map(|t| iter_operand_layout(t, dtype, true)))
                    .chain(scalar.then(|| Layout::contiguous(&[])))
                    .collect();
            Tensor::uninit_iter_output("where", &shape, &layouts, dtype, cond.device())?
        };
        launch(&out, &[cond, &ta, &tb], |be| {
            be.where_(
                &out.arg(),
                &cond.arg_as(&shape),
                &ta.arg_as(&shape),
                &tb.arg_as(&shape),
            )
        })?;
        Ok(out)
    }
}

/// The unary op a float `pow` with scalar exponent `s` is computed as, where
/// PyTorch special-cases it (0.5: sqrt, -0.5: rsqrt; -1: reciprocal for
/// f32, f64 and bf16, whose CPU kernel PyTorch dispatches to
/// `reciprocal_kernel`: `1 / x` rounded once, where `powf(x, -1)` was off by
/// an ulp now and then). The exponent is compared as given, before any
/// conversion to the tensor's dtype (PyTorch's `exp_scalar.equal(-1.0)`).
///
/// PyTorch's CPU kernel special-cases f32, f64 and bf16 only: an f16
/// tensor's power there is `pow` for every exponent, which differs from
/// sqrt and rsqrt at the signed zeros and -inf (`(-0.0).pow(0.5)` is +0,
/// `(-inf).pow(0.5)` +inf, `(-0.0).pow(-0.5)` +inf, `(-inf).pow(-0.5)` +0;
/// sqrt gives -0 and NaN, rsqrt -inf and NaN). Its CUDA kernel
/// special-cases every float dtype.
fn pow_root(
    op: BinaryOp,
    compute: DType,
    s: Scalar,
    device: crate::Device,
) -> Option<crate::ops::table::UnaryFn> {
    use crate::ops::table::UnaryFn;
    if op != BinaryOp::Pow || !compute.is_float() {
        return None;
    }
    if compute == DType::F16 && device == crate::Device::Cpu {
        return None;
    }
    // (A bool exponent, 0 or 1, is none of the special ones.)
    let e = s.to_f64();
    if e == 0.5 {
        Some(UnaryFn::Sqrt)
    } else if e == -0.5 {
        Some(UnaryFn::Rsqrt)
    } else if e == -1.0 && matches!(compute, DType::F32 | DType::F64 | DType::BF16) {
        Some(UnaryFn::Reciprocal)
    } else {
        None
    }
}

/// The products PyTorch's CPU and CUDA pow kernels compute `x ^ 2`, `x ^ 3`
/// and `x ^ -2` as (`pow_tensor_scalar_optimized_kernel`): `x * x`,
/// `x * x * x` and `1 / (x * x)`, each operation rounded to the dtype.
#[derive(Clone, Copy)]
enum PowProducts {
    Square,
    Cube,
    InverseSquare,
}

impl PowProducts {
    /// Writes `x ^ 2`, `x ^ 3` or `x ^ -2` of `x` (broadcast to `shape`)
    /// into `out` as those products: `x * x` straight into `out`, then `out`
    /// times `x` from a separate square (`out` may be `x` itself, in place),
    /// or the reciprocal of `out` in place.
    fn apply(self, x: &Tensor, out: &Tensor, shape: &[usize]) -> Result<()> {
        debug_assert_eq!(x.dtype(), out.dtype(), "pow's output has its compute dtype");
        let (xa, oa) = (x.arg_as(shape), out.arg());
        match self {
            PowProducts::Square | PowProducts::InverseSquare => {
                launch(out, &[x], |be| be.binary(BinaryOp::Mul, &oa, &xa, &xa))?;
                if matches!(self, PowProducts::InverseSquare) {
                    let recip = UnaryOp::Map(crate::ops::table::UnaryFn::Reciprocal);
                    launch(out, &[out], |be| be.unary(recip, &oa, &oa))?;
                }
                Ok(())
            }
            PowProducts::Cube => {
                let sq = x.mul(x)?;
                let sa = sq.arg_as(shape);
                launch(out, &[&sq, x], |be| be.binary(BinaryOp::Mul, &oa, &sa, &xa))
            }
        }
    }
}

/// Whether a float `pow` by the scalar `s` is one of [`PowProducts`]: for
/// f32, f64 and bf16 (PyTorch's CPU f16 kernel calls `pow` for every
/// exponent) when the exponent, as the kernel sees it (converted to bf16
/// for a bf16 tensor, see [`pow_exponent`]), is 2, 3 or -2. `powf` instead
/// of the products moved about a quarter of the elements of `x.pow(3)`
/// and `x.pow(-2)` by an ulp from PyTorch's (f32, f64 and bf16), and a few
/// of `x.pow(2)`.
fn pow_products(op: BinaryOp, compute: DType, s: Scalar) -> Option<PowProducts> {
    if op != BinaryOp::Pow || !matches!(compute, DType::F32 | DType::F64 | DType::BF16) {
        return None;
    }
    let e = pow_exponent(op, compute, s).to_f64();
    if e == 2.0 {
        Some(PowProducts::Square)
    } else if e == 3.0 {
        Some(PowProducts::Cube)
    } else if e == -2.0 {
        Some(PowProducts::InverseSquare)
    } else {
        None
    }
}

/// Whether an f32 `pow` by the scalar `s` is computed in f64 and rounded
/// once: PyTorch's CPU kernel (`pow_tensor_scalar_optimized_kernel<float,
/// double>`) takes the exponent as a double and its scalar loop calls
/// `std::pow(float, double)`, a double power, so an exponent that f32 cannot
/// hold keeps its value: `(-2^31).pow(16777217.0)` is -inf (the odd exponent)
/// where an f32 `powf` sees 16777216 and gives +inf, and
/// `(-1).pow(2^24 + 1)` is -1. Its vectorised loop rounds the exponent to
/// f32 instead: it runs over each full block of `2 * Vec::size()` contiguous
/// elements (32 with AVX-512, 16 with AVX2), the scalar loop over the rest,
/// so a tensor of fewer than 32 elements (under AVX-512: every element) is
/// computed in f64 here and a larger one in f32, as its bulk is (its last
/// `n % 32` elements may then differ from PyTorch's by a few units in the
/// last place, and the large tensor keeps the f32 kernel's speed). An
/// exponent f32 holds exactly is computed in f32 as before.
fn pow_in_f64(op: BinaryOp, compute: DType, s: Scalar, a: &Tensor) -> bool {
    let e = s.to_f64();
    op == BinaryOp::Pow
        && compute == DType::F32
        && a.device() == crate::Device::Cpu
        && a.numel() < 32
        && e.is_finite()
        && f64::from(e as f32) != e
}

/// The scalar operand a kernel takes: for `pow` of an f16 or bf16 tensor,
/// the exponent converted to that dtype, as PyTorch's f16/bf16 pow kernels
/// (CPU and CUDA) take it (`exp_scalar.to<scalar_t>()`, after the
/// `checked_convert` above): `x.pow(2.2)` of an f16 `x` is `x ^ 2.19921875`
/// computed in f32 and rounded once, and an exponent below the dtype's
/// smallest subnormal is 0 (`x.pow(1e-8)` is 1 everywhere). Computing with
/// the f32 exponent instead moved most elements of an f16 or bf16 power by
/// one or more units in the last place from PyTorch's (99^2.2: 24576
/// against PyTorch's 24480 in f16, 24576 against 24960 in bf16). Other
/// ops and dtypes take the scalar as it is.
fn pow_exponent(op: BinaryOp, compute: DType, s: Scalar) -> Scalar {
    if op == BinaryOp::Pow && matches!(compute, DType::F16 | DType::BF16) {
        s.cast_to(compute)
    } else {
        s
    }
}

fn mode_op(mode: RoundingMode) -> BinaryOp {
    match mode {
        RoundingMode::Trunc => BinaryOp::DivTrunc,
        RoundingMode::Floor => BinaryOp::DivFloor,
    }
}

/// The public methods of one unary row: none for a `named` row (its method
/// is written by hand), else the out-of-place method and maybe the in-place one.
macro_rules! unary_row_methods {
    ([$($doc:tt)*] $V:ident ; ) => {};
    ([$($doc:tt)*] $V:ident $m:ident ; $($ip:ident [$($idoc:tt)*])?) => {
        $($doc)*
        pub fn $m(&self) -> Result<Tensor> {
            let op = crate::ops::table::UnaryFn::$V;
            self.unary(UnaryOp::Map(op), op.name(false), false)
        }
        $(
            $($idoc)*
            pub fn $ip(&self) -> Result<Tensor> {
                let op = crate::ops::table::UnaryFn::$V;
                self.unary(UnaryOp::Map(op), op.name(true), true)
            }
        )?
    };
}

/// The public methods of the unary table's ops.
macro_rules! unary_methods {
    ($(
        $(#[$doc:meta])*
        $V:ident {
            $(method: $m:ident,)?
            $(named: $n:ident,)?
            $(inplace: $(#[$idoc:meta])* $ip:ident,)?
            dtypes: $($rest:tt)*
        }
    )*) => {
        impl Tensor {
            $(unary_row_methods!([$(#[$doc])*] $V $($m)? ; $($ip [$(#[$idoc])*])?);)*
        }
    };
}
unary_op_table!(unary_methods);

/// The public methods of one arithmetic row: none, out of place, or both.
macro_rules! arith_methods {
    ([$($doc:tt)*] $V:ident ; ) => {};
    ([$($doc:tt)*] $V:ident $m:ident ; ) => {
        $($doc)*
        pub fn $m<'a>(&self, b: impl Into<Operand<'a>>) -> Result<Tensor> {
            self.binary(BinaryOp::$V, b.into(), false)
        }
    };
    ([$($doc:tt)*] $V:ident $m:ident ; $ip:ident [$($idoc:tt)*]) => {
        arith_methods!([$($doc)*] $V $m ;);
        $($idoc)*
        pub fn $ip<'a>(&self, b: impl Into<Operand<'a>>) -> Result<Tensor> {
            self.binary(BinaryOp::$V, b.into(), true)
        }
    };
}

/// The public methods of the binary table's ops.
macro_rules! binary_methods {
    (
        arith { $(
            $(#[$doc:meta])*
            $V:ident {
                $(method: $m:ident,)?
                $(inplace: $(#[$idoc:meta])* $ip:ident,)?
                $(named: $n:ident,)?
                dtypes: $($rest:tt)*
            }
        )* }
        compare { $(
            $(#[$cdoc:meta])*
            $C:ident { method: $cm:ident, $($crest:tt)* }
        )* }
    ) => {
        impl Tensor {
            $(arith_methods!([$(#[$doc])*] $V $($m)? ; $($ip [$(#[$idoc])*])?);)*
            $(
                $(#[$cdoc])*
                pub fn $cm<'a>(&self, b: impl Into<Operand<'a>>) -> Result<Tensor> {
                    self.binary(BinaryOp::$C, b.into(), false)
                }
            )*
        }
    };
}
binary_op_table!(binary_methods);

// ----- issue 12: elementwise math with arguments (gelu, pow with a scalar base) -----

/// How many f16/bf16 elements one step of PyTorch's CPU `vectorized_loop`
/// takes: two `Vectorized<Half>` of 16 lanes (AVX2, the capability of the
/// PyTorch 2.15 build the fixtures come from).
pub(crate) const HALF_VEC_CHUNK: usize = 32;

/// How many f32 elements one step of PyTorch's CPU `vectorized_loop`
/// takes: two `Vectorized<float>` of 8 lanes (AVX2).
const F32_VEC_CHUNK: usize = 16;

/// How many elements of a float dtype one step of PyTorch's CPU
/// `vectorized_loop` takes (two AVX2 vectors): 8 f64, 16 f32, 32 f16/bf16.
pub(crate) fn pytorch_vec_chunk(dtype: DType) -> usize {
    match dtype {
        DType::F64 => 8,
        DType::F32 => F32_VEC_CHUNK,
        _ => HALF_VEC_CHUNK,
    }
}

/// The strides PyTorch's TensorIterator gives the output it allocates for a
/// unary op of `x`: dense in its order of the dims
/// ([`crate::layout::pytorch_reorder_dims`]).
fn pytorch_out_strides(x: &Tensor) -> Vec<usize> {
    let shape = x.shape();
    let order = crate::layout::reorder_dims(shape, None, &[x.strides()]);
    crate::layout::dense_strides_in_order(shape, &order)
}

/// The last `tail` elements of the contiguous `t`, as a 1-D view.
fn last_of(t: &Tensor, tail: usize) -> Result<Tensor> {
    let n = t.numel();
    t.view(&[n as i64])?
        .narrow(0, (n - tail) as i64, tail as i64)
}

/// Which elements of a unary op of the f16/bf16 `x` into an output of
/// `out_strides` PyTorch's CPU `cpu_kernel_vec` hands to its scalar functor
/// (row-major; `None` when none): [`crate::layout::pytorch_scalar_loop_mask`].
fn half_scalar_loop_mask(x: &Tensor, out_strides: &[usize]) -> Result<Option<Vec<bool>>> {
    let shape = x.shape();
    if shape.is_empty() {
        // A 0-d op is one scalar element.
        return Ok(Some(vec![true]));
    }
    let order = crate::layout::reorder_dims(shape, None, &[out_strides, x.strides()]);
    crate::layout::pytorch_scalar_loop_mask(
        shape,
        &order,
        &[out_strides, x.strides()],
        HALF_VEC_CHUNK,
    )
}

/// GELU's `approximate` argument (`F.gelu(x, approximate=...)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GeluApprox {
    /// `"none"`: the exact `x / 2 * (1 + erf(x / sqrt 2))`.
    #[default]
    None,
    /// `"tanh"`: `x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`.
    Tanh,
}

impl Tensor {
    /// GELU (`F.gelu(x, approximate)`), float tensors only. As in PyTorch,
    /// `gelu(-inf)` is NaN (`x * 0`); f16/bf16 compute in f32.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, GeluApprox};
    /// let x = Tensor::from_slice(&[0.0f32, 1.0], &[2], Device::Cpu).unwrap();
    /// let y = x.gelu(GeluApprox::None).unwrap().to_vec::<f32>().unwrap();
    /// assert!((y[1] - 0.841_344_7).abs() < 1e-6);
    /// assert!(Tensor::from_slice(&[1i32], &[1], Device::Cpu).unwrap().gelu(GeluApprox::Tanh).is_err());
    /// ```
    pub fn gelu(&self, approximate: GeluApprox) -> Result<Tensor> {
        use crate::ops::table::UnaryFn;
        let f = match approximate {
            GeluApprox::None => UnaryFn::Gelu,
            GeluApprox::Tanh => UnaryFn::GeluTanh,
        };
        let exact_cpu = approximate == GeluApprox::None && self.device() == crate::Device::Cpu;
        if exact_cpu && self.dtype() == DType::F32 && !(self.is_contiguous() && self.numel() > 1) {
            // PyTorch calls oneDNN (the table's f32 `Gelu`) only for a
            // contiguous tensor of two elements or more; any other goes
            // through `GeluKernelImpl`, vectorised and scalar loops.
            let out = self.unary(UnaryOp::Map(UnaryFn::GeluVec), f.name(false), false)?;
            self.gelu_scalar_loop(&out, F32_VEC_CHUNK)?;
            return Ok(out);
        }
        let out = self.unary(UnaryOp::Map(f), f.name(false), false)?;
        if exact_cpu && matches!(self.dtype(), DType::F16 | DType::BF16) {
            self.gelu_scalar_loop(&out, HALF_VEC_CHUNK)?;
        }
        Ok(out)
    }

    /// PyTorch's CPU exact GELU of an f16/bf16 tensor, and of an f32 one
    /// that is not contiguous or has fewer than two elements
    /// (`GeluKernelImpl` through `cpu_kernel_vec`), takes
    /// `Vectorized<float>::erf` in its vectorised loop (strata's
    /// `Math::gelu_vec_`, which `out` holds) and `std::erf` in f32 in its
    /// scalar functor (`float(x) * 0.5f * (1.0f + std::erf(float(x) *
    /// M_SQRT1_2))`: `Math::gelu_scalar_`, rounded back), which differ on
    /// 217 of the 65,536 f16 values, 3 bf16 ones and about a quarter of
    /// f32 values. The scalar functor takes the elements past the last
    /// whole `chunk` (32 for f16/bf16, 16 for f32) of each of
    /// TensorIterator's inner rows, and every element where the input is
    /// not contiguous along them ([`crate::layout::pytorch_scalar_loop_mask`], the output
    /// dense in TensorIterator's order as PyTorch allocates it): those are
    /// overwritten in `out` with the scalar functor's values.
    fn gelu_scalar_loop(&self, out: &Tensor, chunk: usize) -> Result<()> {
        use crate::ops::table::UnaryFn;
        let scalar_gelu = |x: &Tensor| -> Result<Tensor> {
            let f = UnaryOp::Map(UnaryFn::GeluScalar);
            if x.dtype() == DType::F32 {
                x.unary(f, "gelu", false)
            } else {
                x.to_dtype_contiguous(DType::F32)?
                    .unary(f, "gelu", false)?
                    .to_dtype_contiguous(self.dtype())
            }
        };
        let n = self.numel();
        if n > 0 && self.is_contiguous() && out.is_contiguous() {
            // One inner row: the scalar loop takes the last `n % chunk`.
            let tail = n % chunk;
            if tail > 0 {
                last_of(out, tail)?.copy_(&scalar_gelu(&last_of(self, tail)?)?)?;
            }
            return Ok(());
        }
        let shape = self.shape();
        let order = crate::layout::reorder_dims(shape, None, &[self.strides()]);
        let out_strides = pytorch_out_strides(self);
        let Some(mask) = crate::layout::pytorch_scalar_loop_mask(
            shape,
            &order,
            &[&out_strides, self.strides()],
            chunk,
        )?
        else {
            return Ok(());
        };
        let scalar = scalar_gelu(self)?;
        let mask = Tensor::from_vec(mask, shape, crate::Device::Cpu)?;
        out.copy_(&Tensor::where_cond(&mask, &scalar, out)?)?;
        Ok(())
    }

    /// The gradient of [`Tensor::gelu`]: `self * gelu'(x)` for the upstream
    /// gradient `self` and GELU's input `x` (broadcasting and type promotion
    /// as a binary op: an integer or bool operand beside a float one computes
    /// in the float dtype, two non-float operands are an error), in one pass
    /// (PyTorch's `gelu_backward`); f16/bf16 compute in f32.
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device, GeluApprox};
    /// let x = Tensor::from_slice(&[0.0f32], &[1], Device::Cpu).unwrap();
    /// let g = Tensor::from_slice(&[2.0f32], &[1], Device::Cpu).unwrap();
    /// // gelu'(0) = 1/2 in both forms
    /// let d = g.gelu_backward(&x, GeluApprox::Tanh).unwrap().to_vec::<f32>().unwrap();
    /// assert_eq!(d, vec![1.0]);
    /// ```
    pub fn gelu_backward(&self, x: &Tensor, approximate: GeluApprox) -> Result<Tensor> {
        let op = match approximate {
            GeluApprox::None => BinaryOp::GeluBackward,
            GeluApprox::Tanh => BinaryOp::GeluTanhBackward,
        };
        // PyTorch promotes the two (an integer or bool gradient beside a
        // float input computes in the float dtype); its kernel takes only a
        // float promoted type.
        if !result_type(&[Operand::Tensor(self), Operand::Tensor(x)]).is_float() {
            return Err(TensorError::dtype(
                "gelu_backward",
                format!(
                    "the gradient and the input must promote to a float dtype, not {} and {}",
                    self.dtype(),
                    x.dtype()
                ),
            ));
        }
        self.binary(op, Operand::Tensor(x), false)
    }

    /// `torch.pow(base, exponent)` with a scalar base: broadcasting and type
    /// promotion as for [`Tensor::pow`] (an int base with an integer exponent
    /// tensor stays integer and wraps; negative integer exponents give the
    /// truncated `1 / base^n`).
    ///
    /// ```
    /// use strata_tensor::{Tensor, Device};
    /// let e = Tensor::from_slice(&[0i64, 3, 62], &[3], Device::Cpu).unwrap();
    /// let p = Tensor::scalar_pow(2, &e).unwrap();
    /// assert_eq!(p.to_vec::<i64>().unwrap(), vec![1, 8, 1 << 62]);
    /// ```
    pub fn scalar_pow(base: impl Into<Scalar>, exponent: &Tensor) -> Result<Tensor> {
        let base = base.into();
        let compute = result_type(&[Operand::Scalar(base), Operand::Tensor(exponent)]);
        if compute == DType::Bool {
            return Err(TensorError::unsupported("pow", compute));
        }
        // The base enters converted to the compute dtype (wrapping, as
        // PyTorch's wrapped-number conversion does).
        let b = Tensor::from_scalars(&[base], &[], compute, exponent.device())?;
        // PyTorch resizes an empty output of its own here: the result is
        // row-major whatever the exponent's layout.
        b.binary(BinaryOp::Pow, Operand::Tensor(exponent), false)?
            .row_major_exact()
    }
}
