//! Stochastic gradient descent (PyTorch's `SGD`, its single-tensor step):
//!
//! ```text
//! g = -g                                     (maximize)
//! g = g + weight_decay * p                   (weight_decay != 0)
//! buf = g                                    (momentum != 0, first step)
//! buf = momentum * buf + (1 - dampening) * g (momentum != 0, later steps)
//! g = g + momentum * buf                     (nesterov)
//! g = buf                                    (momentum != 0, not nesterov)
//! p = p - lr * g
//! ```
//!
//! Each `a.add(b, alpha=c)` of PyTorch's step (`grad.add(param,
//! alpha=weight_decay)`, `buf.add_(grad, alpha=1 - dampening)`,
//! `grad.add(buf, alpha=momentum)` and `param.add_(buf, alpha=-lr)`)
//! converts `alpha` to the tensor's dtype (f32 0.1 is 0.100000001490116,
//! bf16 0.1 is 0.10009765625) and rounds `a + alpha * b` once: a fused
//! multiply-add, in f32 for f16/bf16 and in the dtype for f32 and f64
//! (checked against PyTorch 2.15 on the CPU for f32 and f64 tensors of 1 to
//! 1000 elements: its vectorized loop calls `fmadd` and its compiler
//! contracts the scalar loop's `a + alpha * b` alike). strata did so for
//! f16/bf16 only and formed `alpha * b` first for f32/f64: a parameter then
//! moved one unit in the last place away from PyTorch's now and then, which
//! was enough to break a tie of `minimum` between an f32 parameter and an
//! f64 one read as f32 (gradient-oracle program 196:1272). For f16/bf16
//! PyTorch rounds `alpha * b` to the dtype first in the scalar loop that
//! updates a tensor's last `numel % 32` elements (AVX2); strata does the
//! same on the CPU for contiguous tensors since session 53 (before, it
//! rounded once everywhere, as the vectorized loop).

use super::state::{self, StateDict};
use super::{check, check_non_negative, Optimizer};
use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{DType, Device, Tensor};

/// `a + alpha * b` for float tensors, as PyTorch's `a.add(b, alpha)`
/// computes it (see the module docs): `alpha` converted to their dtype and
/// the sum rounded once. `addcmul(alpha, b, 1)` is `fma(1 * alpha, b, a)`
/// in the compute type of `addcmul` (f32 for f16/bf16; on the GPU too),
/// with an exact `1 * alpha`. The scalar tail of an f16/bf16 tensor on the
/// CPU is PyTorch's scalar loop ([`scalar_tail`]).
fn add_scaled(a: &Tensor, b: &Tensor, alpha: f64) -> Result<Tensor> {
    let tail = scalar_tail(a, b, alpha)?;
    let out = a.addcmul(&alpha_of(a, alpha)?, b, 1.0)?;
    if let Some((start, t)) = tail {
        last(&out, start)?.copy_(&t)?;
    }
    Ok(out)
}

/// `p += alpha * b` in place, as [`add_scaled`].
fn add_scaled_(p: &Tensor, b: &Tensor, alpha: f64) -> Result<()> {
    // The tail is formed from `p`'s values before the update.
    let tail = scalar_tail(p, b, alpha)?;
    p.addcmul_(&alpha_of(p, alpha)?, b, 1.0)?;
    if let Some((start, t)) = tail {
        last(p, start)?.copy_(&t)?;
    }
    Ok(())
}

/// How many trailing elements PyTorch's CPU kernels leave to their scalar
/// loop for f16 and bf16: `cpu_kernel_vec` steps two vectors of 16 (AVX2,
/// the CPU capability of the PyTorch 2.15 build the fixtures come from) at
/// a time and hands the last `numel % 32` elements to the scalar functor.
const REDUCED_TAIL: usize = 32;

/// PyTorch's scalar loop of `a.add(b, alpha)` over the last `numel % 32`
/// elements of f16/bf16 tensors on the CPU: `a + alpha * b` in the dtype's
/// arithmetic, the product rounded to the dtype before the sum (`c10::Half`
/// and `c10::BFloat16` operators), where its vectorized loop (the other
/// elements) rounds once, as `addcmul` does. `Some((start, tail values))`
/// for contiguous `a` and `b` of one shape and dtype with such a tail, else
/// `None` (f32/f64 round once in both loops; other layouts keep the one
/// rounding). Before session 53 those elements were rounded once, an ulp
/// or more away from PyTorch's now and then (SGD on f16/bf16 tensors of
/// fewer than 32 elements, `tests/suite/optim_tails_s53.rs`).
fn scalar_tail(a: &Tensor, b: &Tensor, alpha: f64) -> Result<Option<(usize, Tensor)>> {
    let n = a.numel();
    let t = n % REDUCED_TAIL;
    let applies = t > 0
        && matches!(a.dtype(), DType::F16 | DType::BF16)
        && a.device() == Device::Cpu
        && b.dtype() == a.dtype()
        && b.device() == a.device()
        && a.shape() == b.shape()
        && a.is_contiguous()
        && b.is_contiguous();
    if !applies {
        return Ok(None);
    }
    let start = n - t;
    let prod = last(b, start)?.mul(&alpha_of(a, alpha)?)?;
    Ok(Some((start, last(a, start)?.add(&prod)?)))
}

/// The elements of contiguous `t` from `start` on, as a 1-d view.
fn last(t: &Tensor, start: usize) -> Result<Tensor> {
    let n = t.numel();
    Ok(t.view(&[n as i64])?
        .narrow(0, start as i64, (n - start) as i64)?)
}

/// `alpha` as a 0-d tensor of `t`'s dtype on its device (PyTorch's
/// `alpha.to<scalar_t>()`).
fn alpha_of(t: &Tensor, alpha: f64) -> Result<Tensor> {
    Ok(Tensor::full(&[], alpha, t.dtype(), t.device())?)
}

/// What `dampening` accepts.
const DAMPENING: &str = "a number, not NaN (PyTorch's default 0; 1 - dampening scales each \
                         gradient added to the momentum buffer)";

/// SGD with optional momentum (with dampening or Nesterov's), weight decay
/// and maximization.
pub struct Sgd {
    params: Vec<Var>,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    dampening: f64,
    nesterov: bool,
    maximize: bool,
    /// One momentum buffer per parameter, created at its first step.
    buffers: Vec<Option<Tensor>>,
}

/// A dampening is any number but NaN (PyTorch checks none).
fn check_dampening(dampening: f64) -> Result<()> {
    check(
        "SGD",
        "dampening",
        dampening,
        !dampening.is_nan(),
        DAMPENING,
    )
}

/// PyTorch's constructor rule: Nesterov momentum needs a momentum and no
/// dampening.
fn check_nesterov(nesterov: bool, momentum: f64, dampening: f64) -> Result<()> {
    if nesterov && !(momentum > 0.0 && dampening == 0.0) {
        return Err(AutogradError::OptimizerOptions {
            optimizer: "SGD",
            msg: format!(
                "Nesterov momentum requires a momentum and zero dampening (momentum = \
                 {momentum}, dampening = {dampening}); make the optimizer with a momentum > 0 \
                 and leave dampening at 0, or turn nesterov off"
            ),
        });
    }
    Ok(())
}

impl Sgd {
    /// SGD over `params` with learning rate `lr` and `momentum` (0 for plain
    /// SGD); no weight decay, no dampening, no Nesterov momentum, minimizing.
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
            dampening: 0.0,
            nesterov: false,
            maximize: false,
            buffers,
        })
    }

    /// Adds `weight_decay * p` to each gradient before the update.
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Result<Sgd> {
        check_non_negative("SGD", "weight decay", weight_decay)?;
        self.weight_decay = weight_decay;
        Ok(self)
    }

    /// PyTorch's `dampening` (default 0): after the first step, the momentum
    /// buffer becomes `momentum * buf + (1 - dampening) * g` (the first step
    /// still sets it to `g`, as PyTorch's). Any number but NaN, as PyTorch
    /// (which checks none; strata refuses NaN, which would make every
    /// weight NaN). A dampening other than 0 with Nesterov momentum is an
    /// [`AutogradError::OptimizerOptions`] error; without momentum it has
    /// no effect.
    pub fn with_dampening(mut self, dampening: f64) -> Result<Sgd> {
        check_dampening(dampening)?;
        check_nesterov(self.nesterov, self.momentum, dampening)?;
        self.dampening = dampening;
        Ok(self)
    }

    /// PyTorch's `nesterov` (default false): Nesterov momentum, stepping by
    /// `g + momentum * buf` instead of `buf`. Needs a momentum above 0 and
    /// no dampening (PyTorch's `ValueError` "Nesterov momentum requires a
    /// momentum and zero dampening"); otherwise an
    /// [`AutogradError::OptimizerOptions`] error.
    pub fn with_nesterov(mut self, nesterov: bool) -> Result<Sgd> {
        check_nesterov(nesterov, self.momentum, self.dampening)?;
        self.nesterov = nesterov;
        Ok(self)
    }

    /// PyTorch's `maximize` (default false): ascend the objective, stepping
    /// along the gradient (the step starts from `-g`, negated exactly).
    pub fn with_maximize(mut self, maximize: bool) -> Sgd {
        self.maximize = maximize;
        self
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

    /// As for every optimizer; `dampening`, `nesterov` and `maximize` are
    /// written when they differ from their defaults (see [`StateDict`]).
    fn state_dict(&self) -> Result<StateDict> {
        let mut d = StateDict::new();
        d.insert(state::hyper_key("lr"), state::scalar(self.lr)?);
        d.insert(state::hyper_key("momentum"), state::scalar(self.momentum)?);
        d.insert(
            state::hyper_key("weight_decay"),
            state::scalar(self.weight_decay)?,
        );
        if self.dampening != 0.0 {
            d.insert(
                state::hyper_key("dampening"),
                state::scalar(self.dampening)?,
            );
        }
        state::write_flag(&mut d, "nesterov", self.nesterov)?;
        state::write_flag(&mut d, "maximize", self.maximize)?;
        for (i, b) in self.buffers.iter().enumerate() {
            if let Some(b) = b {
                d.insert(state::state_key(i, "momentum_buffer"), state::copy(b)?);
            }
        }
        Ok(d)
    }

    /// As for every optimizer; the saved `dampening`, `nesterov` and
    /// `maximize` replace the optimizer's (their defaults where the state
    /// has none, as PyTorch's), checked as [`Sgd::with_nesterov`] checks
    /// them.
    fn load_state_dict(&mut self, dict: &StateDict) -> Result<()> {
        let mut r = state::Reader::new("SGD", dict);
        let (lr, momentum) = (r.hyper("lr")?, r.hyper("momentum")?);
        let weight_decay = r.hyper("weight_decay")?;
        let dampening = r.hyper_or("dampening", 0.0)?;
        let (nesterov, maximize) = (r.flag("nesterov")?, r.flag("maximize")?);
        check_non_negative("SGD", "learning rate", lr)?;
        check_non_negative("SGD", "momentum", momentum)?;
        check_non_negative("SGD", "weight decay", weight_decay)?;
        check_dampening(dampening)?;
        check_nesterov(nesterov, momentum, dampening)?;
        let buffers = self
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| r.like(i, "momentum_buffer", p))
            .collect::<Result<Vec<_>>>()?;
        r.finish(self.params.len())?;
        (self.lr, self.momentum, self.weight_decay) = (lr, momentum, weight_decay);
        (self.dampening, self.nesterov, self.maximize) = (dampening, nesterov, maximize);
        self.buffers = buffers;
        Ok(())
    }

    /// The parameters and gradients as every optimizer checks them, and
    /// each `alpha` this step converts to a parameter's dtype (`-lr`, the
    /// weight decay, `1 - dampening` once the parameter has a momentum
    /// buffer, the momentum with Nesterov's): PyTorch refuses one beyond the
    /// dtype's range ("value cannot be converted to type c10::Half without
    /// overflow" for an lr of 1e5 on an f16 parameter) after updating the
    /// parameters before it; strata refuses it before updating any.
    fn check_step(&self) -> Result<()> {
        super::check_step("SGD", &self.params, false)?;
        for (p, buf) in self.params.iter().zip(&self.buffers) {
            if p.grad().is_none() {
                continue;
            }
            let dtype = p.dtype();
            let fits = |alpha: f64| super::check_scalar_fits("SGD", alpha, dtype);
            fits(-self.lr)?;
            if self.weight_decay != 0.0 {
                fits(self.weight_decay)?;
            }
            if self.momentum != 0.0 {
                if buf.is_some() {
                    fits(1.0 - self.dampening)?;
                }
                if self.nesterov {
                    fits(self.momentum)?;
                }
            }
        }
        Ok(())
    }

    fn step(&mut self) -> Result<()> {
        self.check_step()?;
        for (p, buf) in self.params.iter().zip(self.buffers.iter_mut()) {
            let Some(g) = p.grad() else { continue };
            // PyTorch: `grad = grads[i] if not maximize else -grads[i]`.
            let g = if self.maximize { g.neg()? } else { g };
            let g = if self.weight_decay == 0.0 {
                g
            } else {
                add_scaled(&g, p.data(), self.weight_decay)?
            };
            let d = if self.momentum != 0.0 {
                let b = match buf {
                    Some(b) => {
                        b.mul_(self.momentum)?;
                        // `buf.add_(grad, alpha=1 - dampening)`.
                        add_scaled_(b, &g, 1.0 - self.dampening)?;
                        b.clone()
                    }
                    None => {
                        let b = g.deep_clone()?;
                        *buf = Some(b.clone());
                        b
                    }
                };
                if self.nesterov {
                    add_scaled(&g, &b, self.momentum)?
                } else {
                    b
                }
            } else {
                g
            };
            add_scaled_(p.data(), &d, -self.lr)?;
        }
        Ok(())
    }
}
