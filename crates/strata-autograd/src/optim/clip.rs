//! `clip_grad_norm_` (PyTorch's `torch.nn.utils.clip_grad_norm_`, 2-norm):
//! scales every gradient in place so that their joint norm is at most
//! `max_norm`, without a host synchronisation.

use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{DType, Tensor};

/// Clips the gradients of `params` (those that have one) so that their
/// total 2-norm is at most `max_norm`, and returns the total norm before
/// clipping as a 0-d tensor on the parameters' device, in the promoted
/// dtype of the gradients (f16 for f16 gradients, f32 for f16 with bf16),
/// computed as PyTorch computes it (see the comments in the body).
///
/// Everything stays on the device: one squared-sum per gradient added into
/// one device scalar, the clip coefficient `min(max_norm / (norm + 1e-6), 1)`
/// computed there, and every gradient multiplied by it; nothing is read back
/// (read the returned norm when you need it on the host).
///
/// ```
/// use strata_autograd::{clip_grad_norm_, Var};
/// use strata_tensor::{DType, Device, Tensor};
/// let p = Var::parameter(Tensor::zeros(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
/// p.set_grad(Some(Tensor::from_slice(&[3.0f32, 4.0], &[2], Device::Cpu).unwrap())).unwrap();
/// let norm = clip_grad_norm_(&[p.clone()], 1.0).unwrap();
/// assert!((norm.item::<f32>().unwrap() - 5.0).abs() < 1e-5);
/// let g = p.grad().unwrap().to_vec::<f32>().unwrap();
/// assert!((g[0] - 0.6).abs() < 1e-5 && (g[1] - 0.8).abs() < 1e-5);
/// ```
pub fn clip_grad_norm_(params: &[Var], max_norm: f64) -> Result<Tensor> {
    // PyTorch takes any max_norm: +inf is the usual way to get the norm
    // without clipping (coefficient min(inf, 1) = 1), and 0 zeroes the
    // gradients. A NaN (every gradient NaN) or negative max_norm (every
    // gradient flipped) is refused here.
    if max_norm.is_nan() || max_norm < 0.0 {
        return Err(AutogradError::Hyperparameter {
            optimizer: "clip_grad_norm_",
            name: "max_norm",
            value: max_norm,
            expected: "a number >= 0 (+inf included: no clipping), not NaN",
        });
    }
    let grads: Vec<Tensor> = params.iter().filter_map(Var::grad).collect();
    let Some(first) = grads.first() else {
        let device = params
            .first()
            .map_or(strata_tensor::Device::Cpu, Var::device);
        return Ok(Tensor::zeros(&[], DType::F32, device)?);
    };
    if let Some(g) = grads.iter().find(|g| g.device() != first.device()) {
        return Err(AutogradError::Tensor(
            strata_tensor::TensorError::DeviceMismatch {
                op: "clip_grad_norm_ (clip each device's parameters separately)",
                lhs: first.device(),
                rhs: g.device(),
            },
        ));
    }
    super::check_grads_in_place("clip_grad_norm_", &grads)?;
    // PyTorch's algorithm (`torch.nn.utils.clip_grad_norm_`): each
    // gradient's norm in its own dtype (squares summed in f32, or f64 for
    // f64, then rounded to the dtype: an f16 gradient whose norm passes
    // 65504 has an infinite norm), the total the norm of those norms in
    // their promoted dtype (f16 and bf16 together: f32; any f64: f64; so
    // f64 gradients above about 1e19 do not overflow an f32 total), the
    // coefficient `clamp((total + 1e-6).reciprocal() * max_norm, max=1)`
    // in that dtype (Python's `max_norm / t` is `t.reciprocal() *
    // max_norm`), each gradient multiplied by it in place as a 0-d tensor
    // operand (computed in f32 for f16/bf16 gradients, not rounded to
    // their dtype first).
    let acc = |d: DType| {
        if d == DType::F64 {
            DType::F64
        } else {
            DType::F32
        }
    };
    let total_dtype = grads[1..]
        .iter()
        .fold(first.dtype(), |d, g| d.promote(g.dtype()));
    let total_acc = acc(total_dtype);
    let total = Tensor::zeros(&[], total_acc, first.device())?;
    for g in &grads {
        let a = g.to_dtype(acc(g.dtype()))?;
        let norm = a.mul(&a)?.sum(None, false)?.sqrt()?.to_dtype(g.dtype())?;
        let norm = norm.to_dtype(total_acc)?;
        total.add_(&norm.mul(&norm)?)?;
    }
    let norm = total.sqrt()?.to_dtype(total_dtype)?;
    let coef = norm
        .add(1e-6)?
        .reciprocal()?
        .mul(max_norm)?
        .clamp(None::<f64>, Some(1.0))?;
    for g in &grads {
        g.mul_(&coef)?;
    }
    Ok(norm)
}
