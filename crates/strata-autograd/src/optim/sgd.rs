//! Stochastic gradient descent with momentum (PyTorch's `SGD`, no dampening,
//! no Nesterov): `buf = momentum * buf + g; p -= lr * buf`.
//!
//! f16 and bf16 parameters are updated with PyTorch's rounding: its step's
//! `grad.add(param, alpha=weight_decay)` and `param.add_(buf, alpha=-lr)`
//! convert `alpha` to the parameter's dtype (bf16 0.1 is 0.10009765625) and,
//! in the vectorized loop that updates all but a tensor's last few elements
//! (`numel % 32` on AVX2), round `p + alpha * buf` once (a fused
//! multiply-add in f32). Rounding `lr * buf` to bf16 first, as strata did,
//! moved a bf16 weight one unit in the last place away from PyTorch's now
//! and then, and training runs drifted apart from there.

use super::state::{self, StateDict};
use super::{check_non_negative, Optimizer};
use crate::error::Result;
use crate::var::Var;
use strata_tensor::{DType, Device, Tensor};

/// `a + alpha * b` for f16/bf16 tensors, as PyTorch's `a.add(b, alpha)`
/// computes it (see the module docs): `alpha` converted to their dtype, the
/// sum formed in f32 and rounded once.
fn add_scaled(a: &Tensor, b: &Tensor, alpha: f64) -> Result<Tensor> {
    Ok(a.addcmul(b, &one(a)?, in_dtype(alpha, a.dtype())?)?)
}

/// `p += alpha * b` in place, as [`add_scaled`].
fn add_scaled_(p: &Tensor, b: &Tensor, alpha: f64) -> Result<()> {
    p.addcmul_(b, &one(p)?, in_dtype(alpha, p.dtype())?)?;
    Ok(())
}

/// A 0-d one of `t`'s dtype on its device (the factor that makes
/// `addcmul` an `add` with `alpha`).
fn one(t: &Tensor) -> Result<Tensor> {
    Ok(Tensor::ones(&[], t.dtype(), t.device())?)
}

/// `x` converted to `dtype` (on the host).
fn in_dtype(x: f64, dtype: DType) -> Result<f64> {
    Ok(Tensor::full(&[], x, dtype, Device::Cpu)?.item::<f64>()?)
}

/// SGD with optional momentum and weight decay.
pub struct Sgd {
    params: Vec<Var>,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    /// One momentum buffer per parameter, created at its first step.
    buffers: Vec<Option<Tensor>>,
}

impl Sgd {
    /// SGD over `params` with learning rate `lr` and `momentum` (0 for plain SGD).
    pub fn new(params: Vec<Var>, lr: f64, momentum: f64) -> Result<Sgd> {
        check_non_negative("SGD", "learning rate", lr)?;
        check_non_negative("SGD", "momentum", momentum)?;
        super::check_distinct("SGD", &params)?;
        let buffers = vec![None; params.len()];
        Ok(Sgd {
            params,
            lr,
            momentum,
            weight_decay: 0.0,
            buffers,
        })
    }

    /// Adds `weight_decay * p` to each gradient before the update.
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Result<Sgd> {
        check_non_negative("SGD", "weight decay", weight_decay)?;
        self.weight_decay = weight_decay;
        Ok(self)
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// Sets the learning rate (for schedules; `>= 0`).
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        check_non_negative("SGD", "learning rate", lr)?;
        self.lr = lr;
        Ok(())
    }

    /// Bytes held by the momentum buffers.
    pub fn state_bytes(&self) -> usize {
        self.buffers
            .iter()
            .flatten()
            .map(|b| b.numel() * b.dtype().size())
            .sum()
    }
}

impl Optimizer for Sgd {
    fn params(&self) -> &[Var] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) -> Result<()> {
        Sgd::set_lr(self, lr)
    }

    fn state_dict(&self) -> Result<StateDict> {
        let mut d = StateDict::new();
        d.insert(state::hyper_key("lr"), state::scalar(self.lr)?);
        d.insert(state::hyper_key("momentum"), state::scalar(self.momentum)?);
        d.insert(
            state::hyper_key("weight_decay"),
            state::scalar(self.weight_decay)?,
        );
        for (i, b) in self.buffers.iter().enumerate() {
            if let Some(b) = b {
                d.insert(state::state_key(i, "momentum_buffer"), state::copy(b)?);
            }
        }
        Ok(d)
    }

    fn load_state_dict(&mut self, dict: &StateDict) -> Result<()> {
        let mut r = state::Reader::new("SGD", dict);
        let (lr, momentum) = (r.hyper("lr")?, r.hyper("momentum")?);
        let weight_decay = r.hyper("weight_decay")?;
        check_non_negative("SGD", "learning rate", lr)?;
        check_non_negative("SGD", "momentum", momentum)?;
        check_non_negative("SGD", "weight decay", weight_decay)?;
        let buffers = self
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| r.like(i, "momentum_buffer", p))
            .collect::<Result<Vec<_>>>()?;
        r.finish(self.params.len())?;
        (self.lr, self.momentum, self.weight_decay) = (lr, momentum, weight_decay);
        self.buffers = buffers;
        Ok(())
    }

    fn step(&mut self) -> Result<()> {
        super::check_step("SGD", &self.params, false)?;
        for (p, buf) in self.params.iter().zip(self.buffers.iter_mut()) {
            let Some(g) = p.grad() else { continue };
            let low = matches!(p.dtype(), DType::F16 | DType::BF16);
            let g = if self.weight_decay == 0.0 {
                g
            } else if low {
                add_scaled(&g, p.data(), self.weight_decay)?
            } else {
                g.add(&p.data().mul(self.weight_decay)?)?
            };
            let d = if self.momentum != 0.0 {
                match buf {
                    Some(b) => {
                        b.mul_(self.momentum)?.add_(&g)?;
                        b.clone()
                    }
                    None => {
                        let b = g.deep_clone()?;
                        *buf = Some(b.clone());
                        b
                    }
                }
            } else {
                g
            };
            if low {
                add_scaled_(p.data(), &d, -self.lr)?;
            } else {
                p.data().sub_(&d.mul(self.lr)?)?;
            }
        }
        Ok(())
    }
}
