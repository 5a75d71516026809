//! A scaler's settings and state: the pass-through scaler, the settings'
//! getters and setters, a scale set by hand, and the state dictionary that
//! saves with a checkpoint (PyTorch's `GradScaler.state_dict`).

use super::{check_settings, f32_round, GradScaler};
use crate::error::{AutogradError, Result};
use crate::optim::StateDict;
use strata_tensor::{DType, Device, Tensor};

/// The state dictionary's names, PyTorch's `GradScaler.state_dict()` keys.
const KEYS: [&str; 5] = [
    "scale",
    "growth_factor",
    "backoff_factor",
    "growth_interval",
    "_growth_tracker",
];

impl GradScaler {
    /// A scaler that passes everything through, as PyTorch's
    /// `GradScaler(enabled=False)`: [`scale`](GradScaler::scale) returns the
    /// loss as it is, [`unscale_`](GradScaler::unscale_) and
    /// [`update`](GradScaler::update) do nothing,
    /// [`step`](GradScaler::step) runs the optimizer's step, the scale reads
    /// 1 and the state dictionary is empty. One training loop then serves
    /// f32 runs and f16 runs alike.
    ///
    /// ```
    /// use strata_autograd::{GradScaler, Optimizer, Sgd, Var};
    /// use strata_tensor::{DType, Device, Tensor};
    /// let w = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    /// let mut opt = Sgd::new(vec![w.clone()], 0.1, 0.0).unwrap();
    /// let mut scaler = GradScaler::disabled();
    /// let loss = w.mul(&w).unwrap().sum(None, false).unwrap();
    /// scaler.scale(&loss).unwrap().backward().unwrap(); // grads are 2, unscaled
    /// assert!(scaler.step(&mut opt).unwrap());
    /// scaler.update().unwrap(); // a disabled scaler's update never fails
    /// assert_eq!(scaler.get_scale(), 1.0);
    /// assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.8, 0.8]);
    /// ```
    pub fn disabled() -> GradScaler {
        GradScaler {
            enabled: false,
            ..GradScaler::new()
        }
    }

    /// Whether the scaler scales (false for [`GradScaler::disabled`]).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The factor the scale grows by after `growth_interval` clean steps.
    pub fn growth_factor(&self) -> f64 {
        self.growth_factor
    }

    /// The factor the scale shrinks by after a step with a non-finite
    /// gradient.
    pub fn backoff_factor(&self) -> f64 {
        self.backoff_factor
    }

    /// How many clean steps in a row make the scale grow.
    pub fn growth_interval(&self) -> u32 {
        self.growth_interval
    }

    /// Sets the growth factor (finite, `> 1`; PyTorch's
    /// `set_growth_factor`). A refused value changes nothing.
    pub fn set_growth_factor(&mut self, growth_factor: f64) -> Result<()> {
        check_settings(
            self.scale,
            growth_factor,
            self.backoff_factor,
            self.growth_interval,
        )?;
        self.growth_factor = growth_factor;
        Ok(())
    }

    /// Sets the backoff factor (`0 < backoff_factor < 1`; PyTorch's
    /// `set_backoff_factor`). A refused value changes nothing.
    pub fn set_backoff_factor(&mut self, backoff_factor: f64) -> Result<()> {
        check_settings(
            self.scale,
            self.growth_factor,
            backoff_factor,
            self.growth_interval,
        )?;
        self.backoff_factor = backoff_factor;
        Ok(())
    }

    /// Sets the growth interval (`> 0`; PyTorch's `set_growth_interval`).
    /// The clean steps already counted stay counted; when they already
    /// reach the new interval, the next clean step grows the scale (PyTorch
    /// grows only when the count equals the interval, so there a count past
    /// a lowered interval never grows it again). A refused value changes
    /// nothing.
    pub fn set_growth_interval(&mut self, growth_interval: u32) -> Result<()> {
        check_settings(
            self.scale,
            self.growth_factor,
            self.backoff_factor,
            growth_interval,
        )?;
        self.growth_interval = growth_interval;
        Ok(())
    }

    /// Ends the iteration with the scale set to `new_scale` instead of
    /// adapting it: PyTorch's `update(new_scale)`, which fills the scale
    /// and leaves the growth count as it is. `new_scale` must be a positive
    /// normal f32 value (it is rounded to f32, as PyTorch's scale tensor
    /// holds it). A refused scale changes nothing: the iteration's checks
    /// stay recorded for [`update`](GradScaler::update). Does nothing on a
    /// disabled scaler, as in PyTorch.
    pub fn update_to(&mut self, new_scale: f64) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        check_settings(
            new_scale,
            self.growth_factor,
            self.backoff_factor,
            self.growth_interval,
        )?;
        self.scale = f32_round(new_scale);
        self.per_optimizer.clear();
        Ok(())
    }

    /// The scaler's state by name, to save with a checkpoint (with
    /// [`save_safetensors`](strata_tensor::save_safetensors), beside the
    /// optimizer's): PyTorch's `GradScaler.state_dict()` keys, each a 0-d
    /// tensor on the CPU: `scale` (f32, as PyTorch keeps it),
    /// `growth_factor` and `backoff_factor` (f64), `growth_interval` and
    /// `_growth_tracker` (i64). Empty for a disabled scaler, as PyTorch's.
    ///
    /// ```
    /// use strata_autograd::GradScaler;
    /// let mut a = GradScaler::with_settings(1024.0, 2.0, 0.5, 100).unwrap();
    /// a.update_to(512.0).unwrap();
    /// let saved = a.state_dict().unwrap();
    /// let mut b = GradScaler::new();
    /// b.load_state_dict(&saved).unwrap();
    /// assert_eq!((b.get_scale(), b.growth_interval()), (512.0, 100));
    /// ```
    pub fn state_dict(&self) -> Result<StateDict> {
        let mut d = StateDict::new();
        if !self.enabled {
            return Ok(d);
        }
        let cpu = Device::Cpu;
        d.insert("scale".into(), Tensor::scalar(self.scale, DType::F32, cpu)?);
        d.insert(
            "growth_factor".into(),
            Tensor::scalar(self.growth_factor, DType::F64, cpu)?,
        );
        d.insert(
            "backoff_factor".into(),
            Tensor::scalar(self.backoff_factor, DType::F64, cpu)?,
        );
        d.insert(
            "growth_interval".into(),
            Tensor::scalar(f64::from(self.growth_interval), DType::I64, cpu)?,
        );
        d.insert(
            "_growth_tracker".into(),
            Tensor::scalar(f64::from(self.growth_tracker), DType::I64, cpu)?,
        );
        Ok(d)
    }

    /// Replaces the settings, the scale and the growth count with those of
    /// `state` ([`GradScaler::state_dict`]'s names, PyTorch's; values of
    /// any numeric dtype, as a checkpoint written elsewhere may hold them).
    /// Checked whole before anything changes: every key present and no
    /// other, each a single number, the settings as
    /// [`GradScaler::with_settings`] takes them, the two counts whole
    /// numbers; an error leaves the
    /// scaler as it was. An empty state is refused, as PyTorch refuses it
    /// (it comes from a disabled scaler). A disabled scaler ignores the
    /// call, as PyTorch's.
    pub fn load_state_dict(&mut self, state: &StateDict) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let refuse = |msg: String| AutogradError::GradScaler {
            msg: format!("load_state_dict: {msg}; nothing was loaded"),
        };
        if state.is_empty() {
            return Err(refuse(
                "the state is empty, as a disabled scaler saves it; load the state of an \
                 enabled GradScaler"
                    .into(),
            ));
        }
        if let Some(k) = state.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(refuse(format!(
                "unknown entry `{k}`; a GradScaler's state has {}",
                KEYS.join(", ")
            )));
        }
        let mut v = [0.0; 5];
        for (slot, key) in v.iter_mut().zip(KEYS) {
            let Some(t) = state.get(key) else {
                return Err(refuse(format!("the state has no `{key}`")));
            };
            if t.numel() != 1 || t.ndim() > 1 || t.dtype() == DType::Bool {
                return Err(refuse(format!(
                    "`{key}` is a {} tensor of shape {:?}; expected a single number",
                    t.dtype(),
                    t.shape()
                )));
            }
            *slot = t.to_dtype_contiguous(DType::F64)?.to_vec::<f64>()?[0];
        }
        let [scale, growth_factor, backoff_factor, interval, tracker] = v;
        let count = |x: f64| x.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&x);
        if !count(interval) || !count(tracker) {
            return Err(refuse(format!(
                "`growth_interval` {interval} and `_growth_tracker` {tracker} must be whole \
                 numbers from 0 to {}",
                u32::MAX
            )));
        }
        let (interval, tracker) = (interval as u32, tracker as u32);
        check_settings(scale, growth_factor, backoff_factor, interval).map_err(|e| match e {
            AutogradError::GradScaler { msg } => refuse(msg),
            other => other,
        })?;
        self.scale = f32_round(scale);
        self.growth_factor = growth_factor;
        self.backoff_factor = backoff_factor;
        self.growth_interval = interval;
        self.growth_tracker = tracker;
        Ok(())
    }
}
