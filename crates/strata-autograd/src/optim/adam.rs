//! Adam (PyTorch's `Adam`, no AMSGrad):
//! `m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
//! p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)`, fused over the
//! list of parameters ([`Tensor::adam_step_list_`]).

use super::adam_lists::AdamLists;
use super::state::{self, AdamHypers, StateDict};
use super::{check, check_non_negative, Optimizer};
use crate::error::Result;
use crate::var::Var;
use strata_tensor::{AdamHyper, Tensor};

/// What the betas accept.
pub(crate) const BETA: &str = "a number in [0, 1), e.g. 0.9";

/// Per-parameter state, created at the parameter's first step.
struct State {
    step: i32,
    m: Tensor,
    v: Tensor,
}

/// The Adam optimizer.
pub struct Adam {
    params: Vec<Var>,
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    state: Vec<Option<State>>,
}

impl Adam {
    /// Adam over `params` with learning rate `lr`, betas (0.9, 0.999), eps 1e-8.
    pub fn new(params: Vec<Var>, lr: f64) -> Result<Adam> {
        check_non_negative("Adam", "learning rate", lr)?;
        super::check_distinct("Adam", &params)?;
        let state = params.iter().map(|_| None).collect();
        Ok(Adam {
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
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
        }
    }

    /// Bytes held by the moment estimates.
    pub fn state_bytes(&self) -> usize {
        self.state
            .iter()
            .flatten()
            .map(|s| (s.m.numel() + s.v.numel()) * s.m.dtype().size())
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
                state::write_adam(&mut d, i, s.step, &s.m, &s.v)?;
            }
        }
        Ok(d)
    }

    fn load_state_dict(&mut self, dict: &StateDict) -> Result<()> {
        let mut r = state::Reader::new("Adam", dict);
        let h = AdamHypers::read("Adam", &mut r)?;
        let loaded = (self.params.iter().enumerate())
            .map(|(i, p)| {
                let s = state::read_adam(&mut r, i, p)?;
                Ok(s.map(|(step, m, v)| State { step, m, v }))
            })
            .collect::<Result<Vec<_>>>()?;
        r.finish(self.params.len())?;
        (self.lr, self.betas, self.eps, self.state) = (h.lr, h.betas, h.eps, loaded);
        Ok(())
    }

    fn step(&mut self) -> Result<()> {
        super::check_step("Adam", &self.params, true)?;
        let mut lists = AdamLists::default();
        for (k, (p, st)) in self.params.iter().zip(self.state.iter_mut()).enumerate() {
            let Some(g) = p.grad() else { continue };
            let s = match st {
                Some(s) => s,
                None => st.insert(State {
                    step: 0,
                    m: Tensor::zeros(p.shape(), p.dtype(), p.device())?,
                    v: Tensor::zeros(p.shape(), p.dtype(), p.device())?,
                }),
            };
            // A count loaded at i32::MAX stays there (see `state::Reader::step`).
            let step = s.step.saturating_add(1);
            lists.push(k, step, p.data(), g, s.m.clone(), s.v.clone())?;
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
        lists.run(hyper, |k, step| {
            if let Some(s) = &mut state[k] {
                s.step = step;
            }
        })
    }
}
