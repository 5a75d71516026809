//! An optimizer's state as named tensors, to save with a checkpoint and load
//! back when training resumes ([`Optimizer::state_dict`],
//! [`Optimizer::load_state_dict`]).
//!
//! The names are PyTorch's `optimizer.state_dict()` flattened with dots:
//! `state.{i}.exp_avg`, `state.{i}.exp_avg_sq`, `state.{i}.step` (Adam,
//! AdamW; with AMSGrad also `state.{i}.max_exp_avg_sq`) or
//! `state.{i}.momentum_buffer` (SGD) for each parameter `i` that has state,
//! and `param_groups.0.{lr, betas, eps, weight_decay, momentum}` for the
//! hyper-parameters (0-d f64 tensors on the CPU; `betas` has two elements;
//! `step` is a 0-d f32 on the CPU, as PyTorch keeps it, or an f64 beyond
//! 2^24, where f32 would round it). The dictionary
//! saves with [`save_safetensors`](strata_tensor::save_safetensors).
//!
//! The options `param_groups.0.{amsgrad, maximize, nesterov}` (0-d bool
//! tensors) and `param_groups.0.dampening` (0-d f64) are written only when
//! they differ from PyTorch's defaults (false, false, false, 0), so that a
//! dictionary of an optimizer without them is what it was before strata
//! had them; loading a dictionary without one gives it its default, as
//! PyTorch's `load_state_dict` gives a saved group that lacks a key (its
//! `__setstate__` defaults). As in PyTorch, loading restores them: the
//! optimizer takes the saved state's options, as it takes its learning
//! rate.
//!
//! Loading checks everything before it changes anything: every name known,
//! every hyper-parameter present and in range, each parameter's state of
//! its shape (converted to its dtype and device, as PyTorch converts it),
//! steps whole numbers, no parameter index beyond the optimizer's.
//!
//! [`Optimizer::state_dict`]: super::Optimizer::state_dict
//! [`Optimizer::load_state_dict`]: super::Optimizer::load_state_dict

use crate::error::{AutogradError, Result};
use crate::var::Var;
use std::collections::{HashMap, HashSet};
use strata_tensor::{DType, Device, Tensor};

/// An optimizer's state by name (see the module docs).
pub type StateDict = HashMap<String, Tensor>;

/// The name of a hyper-parameter's entry.
pub(crate) fn hyper_key(name: &str) -> String {
    format!("param_groups.0.{name}")
}

/// The name of an entry of parameter `i`'s state.
pub(crate) fn state_key(i: usize, name: &str) -> String {
    format!("state.{i}.{name}")
}

/// Why parameter `i`'s state is refused when only some of `names` are
/// present.
pub(crate) fn incomplete(i: usize, names: &[&str]) -> String {
    let all: Vec<String> = names
        .iter()
        .map(|n| format!("`{}`", state_key(i, n)))
        .collect();
    format!(
        "parameter {i} has only part of its state; {} go together",
        all.join(", ")
    )
}

/// A 0-d f64 tensor on the CPU holding `v`.
pub(crate) fn scalar(v: f64) -> Result<Tensor> {
    Ok(Tensor::scalar(v, DType::F64, Device::Cpu)?)
}

/// `betas` as a two-element f64 tensor on the CPU.
pub(crate) fn pair(v: (f64, f64)) -> Result<Tensor> {
    Ok(Tensor::from_slice(&[v.0, v.1], &[2], Device::Cpu)?)
}

/// A flag (PyTorch's bool option) as a 0-d bool tensor on the CPU.
pub(crate) fn flag(v: bool) -> Result<Tensor> {
    Ok(Tensor::scalar(v, DType::Bool, Device::Cpu)?)
}

/// Writes flag `name` when it is set (see the module docs).
pub(crate) fn write_flag(d: &mut StateDict, name: &str, v: bool) -> Result<()> {
    if v {
        d.insert(hyper_key(name), flag(v)?);
    }
    Ok(())
}

/// A step count as PyTorch keeps it: a 0-d f32 on the CPU (f64 beyond 2^24).
pub(crate) fn step(v: i32) -> Result<Tensor> {
    // f32 as PyTorch stores it while the count is exact there (to 2^24); an
    // f64 beyond, where f32 would round it (16777217 saved as 16777216, and
    // the resumed run stepping with another bias correction than the
    // uninterrupted one). PyTorch's own f32 counter stops at 2^24.
    let dtype = if (v as f32) as i32 == v {
        DType::F32
    } else {
        DType::F64
    };
    Ok(Tensor::scalar(v as f64, dtype, Device::Cpu)?)
}

/// An independent copy of a state tensor (the dictionary must not alias
/// the optimizer's buffers, which later steps update in place).
pub(crate) fn copy(t: &Tensor) -> Result<Tensor> {
    Ok(t.clone_contiguous()?)
}

/// Reads a state dictionary for one optimizer, remembering which names
/// were read so that [`Reader::finish`] can refuse the others.
pub(crate) struct Reader<'a> {
    optimizer: &'static str,
    dict: &'a StateDict,
    read: HashSet<String>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(optimizer: &'static str, dict: &'a StateDict) -> Reader<'a> {
        Reader {
            optimizer,
            dict,
            read: HashSet::new(),
        }
    }

    /// The error for a state that cannot be loaded: `msg` says why.
    pub(crate) fn error(&self, msg: String) -> AutogradError {
        AutogradError::Optimizer {
            optimizer: self.optimizer,
            msg: format!("load_state_dict: {msg}; nothing was loaded"),
        }
    }

    fn get(&mut self, key: String) -> Option<&'a Tensor> {
        let t = self.dict.get(&key)?;
        self.read.insert(key);
        Some(t)
    }

    /// The values of entry `key`, which must have `n` elements.
    fn values(&mut self, key: String, n: usize) -> Result<Vec<f64>> {
        let Some(t) = self.get(key.clone()) else {
            return Err(self.error(format!("the state has no `{key}`")));
        };
        if t.numel() != n || (n == 1 && t.ndim() > 1) {
            return Err(self.error(format!(
                "`{key}` has shape {:?}; expected {}",
                t.shape(),
                if n == 1 {
                    "a single number".to_string()
                } else {
                    format!("{n} numbers")
                }
            )));
        }
        Ok(t.to_dtype_contiguous(DType::F64)?.to_vec::<f64>()?)
    }

    /// The hyper-parameter `name` (a single number).
    pub(crate) fn hyper(&mut self, name: &str) -> Result<f64> {
        Ok(self.values(hyper_key(name), 1)?[0])
    }

    /// The optional hyper-parameter `name` (a single number), `default`
    /// when the state has none (see the module docs).
    pub(crate) fn hyper_or(&mut self, name: &str, default: f64) -> Result<f64> {
        if !self.dict.contains_key(&hyper_key(name)) {
            return Ok(default);
        }
        self.hyper(name)
    }

    /// The optional flag `name` (0 or 1, of any dtype), false when the
    /// state has none (see the module docs).
    pub(crate) fn flag(&mut self, name: &str) -> Result<bool> {
        let v = self.hyper_or(name, 0.0)?;
        if v != 0.0 && v != 1.0 {
            return Err(self.error(format!(
                "`{}` is {v}; a flag is true or false (1 or 0)",
                hyper_key(name)
            )));
        }
        Ok(v == 1.0)
    }

    /// The hyper-parameter `name` as a pair (Adam's betas).
    pub(crate) fn hyper_pair(&mut self, name: &str) -> Result<(f64, f64)> {
        let v = self.values(hyper_key(name), 2)?;
        Ok((v[0], v[1]))
    }

    /// Parameter `i`'s step count, if it has one: a whole number from 0 to
    /// 2^31, where 2^31 (what a count of `i32::MAX` became in the f32 that
    /// [`step`] saved it as before session 48) is read as `i32::MAX`; a bool
    /// tensor is refused. (strata counts steps in
    /// an i32, and a count at `i32::MAX` stays there, as PyTorch's f32 count
    /// stops growing at 2^24; the bias corrections `1 - beta^step` are 1
    /// long before. A loaded count of `i32::MAX` made the next step
    /// overflow, and strata's own state at that count was refused.)
    pub(crate) fn step(&mut self, i: usize) -> Result<Option<i32>> {
        const MAX: f64 = 2_147_483_648.0;
        let key = state_key(i, "step");
        if !self.dict.contains_key(&key) {
            return Ok(None);
        }
        if self
            .dict
            .get(&key)
            .is_some_and(|t| t.dtype() == DType::Bool)
        {
            return Err(self.error(format!(
                "`{key}` is a bool tensor; a step count is a number (PyTorch's next step fails \
                 on it: \"result type Long can't be cast to the desired output type Bool\")"
            )));
        }
        let v = self.values(key.clone(), 1)?[0];
        if !(v.fract() == 0.0 && (0.0..=MAX).contains(&v)) {
            return Err(self.error(format!(
                "`{key}` is {v}; a step count is a whole number from 0 to 2^31 ({MAX})"
            )));
        }
        Ok(Some(v.min(i32::MAX as f64) as i32))
    }

    /// Entry `name` of parameter `i`'s state, if present: of `p`'s shape,
    /// converted to its dtype and device (a fresh tensor either way).
    pub(crate) fn like(&mut self, i: usize, name: &str, p: &Var) -> Result<Option<Tensor>> {
        let key = state_key(i, name);
        let Some(t) = self.get(key.clone()) else {
            return Ok(None);
        };
        if t.shape() != p.shape() {
            return Err(self.error(format!(
                "`{key}` has shape {:?} but parameter {i} has shape {:?}",
                t.shape(),
                p.shape()
            )));
        }
        if !t.dtype().is_float() {
            return Err(self.error(format!(
                "`{key}` is a {} tensor; optimizer state is floating point",
                t.dtype()
            )));
        }
        let t = t.to(p.device())?;
        Ok(Some(if t.dtype() != p.dtype() {
            t.to_dtype_contiguous(p.dtype())?
        } else {
            t.clone_contiguous()?
        }))
    }

    /// Refuses names that were not read: another optimizer's state, or
    /// state of a parameter index beyond `params` (a dictionary saved for
    /// another model).
    pub(crate) fn finish(self, params: usize) -> Result<()> {
        let mut unknown: Vec<&String> = self
            .dict
            .keys()
            .filter(|k| !self.read.contains(*k))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        unknown.sort();
        let beyond = unknown.iter().find(|k| {
            k.strip_prefix("state.")
                .and_then(|r| r.split('.').next())
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i >= params)
        });
        Err(self.error(match beyond {
            Some(k) => format!(
                "`{k}` is state of a parameter this optimizer does not have (it has {params}); \
                 load a state saved for the same parameters, in the same order"
            ),
            None => format!(
                "`{}` is not part of a {} state ({} unknown names); load a state saved by \
                 the same kind of optimizer",
                unknown[0],
                self.optimizer,
                unknown.len()
            ),
        }))
    }
}

/// Adam's and AdamW's shared hyper-parameters: learning rate, betas, eps,
/// and the options `amsgrad` and `maximize`.
pub(crate) struct AdamHypers {
    pub(crate) lr: f64,
    pub(crate) betas: (f64, f64),
    pub(crate) eps: f64,
    pub(crate) amsgrad: bool,
    pub(crate) maximize: bool,
}

impl AdamHypers {
    /// Writes them into `d`.
    pub(crate) fn write(&self, d: &mut StateDict) -> Result<()> {
        d.insert(hyper_key("lr"), scalar(self.lr)?);
        d.insert(hyper_key("betas"), pair(self.betas)?);
        d.insert(hyper_key("eps"), scalar(self.eps)?);
        write_flag(d, "amsgrad", self.amsgrad)?;
        write_flag(d, "maximize", self.maximize)?;
        Ok(())
    }

    /// Reads them, with the checks of `optimizer`'s constructor.
    pub(crate) fn read(optimizer: &'static str, r: &mut Reader<'_>) -> Result<AdamHypers> {
        let (lr, (b1, b2), eps) = (r.hyper("lr")?, r.hyper_pair("betas")?, r.hyper("eps")?);
        super::check_non_negative(optimizer, "learning rate", lr)?;
        let beta = super::adam::BETA;
        super::check(optimizer, "beta1", b1, (0.0..1.0).contains(&b1), beta)?;
        super::check(optimizer, "beta2", b2, (0.0..1.0).contains(&b2), beta)?;
        super::check_non_negative(optimizer, "epsilon", eps)?;
        let (amsgrad, maximize) = (r.flag("amsgrad")?, r.flag("maximize")?);
        Ok(AdamHypers {
            lr,
            betas: (b1, b2),
            eps,
            amsgrad,
            maximize,
        })
    }
}

/// One parameter's Adam state as saved: step count, moments, and (with
/// AMSGrad) the running maximum of the second moment.
pub(crate) struct AdamState {
    pub(crate) step: i32,
    pub(crate) m: Tensor,
    pub(crate) v: Tensor,
    pub(crate) max: Option<Tensor>,
}

/// Writes parameter `i`'s Adam state: its step count, moments and (with
/// AMSGrad) `max_exp_avg_sq`.
pub(crate) fn write_adam(
    d: &mut StateDict,
    i: usize,
    step: i32,
    m: &Tensor,
    v: &Tensor,
    max: Option<&Tensor>,
) -> Result<()> {
    d.insert(state_key(i, "step"), self::step(step)?);
    d.insert(state_key(i, "exp_avg"), copy(m)?);
    d.insert(state_key(i, "exp_avg_sq"), copy(v)?);
    if let Some(x) = max {
        d.insert(state_key(i, "max_exp_avg_sq"), copy(x)?);
    }
    Ok(())
}

/// Reads parameter `i`'s Adam state (`p` the parameter): its step count and
/// moments, all three or none, and with `amsgrad` its `max_exp_avg_sq` too
/// (all four or none). PyTorch loads an AMSGrad state without
/// `max_exp_avg_sq` and fails at the next step (a `KeyError`); strata
/// refuses it here, before anything changes. A `max_exp_avg_sq` without
/// `amsgrad` is refused too (PyTorch would keep it and never use it).
pub(crate) fn read_adam(
    r: &mut Reader<'_>,
    i: usize,
    p: &Var,
    amsgrad: bool,
) -> Result<Option<AdamState>> {
    let step = r.step(i)?;
    let m = r.like(i, "exp_avg", p)?;
    let v = r.like(i, "exp_avg_sq", p)?;
    let max = r.like(i, "max_exp_avg_sq", p)?;
    if max.is_some() && !amsgrad {
        return Err(r.error(format!(
            "`{}` is AMSGrad state but the state's `{}` is off; load it into an optimizer \
             state saved with amsgrad (or drop the entry)",
            state_key(i, "max_exp_avg_sq"),
            hyper_key("amsgrad")
        )));
    }
    match (step, m, v, max) {
        (Some(step), Some(m), Some(v), max) if max.is_some() == amsgrad => {
            Ok(Some(AdamState { step, m, v, max }))
        }
        (None, None, None, None) => Ok(None),
        _ if amsgrad => Err(r.error(format!(
            "{} (the state's amsgrad is on)",
            incomplete(i, &["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"])
        ))),
        _ => Err(r.error(incomplete(i, &["step", "exp_avg", "exp_avg_sq"]))),
    }
}
