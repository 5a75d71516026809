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
/// on a bool tensor gives i64). As in PyTorch there is no bool clamp kernel,
/// and each bound must convert to that dtype without overflow (a bound of
/// 70000 on an f16 tensor is an error, not inf).
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
    for v in [lo, hi].into_iter().flatten() {
        check_fits(op, v, dtype)?;
    }
    Ok(dtype)
}
