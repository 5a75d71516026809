//! AdamW (PyTorch's `AdamW`): Adam with decoupled weight decay,
//! `p *= 1 - lr * wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
//! p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)`, with PyTorch's
//! `amsgrad` (divide by the root of the running maximum of `v`) and
//! `maximize` (ascend: use `-g`).
//!
//! # The update
//!
//! The moment estimates of all parameters of one (device, dtype) are views
//! into two flat buffers (three with AMSGrad), allocated at the first step. The parameters are
//! then updated by one fused kernel over the list of them
//! ([`Tensor::adam_step_list_`], a launch per 64 tensors on a GPU) that reads
//! each parameter, its gradient and its moments once and writes the
//! parameter and the moments once: no temporary the size of the parameters,
//! a seventh of the memory traffic of the update composed from tensor ops,
//! and no launch per small parameter.
//! A parameter without a gradient is skipped (its moments do not decay),
//! as in PyTorch.

use super::adam::BETA;
use super::adam_lists::AdamLists;
use super::state::{self, AdamHypers, StateDict};
use super::{check, check_non_negative, Optimizer};
use crate::error::Result;
use crate::var::Var;
use strata_tensor::{AdamHyper, DType, Device, Tensor};

/// The parameters of one device and dtype, with their flat moment buffers.
struct Group {
    device: Device,
    dtype: DType,
    /// Indices into `AdamW::params`.
    members: Vec<usize>,
    /// Offset of each member in the flat buffers.
    offsets: Vec<usize>,
    numel: usize,
    /// The flat moment buffers, made at the group's first step.
    moments: Option<(Tensor, Tensor)>,
    /// The flat buffer of AMSGrad's maxima of `v`, made with the moments
    /// when AMSGrad is on.
    maxes: Option<Tensor>,
}

/// The AdamW optimizer.
pub struct AdamW {
    params: Vec<Var>,
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    amsgrad: bool,
    maximize: bool,
    /// PyTorch's `fused=True` (see [`AdamW::with_fused`]).
    fused: bool,
    groups: Vec<Group>,
    /// Steps taken by each parameter, `None` while it has no state (a state
    /// loaded at step 0 has one, saved again by `state_dict`, as PyTorch's).
    steps: Vec<Option<i32>>,
    /// Where `params` names one parameter twice (`new` cannot fail, so
    /// `step` reports it).
    duplicate: Option<(usize, usize)>,
}

impl AdamW {
    /// AdamW over `params` with PyTorch's defaults: lr 1e-3, betas (0.9, 0.999),
    /// eps 1e-8, weight decay 1e-2, without AMSGrad, minimizing.
    ///
    /// It cannot fail: what PyTorch's constructor refuses (an empty list, a
    /// parameter that is not a leaf, one named twice) is refused by every
    /// [`step`](Optimizer::step) instead, before anything is updated.
    pub fn new(params: Vec<Var>) -> AdamW {
        let mut groups: Vec<Group> = Vec::new();
        for (i, p) in params.iter().enumerate() {
            let (device, dtype) = (p.device(), p.dtype());
            let g = match groups
                .iter_mut()
                .find(|g| g.device == device && g.dtype == dtype)
            {
                Some(g) => g,
                None => {
                    groups.push(Group {
                        device,
                        dtype,
                        members: Vec::new(),
                        offsets: Vec::new(),
                        numel: 0,
                        moments: None,
                        maxes: None,
                    });
                    groups.last_mut().expect("just pushed")
                }
            };
            g.members.push(i);
            g.offsets.push(g.numel);
            g.numel += p.numel();
        }
        let steps = vec![None; params.len()];
        let duplicate = super::first_duplicate(&params);
        AdamW {
            params,
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 1e-2,
            amsgrad: false,
            maximize: false,
            fused: false,
            groups,
            steps,
            duplicate,
        }
    }

    /// Another learning rate (`>= 0`).
    pub fn with_lr(mut self, lr: f64) -> Result<AdamW> {
        self.set_lr(lr)?;
        Ok(self)
    }

    /// Other betas (each in `[0, 1)`).
    pub fn with_betas(mut self, b1: f64, b2: f64) -> Result<AdamW> {
        check("AdamW", "beta1", b1, (0.0..1.0).contains(&b1), BETA)?;
        check("AdamW", "beta2", b2, (0.0..1.0).contains(&b2), BETA)?;
        self.betas = (b1, b2);
        Ok(self)
    }

    /// Another epsilon (`>= 0`).
    pub fn with_eps(mut self, eps: f64) -> Result<AdamW> {
        check_non_negative("AdamW", "epsilon", eps)?;
        self.eps = eps;
        Ok(self)
    }

    /// Another weight decay (`>= 0`; decoupled: `p *= 1 - lr * wd`).
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Result<AdamW> {
        check_non_negative("AdamW", "weight decay", weight_decay)?;
        self.weight_decay = weight_decay;
        Ok(self)
    }

    /// PyTorch's `amsgrad` (default false): each parameter also keeps the
    /// running maximum of its second moment (`max_exp_avg_sq`, zero at the
    /// first step; a third flat buffer), and the update divides by its
    /// root, `sqrt(max_exp_avg_sq) / sqrt(1 - beta2^t) + eps`. Rounded as
    /// PyTorch's fused CPU kernel.
    ///
    /// Refused (an `Optimizer` error, the optimizer unchanged) once a
    /// parameter has taken a step: its state would lack the maximum.
    pub fn with_amsgrad(mut self, amsgrad: bool) -> Result<AdamW> {
        if amsgrad != self.amsgrad && self.groups.iter().any(|g| g.moments.is_some()) {
            return Err(super::adam::amsgrad_after_steps("AdamW"));
        }
        self.amsgrad = amsgrad;
        Ok(self)
    }

    /// PyTorch's `maximize` (default false): ascend the objective, stepping
    /// along the gradient (the step uses `-g`, negated exactly, before the
    /// moments see it; the decoupled weight decay still shrinks the weights).
    pub fn with_maximize(mut self, maximize: bool) -> AdamW {
        self.maximize = maximize;
        self
    }

    /// PyTorch's `fused` (default false): how a
    /// [`GradScaler`](crate::GradScaler) drives the step, as
    /// [`Adam::with_fused`](crate::Adam::with_fused) says.
    pub fn with_fused(mut self, fused: bool) -> AdamW {
        self.fused = fused;
        self
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// Sets the learning rate (for schedules; `>= 0`).
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        check_non_negative("AdamW", "learning rate", lr)?;
        self.lr = lr;
        Ok(())
    }

    /// Bytes held by the moment estimates (and AMSGrad's maxima).
    pub fn state_bytes(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| g.moments.is_some())
            .map(|g| (2 + usize::from(g.maxes.is_some())) * g.numel * g.dtype.size())
            .sum()
    }

    /// The flat view of member `k` of group `gi` in `flat`, shaped like its parameter.
    fn slice(&self, gi: usize, k: usize, flat: &Tensor) -> Result<Tensor> {
        let g = &self.groups[gi];
        let p = &self.params[g.members[k]];
        let dims: Vec<i64> = p.shape().iter().map(|&d| d as i64).collect();
        Ok(flat
            .narrow(0, g.offsets[k] as i64, p.numel() as i64)?
            .view(&dims)?)
    }

    fn step_group(&mut self, gi: usize, grad_scale: Option<f32>) -> Result<()> {
        let (device, dtype, numel) = {
            let g = &self.groups[gi];
            (g.device, g.dtype, g.numel)
        };
        let grads: Vec<Option<Tensor>> = self.groups[gi]
            .members
            .iter()
            .map(|&i| self.params[i].grad())
            .collect();
        if grads.iter().all(Option::is_none) {
            return Ok(());
        }
        if self.groups[gi].moments.is_none() {
            let maxes = if self.amsgrad {
                Some(Tensor::zeros(&[numel], dtype, device)?)
            } else {
                None
            };
            self.groups[gi].moments = Some((
                Tensor::zeros(&[numel], dtype, device)?,
                Tensor::zeros(&[numel], dtype, device)?,
            ));
            self.groups[gi].maxes = maxes;
        }
        let (m, v) = self.groups[gi].moments.clone().expect("made above");
        let x = self.groups[gi].maxes.clone();
        let mut lists = AdamLists::scaled(grad_scale);
        for (k, &i) in self.groups[gi].members.iter().enumerate() {
            let Some(g) = &grads[k] else { continue };
            let (mk, vk) = (self.slice(gi, k, &m)?, self.slice(gi, k, &v)?);
            let xk = x.as_ref().map(|x| self.slice(gi, k, x)).transpose()?;
            // A count loaded at i32::MAX stays there (see `state::Reader::step`).
            let step = self.steps[i].unwrap_or(0).saturating_add(1);
            lists.push(i, step, self.params[i].data(), g.clone(), (mk, vk, xk))?;
        }
        let hyper = AdamHyper {
            lr: self.lr,
            beta1: self.betas.0,
            beta2: self.betas.1,
            eps: self.eps,
            weight_decay: self.weight_decay,
            step: 0,
        };
        let steps = &mut self.steps;
        lists.run(hyper, self.maximize, |i, step| steps[i] = Some(step))
    }
}

impl Optimizer for AdamW {
    fn params(&self) -> &[Var] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) -> Result<()> {
        AdamW::set_lr(self, lr)
    }

    fn state_dict(&self) -> Result<StateDict> {
        let mut d = StateDict::new();
        let (lr, betas, eps) = (self.lr, self.betas, self.eps);
        let (amsgrad, maximize) = (self.amsgrad, self.maximize);
        AdamHypers {
            lr,
            betas,
            eps,
            amsgrad,
            maximize,
        }
        .write(&mut d)?;
        d.insert(
            state::hyper_key("weight_decay"),
            state::scalar(self.weight_decay)?,
        );
        for (gi, g) in self.groups.iter().enumerate() {
            let Some((m, v)) = &g.moments else { continue };
            for (k, &i) in g.members.iter().enumerate() {
                if let Some(step) = self.steps[i] {
                    let (mk, vk) = (self.slice(gi, k, m)?, self.slice(gi, k, v)?);
                    let xk = (g.maxes.as_ref())
                        .map(|x| self.slice(gi, k, x))
                        .transpose()?;
                    state::write_adam(&mut d, i, step, &mk, &vk, xk.as_ref())?;
                }
            }
        }
        Ok(d)
    }

    /// As for every optimizer; the moments of a group of parameters (one
    /// device and dtype) are made when one of them has state, zero for the
    /// others.
    fn load_state_dict(&mut self, dict: &StateDict) -> Result<()> {
        let mut r = state::Reader::new("AdamW", dict);
        let h = AdamHypers::read("AdamW", &mut r)?;
        let weight_decay = r.hyper("weight_decay")?;
        check_non_negative("AdamW", "weight decay", weight_decay)?;
        let mut steps = vec![None; self.params.len()];
        let mut loaded: Vec<Option<state::AdamState>> = Vec::with_capacity(self.params.len());
        for (i, p) in self.params.iter().enumerate() {
            let s = state::read_adam(&mut r, i, p, h.amsgrad)?;
            if let Some(s) = &s {
                steps[i] = Some(s.step);
            }
            loaded.push(s);
        }
        r.finish(self.params.len())?;
        let mut moments = Vec::with_capacity(self.groups.len());
        for (gi, g) in self.groups.iter().enumerate() {
            if g.members.iter().all(|&i| loaded[i].is_none()) {
                moments.push(None);
                continue;
            }
            let m = Tensor::zeros(&[g.numel], g.dtype, g.device)?;
            let v = Tensor::zeros(&[g.numel], g.dtype, g.device)?;
            let x = if h.amsgrad {
                Some(Tensor::zeros(&[g.numel], g.dtype, g.device)?)
            } else {
                None
            };
            for (k, &i) in g.members.iter().enumerate() {
                if let Some(s) = &loaded[i] {
                    self.slice(gi, k, &m)?.copy_(&s.m)?;
                    self.slice(gi, k, &v)?.copy_(&s.v)?;
                    if let (Some(x), Some(sx)) = (&x, &s.max) {
                        self.slice(gi, k, x)?.copy_(sx)?;
                    }
                }
            }
            moments.push(Some((m, v, x)));
        }
        for (g, m) in self.groups.iter_mut().zip(moments) {
            (g.moments, g.maxes) = match m {
                Some((m, v, x)) => (Some((m, v)), x),
                None => (None, None),
            };
        }
        (self.lr, self.betas, self.eps) = (h.lr, h.betas, h.eps);
        (self.amsgrad, self.maximize) = (h.amsgrad, h.maximize);
        (self.weight_decay, self.steps) = (weight_decay, steps);
        Ok(())
    }

    /// A parameter list naming one parameter twice, or a parameter that
    /// cannot be updated, is an [`AutogradError::Optimizer`](crate::AutogradError)
    /// before anything is updated.
    fn step(&mut self) -> Result<()> {
        self.step_scaled(None)
    }

    fn takes_grad_scale(&self) -> bool {
        self.fused
    }

    fn check_step(&self) -> Result<()> {
        if let Some(d) = self.duplicate {
            return Err(super::duplicate_error("AdamW", d));
        }
        super::check_step("AdamW", &self.params, true)
    }

    fn step_with_grad_scale(&mut self, scale: f32) -> Result<()> {
        self.step_scaled(Some(scale))
    }
}

impl AdamW {
    /// A step; `grad_scale`: the GradScaler scale the gradients carry.
    fn step_scaled(&mut self, grad_scale: Option<f32>) -> Result<()> {
        self.check_step()?;
        if let Some(scale) = grad_scale {
            super::check_scaled_grads("AdamW", &self.params, scale)?;
        }
        for gi in 0..self.groups.len() {
            self.step_group(gi, grad_scale)?;
        }
        Ok(())
    }
}
