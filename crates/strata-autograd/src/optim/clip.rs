//! Gradient clipping: `clip_grad_norm_` and [`ClipGradNorm`] (PyTorch's
//! `torch.nn.utils.clip_grad_norm_`, any `norm_type`, `error_if_nonfinite`)
//! scale every gradient in place so that their joint norm is at most
//! `max_norm`, without a host synchronisation (unless `error_if_nonfinite`
//! asks to look at the norm); `clip_grad_value_` (PyTorch's
//! `torch.nn.utils.clip_grad_value_`) clamps every gradient element into
//! `[-clip_value, clip_value]`.

use crate::error::{AutogradError, Result};
use crate::ops::vector_norm;
use crate::var::Var;
use strata_tensor::{DType, Device, Tensor, TensorError};

/// Clips the gradients of `params` (those that have one) so that their
/// total 2-norm is at most `max_norm`, and returns the total norm before
/// clipping as a 0-d tensor on the parameters' device, in the promoted
/// dtype of the gradients (f16 for f16 gradients, f32 for f16 with bf16),
/// computed as PyTorch computes it (see the comments in the body).
/// [`ClipGradNorm`] takes PyTorch's other arguments (`norm_type`,
/// `error_if_nonfinite`).
///
/// Everything stays on the device: each gradient's norm, the norm of those
/// norms (`torch.linalg.vector_norm`'s rules for both), the clip coefficient
/// `min(max_norm / (norm + 1e-6), 1)` computed there, and every gradient
/// multiplied by it; nothing is read back
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
    ClipGradNorm::new(max_norm)?.clip(params)
}

/// `torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type,
/// error_if_nonfinite)`, its options set builder-style:
///
/// ```
/// use strata_autograd::{ClipGradNorm, Var};
/// use strata_tensor::{Device, Tensor};
/// let p = Var::parameter(Tensor::from_slice(&[0.0f32; 3], &[3], Device::Cpu)?)?;
/// p.set_grad(Some(Tensor::from_slice(&[3.0f32, -4.0, 1.0], &[3], Device::Cpu)?))?;
/// // The largest |g| is 4: scaled by 2 / (4 + 1e-6).
/// let norm = ClipGradNorm::new(2.0)?.with_norm_type(f64::INFINITY)?.clip(&[p.clone()])?;
/// assert_eq!(norm.item::<f32>()?, 4.0);
/// let g = p.grad().unwrap().to_vec::<f32>()?;
/// assert!((g[1] + 2.0).abs() < 1e-5);
/// # Ok::<(), strata_autograd::AutogradError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClipGradNorm {
    max_norm: f64,
    norm_type: f64,
    error_if_nonfinite: bool,
}

impl ClipGradNorm {
    /// Clipping to a total 2-norm of at most `max_norm`, without
    /// `error_if_nonfinite` (PyTorch's defaults).
    ///
    /// Any `max_norm` is taken, as PyTorch takes it: +inf is the usual way
    /// to get the norm without clipping (coefficient min(inf, 1) = 1), 0
    /// zeroes the gradients, a negative `max_norm` gives the negative
    /// coefficient `max_norm / (norm + 1e-6)` (every gradient flipped and
    /// scaled: `[3, -4]` clipped to -1 is `[-0.6, 0.8]`), and NaN makes
    /// every gradient NaN (the coefficient is NaN). The returned norm is the
    /// gradients' whatever `max_norm` is. (Sessions before 45 refused a
    /// negative or NaN `max_norm`; PyTorch 2.15 gives these answers.) It
    /// never fails; it returns a `Result` for the code written when it did.
    pub fn new(max_norm: f64) -> Result<ClipGradNorm> {
        Ok(ClipGradNorm {
            max_norm,
            norm_type: 2.0,
            error_if_nonfinite: false,
        })
    }

    /// PyTorch's `norm_type` (default 2): the order p of the norm, each
    /// gradient's `(sum |g|^p)^(1/p)` in its own dtype (accumulated in f32,
    /// or f64 for f64) and the total the same norm of those norms; +inf
    /// takes the largest `|g|`, -inf the smallest, 0 counts the nonzero
    /// elements (as `torch.linalg.vector_norm`; the total is then, as
    /// PyTorch's, the count of gradients with a nonzero element, the
    /// 0-"norm" of their counts). A negative order is taken
    /// as PyTorch takes it, `(sum |g|^p)^(1/p)`, though it is not a norm (a
    /// single zero element makes it 0). A NaN order is taken too, as
    /// PyTorch takes it: `torch.linalg.vector_norm`'s answers (NaN over two
    /// or more elements, `|g|` over one, 0 over none) make the total NaN
    /// and every gradient NaN, or a [`AutogradError::NonFiniteNorm`] with
    /// `error_if_nonfinite`. (Sessions before 46 refused it.) Every gradient
    /// and the total use `torch.linalg.vector_norm`'s rules, so a single
    /// gradient's order-3 norm is `|g|` for one element and the total of a
    /// single gradient is its norm, not `(n^3)^(1/3)` rounded twice. It
    /// never fails; it returns a `Result` for the code written when it did.
    pub fn with_norm_type(mut self, norm_type: f64) -> Result<ClipGradNorm> {
        self.norm_type = norm_type;
        Ok(self)
    }

    /// PyTorch's `error_if_nonfinite` (default false): when the total norm
    /// is NaN or infinite, fail with [`AutogradError::NonFiniteNorm`] and
    /// leave every gradient as it was (false scales them by the non-finite
    /// coefficient: NaN gradients, or zeros for an infinite norm). Reading
    /// the norm to check it waits for the device.
    pub fn with_error_if_nonfinite(mut self, error_if_nonfinite: bool) -> ClipGradNorm {
        self.error_if_nonfinite = error_if_nonfinite;
        self
    }

    /// Clips the gradients of `params` (those that have one; all on one
    /// device) and returns the total norm before clipping, as
    /// [`clip_grad_norm_`] does for the 2-norm. With no gradient the norm is
    /// a 0-d f32 zero and nothing changes, as PyTorch's. An error (an
    /// infinite order over an empty gradient, which PyTorch refuses too, a
    /// non-finite norm with `error_if_nonfinite`) changes no gradient.
    /// (An infinite or negative order over an empty gradient: PyTorch's
    /// "cannot compute the inf norm on an empty tensor".)
    pub fn clip(&self, params: &[Var]) -> Result<Tensor> {
        let grads: Vec<Tensor> = params.iter().filter_map(Var::grad).collect();
        let Some(first) = grads.first() else {
            let device = params.first().map_or(Device::Cpu, Var::device);
            return Ok(Tensor::zeros(&[], DType::F32, device)?);
        };
        if let Some(g) = grads.iter().find(|g| g.device() != first.device()) {
            return Err(AutogradError::Tensor(TensorError::DeviceMismatch {
                op: "clip_grad_norm_ (clip each device's parameters separately)",
                lhs: first.device(),
                rhs: g.device(),
            }));
        }
        super::check_grads_in_place("clip_grad_norm_", &grads)?;
        let p = self.norm_type;
        // The orders whose reduction has no identity (max, min, a sum of
        // |g|^p with p < 0 raised to 1/p) are undefined on no elements.
        if p.is_infinite() || p < 0.0 {
            if let Some(g) = grads.iter().find(|g| g.numel() == 0) {
                return Err(AutogradError::Optimizer {
                    optimizer: "clip_grad_norm_",
                    msg: format!(
                        "a gradient of shape {:?} is empty, and the norm of order {p} of no \
                         elements is not defined (the reduction has no identity; PyTorch \
                         refuses it too); leave that parameter out, or use a norm_type >= 0 \
                         that is finite",
                        g.shape()
                    ),
                });
            }
        }
        // PyTorch's algorithm (`torch.nn.utils.clip_grad_norm_`): each
        // gradient's norm in its own dtype (accumulated in f32, or f64 for
        // f64, then rounded to the dtype: an f16 gradient whose 2-norm passes
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
        // Every order, 2 included, through `vector_norm`, whose rules PyTorch's
        // clip uses: a norm over one element is `|x|`, never squared (a
        // one-element f32 gradient of 3e20 has the norm 3e20, not inf; until
        // session 71 the 2-norm summed squares here and gave inf), and the
        // total of a single gradient is that gradient's norm.
        let norms = grads
            .iter()
            .map(|g| {
                let a = g.to_dtype_contiguous(acc(g.dtype()))?;
                let n = vector_norm(&a.reshape(&[-1])?, p, &[0], false)?;
                Ok(n.to_dtype_contiguous(g.dtype())?
                    .to_dtype_contiguous(total_acc)?)
            })
            .collect::<Result<Vec<Tensor>>>()?;
        let refs: Vec<&Tensor> = norms.iter().collect();
        let norm = vector_norm(&Tensor::stack(&refs, 0)?, p, &[0], false)?;
        let norm = norm.to_dtype_contiguous(total_dtype)?;
        if self.error_if_nonfinite {
            let total = norm.item::<f64>()?;
            if !total.is_finite() {
                return Err(AutogradError::NonFiniteNorm {
                    norm_type: p,
                    total,
                });
            }
        }
        let coef = norm
            .add(1e-6)?
            .reciprocal()?
            .mul(self.max_norm)?
            .clamp(None::<f64>, Some(1.0))?;
        for g in &grads {
            g.mul_(&coef)?;
        }
        Ok(norm)
    }
}

/// Clamps every element of the gradients of `params` (those that have one)
/// into `[-clip_value, clip_value]`, in place: PyTorch's
/// `torch.nn.utils.clip_grad_value_` (NaN elements stay NaN).
///
/// Any `clip_value` is taken, as PyTorch takes it (its
/// `clamp_min_(-clip_value)` then `clamp_max_(clip_value)`): +inf leaves the
/// gradients as they are, a negative one sets every element that is not
/// NaN to `clip_value` (the clamp's minimum is above its maximum, and the
/// maximum is applied last), and NaN makes every element NaN. (Sessions
/// before 45 refused a negative or NaN `clip_value`.) Every gradient is
/// checked (float, not an expanded tensor, `clip_value` within its dtype's
/// range) before any is changed.
///
/// ```
/// use strata_autograd::{clip_grad_value_, Var};
/// use strata_tensor::{Device, Tensor};
/// let p = Var::parameter(Tensor::from_slice(&[0.0f32; 3], &[3], Device::Cpu)?)?;
/// p.set_grad(Some(Tensor::from_slice(&[3.0f32, -4.0, 0.5], &[3], Device::Cpu)?))?;
/// clip_grad_value_(&[p.clone()], 1.0)?;
/// assert_eq!(p.grad().unwrap().to_vec::<f32>()?, vec![1.0, -1.0, 0.5]);
/// # Ok::<(), strata_autograd::AutogradError>(())
/// ```
pub fn clip_grad_value_(params: &[Var], clip_value: f64) -> Result<()> {
    let grads: Vec<Tensor> = params.iter().filter_map(Var::grad).collect();
    for g in &grads {
        // One device per call is not needed here (each gradient is clamped
        // on its own), so check each on its own; so are the bounds, which
        // clamp_ converts to each gradient's dtype (70000 is beyond f16's).
        super::check_grads_in_place("clip_grad_value_", std::slice::from_ref(g))?;
        super::check_scalar_fits("clip_grad_value_", clip_value, g.dtype())?;
    }
    for g in &grads {
        g.clamp_(Some(-clip_value), Some(clip_value))?;
    }
    Ok(())
}
