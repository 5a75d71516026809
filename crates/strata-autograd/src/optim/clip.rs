//! `clip_grad_norm_` (PyTorch's `torch.nn.utils.clip_grad_norm_`, 2-norm):
//! scales every gradient in place so that their joint norm is at most
//! `max_norm`, without a host synchronisation.

use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{DType, Tensor};

/// Clips the gradients of `params` (those that have one) so that their
/// total 2-norm is at most `max_norm`, and returns the total norm before
/// clipping as a 0-d tensor on the parameters' device: f64 when a gradient
/// is f64 (the norm is then formed in f64, as PyTorch's), f32 otherwise.
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
    // The norm is formed in f64 when a gradient is f64 (PyTorch's total
    // norm has the widest gradient dtype): summed into an f32 total, f64
    // gradients above about 1e19 made the norm inf and the coefficient 0,
    // zeroing every gradient, and ones below about 1e-23 made it 0 and
    // left them unclipped.
    let acc = if grads.iter().any(|g| g.dtype() == DType::F64) {
        DType::F64
    } else {
        DType::F32
    };
    let total = Tensor::zeros(&[], acc, first.device())?;
    for g in &grads {
        // Half-precision gradients are squared in f32 (PyTorch's norm
        // accumulates in f32): squared in f16, any element above 256 became
        // inf, the norm inf and the clip coefficient 0, zeroing every
        // gradient.
        let g = match g.dtype() {
            DType::F16 | DType::BF16 => g.to_dtype(DType::F32)?,
            _ => g.clone(),
        };
        let sq = g.mul(&g)?.sum(None, false)?;
        total.add_(&sq)?;
    }
    let norm = total.sqrt()?;
    let coef = norm.add(1e-6)?;
    let coef = Tensor::full(&[], max_norm, acc, first.device())?
        .div(&coef)?
        .clamp(None::<f64>, Some(1.0))?;
    for g in &grads {
        if g.dtype() == acc {
            g.mul_(&coef)?;
        } else {
            g.mul_(&coef.to_dtype(g.dtype())?)?;
        }
    }
    Ok(norm)
}
