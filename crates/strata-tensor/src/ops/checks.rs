//! PyTorch's argument checks for scalar arguments of ops: the computation
//! dtype an op promotes to, and whether each scalar converts to it without
//! overflow (`checked_convert`).

use super::elementwise::{result_type, Operand};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::scalar::Scalar;
use crate::tensor::Tensor;

/// `value` must convert to `dtype` without overflow, or a
/// [`TensorError::Value`] in PyTorch's words.
pub(crate) fn check_fits(op: &'static str, value: Scalar, dtype: DType) -> Result<()> {
    if value.fits(dtype) {
        return Ok(());
    }
    Err(TensorError::value(
        op,
        format!(
            "value {value} cannot be converted to type {} without overflow",
            dtype.torch_name()
        ),
    ))
}

/// The dtype `clamp(x, min, max)` computes in: `x`'s dtype promoted with the
/// scalar bounds (a float bound on an integer tensor gives f32, an int bound
/// on a bool tensor gives i64). As in PyTorch there is no bool clamp kernel.
/// The bounds themselves are checked by [`clamp_bounds`] (after an in-place
/// clamp has checked that this dtype fits its output, as PyTorch does).
pub(crate) fn clamp_dtype(
    op: &'static str,
    x: &Tensor,
    lo: Option<Scalar>,
    hi: Option<Scalar>,
) -> Result<DType> {
    let mut ops = vec![Operand::Tensor(x)];
    ops.extend(lo.map(Operand::Scalar));
    ops.extend(hi.map(Operand::Scalar));
    let dtype = result_type(&ops);
    if dtype == DType::Bool {
        return Err(TensorError::dtype(
            op,
            "clamp is not implemented for bool tensors with bool bounds",
        ));
    }
    Ok(dtype)
}

/// clamp's bounds as PyTorch 2.15 takes them for the computation dtype
/// `dtype`. A float dtype needs each bound to convert without overflow (a
/// bound of 70000 on an f16 tensor is an error, not inf). An integer dtype
/// compares the bounds with its range: a min above the largest value, or a
/// max below the smallest, is a `Value` error ("Clamp min value 300 is
/// outside the representable range of Byte"); a min below the smallest value
/// or a max above the largest clamps nothing and is dropped (u8 clamp(-1) is
/// the identity; earlier PyTorch versions wrapped -1 to 255).
pub(crate) fn clamp_bounds(
    op: &'static str,
    dtype: DType,
    lo: Option<Scalar>,
    hi: Option<Scalar>,
) -> Result<(Option<Scalar>, Option<Scalar>)> {
    if dtype.is_float() {
        for v in [lo, hi].into_iter().flatten() {
            check_fits(op, v, dtype)?;
        }
        return Ok((lo, hi));
    }
    let (min, max): (i128, i128) = match dtype {
        DType::U8 => (0, 255),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    };
    let int = |v: Scalar| -> i128 {
        match v {
            Scalar::Int(i) => i as i128,
            Scalar::Bool(b) => b as i128,
            // A float bound makes the computation dtype a float one.
            Scalar::Float(f) => f as i128,
        }
    };
    let outside = |what: &str, v: Scalar| {
        TensorError::value(
            op,
            format!(
                "Clamp {what} value {v} is outside the representable range of {}",
                dtype.torch_name()
            ),
        )
    };
    let lo = match lo {
        Some(v) if int(v) > max => return Err(outside("min", v)),
        Some(v) if int(v) < min => None,
        b => b,
    };
    let hi = match hi {
        Some(v) if int(v) < min => return Err(outside("max", v)),
        Some(v) if int(v) > max => None,
        b => b,
    };
    Ok((lo, hi))
}
