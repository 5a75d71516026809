//! Adam (PyTorch's `Adam`):
//! `m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
//! p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)`, fused over the
//! list of parameters ([`Tensor::adam_step_list_with_`]); with PyTorch's
//! `amsgrad` (divide by the root of the running maximum of `v`) and
//! `maximize` (ascend: use `-g`).

use super::adam_lists::AdamLists;
use super::state::{self, AdamHypers, AdamState, StateDict};
use super::{check, check_non_negative, Optimizer};
use crate::error::{AutogradError, Result};
use crate::var::Var;
use strata_tensor::{AdamHyper, Tensor};

/// What the betas accept.
pub(crate) const BETA: &str = "a number in [0, 1), e.g. 0.9";

/// Per-parameter state, created at the parameter's first step.
struct State {
    step: i32,
    m: Tensor,
    v: Tensor,
    /// The running maximum of `v` (AMSGrad only).
    max: Option<Tensor>,
}

/// The Adam optimizer.
pub struct Adam {
    params: Vec<Var>,
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    amsgrad: bool,
    maximize: bool,
    /// PyTorch's `fused=True` (see [`Adam::with_fused`]).
    fused: bool,
    state: Vec<Option<State>>,
}

/// The error for turning AMSGrad on or off once `optimizer` has state
/// (PyTorch then fails at the next step with a `KeyError`).
pub(crate) fn amsgrad_after_steps(optimizer: &'static str) -> AutogradError {
    AutogradError::Optimizer {
        optimizer,
        msg: "amsgrad cannot change once parameters have taken steps (their state has no \
              max_exp_avg_sq, or one the other setting would not keep); set it when the \
              optimizer is made, or load a state saved with it"
            .into(),
    }
}

impl Adam {
    /// Adam over `params` with learning rate `lr`, betas (0.9, 0.999), eps
    /// 1e-8, without AMSGrad, minimizing.
    pub fn new(params: Vec<Var>, lr: f64) -> Result<Adam> {
        check_non_negative("Adam", "learning rate", lr)?;
        super::check_distinct("Adam", &params)?;
        let state = params.iter().map(|_| None).collect();
        Ok(Adam {
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            amsgrad: false,
            maximize: false,
            fused: false,
            state,
        })
    }

    /// Other betas (each in `[0, 1)`).
    pub fn with_betas(mut self, b1: f64, b2: f64) -> Result<Adam> {
        check("Adam", "beta1", b1, (0.0..1.0).contains(&b1), BETA)?;
        check("Adam", "beta2", b2, (0.0..1.0).contains(&b2), BETA)?;
        self.betas = (b1, b2);
        Ok(self)
    }

    /// Another epsilon (added to the denominator; `>= 0`).
    pub fn with_eps(mut self, eps: f64) -> Result<Adam> {
        check_non_negative("Adam", "epsilon", eps)?;
        self.eps = eps;
        Ok(self)
    }

    /// PyTorch's `amsgrad` (default false): each parameter also keeps the
    /// running maximum of its second moment (`max_exp_avg_sq`, zero at the
    /// first step, one more buffer of the parameter's size), and the update
    /// divides by its root, `sqrt(max_exp_avg_sq) / sqrt(1 - beta2^t) + eps`,
    /// so the effective step size never grows. Rounded as PyTorch's fused
    /// CPU kernel.
    ///
    /// Refused (an `Optimizer` error, the optimizer unchanged) once a
    /// parameter has taken a step: its state would lack the maximum.
    pub fn with_amsgrad(mut self, amsgrad: bool) -> Result<Adam> {
        if amsgrad != self.amsgrad && self.state.iter().any(Option::is_some) {
            return Err(amsgrad_after_steps("Adam"));
        }
        self.amsgrad = amsgrad;
        Ok(self)
    }

    /// PyTorch's `maximize` (default false): ascend the objective, stepping
    /// along the gradient (the step uses `-g`, negated exactly, before the
    /// moments see it).
    pub fn with_maximize(mut self, maximize: bool) -> Adam {
        self.maximize = maximize;
        self
    }

    /// PyTorch's `fused` (default false). strata's step is always PyTorch's
    /// fused CPU kernel in its arithmetic; what `fused` changes is how a
    /// [`GradScaler`](crate::GradScaler) drives the step, as in PyTorch: with
    /// `fused`, [`GradScaler::step`](crate::GradScaler::step) hands the step
    /// its scale instead of unscaling the gradients first; the step divides
    /// each gradient by it in the compute type (f32 for f16, bf16 and f32
    /// parameters) and steps with the quotient (for f16/bf16 unrounded),
    /// storing it, rounded, as the `.grad`; a step the scaler skips leaves
    /// the gradients scaled. Without `fused`, the scaler multiplies the
    /// gradients by `1/scale` in their dtype first (PyTorch's for-loop
    /// Adam). Not part of the state dictionary.
    pub fn with_fused(mut self, fused: bool) -> Adam {
        self.fused = fused;
        self
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// Sets the learning rate (for schedules; `>= 0`).
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        check_non_negative("Adam", "learning rate", lr)?;
        self.lr = lr;
        Ok(())
    }

    /// The hyper-parameters a state holds.
    fn hypers(&self) -> AdamHypers {
        AdamHypers {
            lr: self.lr,
            betas: self.betas,
            eps: self.eps,
            amsgrad: self.amsgrad,
            maximize: self.maximize,
        }
    }

    /// Bytes held by the moment estimates (and AMSGrad's maxima).
    pub fn state_bytes(&self) -> usize {
        self.state
            .iter()
            .flatten()
            .map(|s| {
                let n = s.m.numel() + s.v.numel() + s.max.as_ref().map_or(0, Tensor::numel);
                n * s.m.dtype().size()
            })
            .sum()
    }
}

impl Optimizer for Adam {
    fn params(&self) -> &[Var] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) -> Result<()> {
        Adam::set_lr(self, lr)
    }

    fn state_dict(&self) -> Result<StateDict> {
        let mut d = StateDict::new();
        self.hypers().write(&mut d)?;
        for (i, s) in self.state.iter().enumerate() {
            if let Some(s) = s {
                state::write_adam(&mut d, i, s.step, &s.m, &s.v, s.max.as_ref())?;
            }
        }
        Ok(d)
    }

    fn load_state_dict(&mut self, dict: &StateDict) -> Result<()> {
        let mut r = state::Reader::new("Adam", dict);
        let h = AdamHypers::read("Adam", &mut r)?;
        let loaded = (self.params.iter().enumerate())
            .map(|(i, p)| {
                let s = state::read_adam(&mut r, i, p, h.amsgrad)?;
                Ok(s.map(|AdamState { step, m, v, max }| State { step, m, v, max }))
            })
            .collect::<Result<Vec<_>>>()?;
        r.finish(self.params.len())?;
        (self.lr, self.betas, self.eps, self.state) = (h.lr, h.betas, h.eps, loaded);
        (self.amsgrad, self.maximize) = (h.amsgrad, h.maximize);
        Ok(())
    }

    fn step(&mut self) -> Result<()> {
        self.step_scaled(None)
    }

    fn takes_grad_scale(&self) -> bool {
        self.fused
    }

    fn check_step(&self) -> Result<()> {
        super::check_step("Adam", &self.params, true)
    }

    fn step_with_grad_scale(&mut self, scale: f32) -> Result<()> {
        self.step_scaled(Some(scale))
    }
}

impl Adam {
    /// A step; `grad_scale`: the GradScaler scale the gradients carry.
    fn step_scaled(&mut self, grad_scale: Option<f32>) -> Result<()> {
        self.check_step()?;
        if let Some(scale) = grad_scale {
            super::check_scaled_grads("Adam", &self.params, scale)?;
        }
        let mut lists = AdamLists::scaled(grad_scale);
        for (k, (p, st)) in self.params.iter().zip(self.state.iter_mut()).enumerate() {
            let Some(g) = p.grad() else { continue };
            let s = match st {
                Some(s) => s,
                None => st.insert(State {
                    step: 0,
                    m: Tensor::zeros(p.shape(), p.dtype(), p.device())?,
                    v: Tensor::zeros(p.shape(), p.dtype(), p.device())?,
                    max: if self.amsgrad {
                        Some(Tensor::zeros(p.shape(), p.dtype(), p.device())?)
                    } else {
                        None
                    },
                }),
            };
            // A count loaded at i32::MAX stays there (see `state::Reader::step`).
            let step = s.step.saturating_add(1);
            let st = (s.m.clone(), s.v.clone(), s.max.clone());
            lists.push(k, step, p.data(), g, st)?;
        }
        let hyper = AdamHyper {
            lr: self.lr,
            beta1: self.betas.0,
            beta2: self.betas.1,
            eps: self.eps,
            weight_decay: 0.0,
            step: 0,
        };
        let state = &mut self.state;
        lists.run(hyper, self.maximize, |k, step| {
            if let Some(s) = &mut state[k] {
                s.step = step;
            }
        })
    }
}
