//! Dynamic loss scaling for f16 training (PyTorch's `torch.amp.GradScaler`).
//!
//! f16 gradients underflow to zero below 6e-8; multiplying the loss by a
//! large scale before `backward` keeps them representable, and dividing the
//! gradients by it before the optimizer's step undoes it. The scale adapts:
//! when a step produced a non-finite gradient the step is skipped and the
//! scale halved (`backoff_factor`); after `growth_interval` clean steps in a
//! row it doubles (`growth_factor`). Defaults are PyTorch's: 2^16, 2, 0.5, 2000.
//!
//! The non-finite check runs on the device: [`GradScaler::unscale_`]
//! adds `sum(g * 0)` of every gradient (0 for a finite gradient, NaN
//! otherwise) into **one** device flag shared by all the optimizer's
//! parameters and then multiplies the gradient by `1/scale` in place (the
//! check sees the gradient before the division, as PyTorch's);
//! [`GradScaler::step`] reads that flag once (the only host
//! synchronisation of the step) and skips the update when it is not 0.
//!
//! One scaler may drive several optimizers, as PyTorch's (its recipe for
//! several models and optimizers): each optimizer is unscaled and stepped
//! at most once per iteration and skips only on its own gradients, and
//! [`GradScaler::update`] backs off when any optimizer's gradients were
//! non-finite (session 52; before, a second optimizer's step was refused).
//!
//! ```
//! use strata_autograd::{GradScaler, Optimizer, Sgd, Var};
//! use strata_tensor::{DType, Device, Tensor};
//! let w = Var::parameter(Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
//! let mut opt = Sgd::new(vec![w.clone()], 0.1, 0.0).unwrap();
//! let mut scaler = GradScaler::new();
//! let loss = w.mul(&w).unwrap().sum(None, false).unwrap();
//! scaler.scale(&loss).unwrap().backward().unwrap();     // grads are 2 * 65536
//! assert!(scaler.step(&mut opt).unwrap());              // unscaled to 2, then stepped
//! scaler.update().unwrap();
//! assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.8, 0.8]);
//! ```
//!
//! The scaler's settings and state save with a checkpoint and load back
//! when training resumes ([`GradScaler::state_dict`],
//! [`GradScaler::load_state_dict`], PyTorch's names), and a scaler made
//! [`GradScaler::disabled`] passes everything through, as PyTorch's
//! `GradScaler(enabled=False)` (one training loop for f32 and f16 runs).

mod settings;

use crate::error::{AutogradError, Result};
use crate::optim::Optimizer;
use crate::var::Var;
use strata_tensor::{DType, Tensor};

/// The smallest scale: the smallest positive normal f32.
const MIN_SCALE: f64 = f32::MIN_POSITIVE as f64;
/// The largest scale: the largest finite f32 (PyTorch keeps the scale in f32).
const MAX_SCALE: f64 = f32::MAX as f64;

/// `x` rounded to the nearest f32 (inf beyond its range), as PyTorch
/// stores its scale.
fn f32_round(x: f64) -> f64 {
    f64::from(x as f32)
}

/// Dynamic loss scaling (see the module documentation).
#[derive(Debug)]
pub struct GradScaler {
    /// False for a pass-through scaler ([`GradScaler::disabled`]).
    enabled: bool,
    scale: f64,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: u32,
    /// Clean steps since the last change of the scale.
    growth_tracker: u32,
    /// What this iteration did with each optimizer (PyTorch's
    /// `_per_optimizer_states`): one scaler may drive several optimizers,
    /// each unscaled and stepped once per iteration.
    per_optimizer: Vec<OptimizerState>,
}

/// One optimizer's part of an iteration.
#[derive(Debug)]
struct OptimizerState {
    /// The optimizer's parameters (their identities), which name it.
    key: Vec<usize>,
    /// The device flag of its gradients (0 when all are finite), once they
    /// were checked (by `unscale_`, or by `step`).
    found_inf: Tensor,
    /// How many gradients the flag covers (PyTorch records no check for
    /// an optimizer without gradients, and its `step` refuses it).
    checked: usize,
    /// The gradients were checked but left scaled for an optimizer that
    /// takes the scale (a step that failed hands it again).
    handed: bool,
    /// Whether its step found a non-finite gradient, once `step` ran (an
    /// optimizer step that failed leaves it `None`: `step` may be called
    /// again, and `update` counts the check, as PyTorch's).
    skipped: Option<bool>,
}

/// The identities of `optimizer`'s parameters: what tells one optimizer's
/// state from another's (an optimizer may move between calls).
fn key_of(optimizer: &dyn Optimizer) -> Vec<usize> {
    optimizer
        .params()
        .iter()
        .map(|p| std::sync::Arc::as_ptr(p.inner()) as usize)
        .collect()
}

impl Default for GradScaler {
    fn default() -> Self {
        GradScaler::new()
    }
}

impl GradScaler {
    /// A scaler with PyTorch's defaults: scale 2^16, growth 2, backoff 0.5, interval 2000.
    pub fn new() -> GradScaler {
        GradScaler {
            enabled: true,
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            growth_tracker: 0,
            per_optimizer: Vec::new(),
        }
    }

    /// Other settings: `init_scale` a positive normal f32 value (between
    /// about 1.2e-38 and 3.4e38: the scale multiplies f16/f32 losses, and its
    /// reciprocal unscales f32 gradients), `growth_factor > 1`,
    /// `0 < backoff_factor < 1`, `growth_interval > 0`.
    pub fn with_settings(
        init_scale: f64,
        growth_factor: f64,
        backoff_factor: f64,
        growth_interval: u32,
    ) -> Result<GradScaler> {
        check_settings(init_scale, growth_factor, backoff_factor, growth_interval)?;
        Ok(GradScaler {
            // PyTorch keeps the scale in a 0-d f32 tensor: 0.1 is
            // 0.100000001490116, 1e30 is 1.0000000150474662e30.
            scale: f32_round(init_scale),
            growth_factor,
            backoff_factor,
            growth_interval,
            ..GradScaler::new()
        })
    }

    /// The current scale: an f32 value, as PyTorch keeps it (an
    /// `init_scale` and each update's product are rounded to f32); 1 for a
    /// disabled scaler, as PyTorch's `get_scale`.
    pub fn get_scale(&self) -> f64 {
        if self.enabled {
            self.scale
        } else {
            1.0
        }
    }

    /// Clean steps counted towards the next growth (0 for a disabled
    /// scaler).
    pub fn growth_tracker(&self) -> u32 {
        if self.enabled {
            self.growth_tracker
        } else {
            0
        }
    }

    /// `loss * scale` (recorded, so its backward yields scaled gradients).
    ///
    /// PyTorch's scale is a 0-d f32 tensor, so a 0-d f16 or bf16 loss is
    /// promoted: the scaled loss is f32 (`2.0` in f16 scaled by 65536 is
    /// 131072, not inf), and so it is here; a loss with dims keeps its dtype.
    pub fn scale(&self, loss: &Var) -> Result<Var> {
        if !self.enabled {
            return Ok(loss.clone());
        }
        if loss.ndim() == 0 && matches!(loss.dtype(), DType::F16 | DType::BF16) {
            return loss.to_dtype(DType::F32)?.mul(self.scale);
        }
        loss.mul(self.scale)
    }

    /// Divides the gradients of `optimizer`'s parameters by the scale in place
    /// and records, on the device, whether any is non-finite. Called by
    /// [`GradScaler::step`] when the caller did not (call it yourself before
    /// clipping gradients). One scaler may drive several optimizers (each
    /// with its own parameters), as PyTorch's: each is unscaled at most once
    /// per iteration, before its step; a second call for the same optimizer
    /// before [`GradScaler::update`], or one after its step, is an error, and
    /// so are f16 gradients (as PyTorch's `unscale_` refuses them: keep f32
    /// parameters and use autocast; bf16 gradients are accepted). A refused
    /// call changes nothing.
    pub fn unscale_(&mut self, optimizer: &dyn Optimizer) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let key = key_of(optimizer);
        if let Some(st) = self.per_optimizer.iter().find(|s| s.key == key) {
            let msg = if st.skipped.is_some() {
                "unscale_ was called after step for this optimizer; unscale_ before its step, \
                 and call update() after each iteration's steps"
            } else {
                "unscale_ was already called on this optimizer since the last update(); call \
                 update() after each iteration's steps"
            };
            return Err(AutogradError::GradScaler { msg: msg.into() });
        }
        let st = self.check_grads(optimizer, key, false)?;
        self.per_optimizer.push(st);
        Ok(())
    }

    /// Checks the gradients of `optimizer` (named `key`) for non-finite
    /// values into one device flag and, unless `hand_scale` (the optimizer
    /// takes the scale: PyTorch's `_check_inf_per_device`, which leaves
    /// them scaled and takes f16 gradients), divides them by the scale.
    fn check_grads(
        &self,
        optimizer: &dyn Optimizer,
        key: Vec<usize>,
        hand_scale: bool,
    ) -> Result<OptimizerState> {
        // PyTorch's `_scale.double().reciprocal().float()`: the reciprocal
        // rounded to f32, which also multiplies f64 gradients (an f64
        // gradient times 1/3 in f64 came out about 3e-8 relative away from
        // PyTorch's; gradient-oracle program 214:1307).
        let inv = f64::from((1.0 / self.scale) as f32);
        // Every gradient is checked before any is unscaled: an error half-way
        // would leave some unscaled and the scaler ready to unscale them again.
        let grads: Vec<Tensor> = optimizer.params().iter().filter_map(Var::grad).collect();
        // PyTorch's `unscale_` refuses f16 gradients ("Attempting to unscale
        // FP16 gradients."): an f16 gradient that was scaled has already
        // overflowed or lost the bits the scale was meant to keep.
        if !hand_scale && grads.iter().any(|g| g.dtype() == DType::F16) {
            return Err(AutogradError::GradScaler {
                msg: "cannot unscale f16 gradients (as PyTorch refuses them): keep the \
                      parameters in f32 and run the forward pass under autocast, so that the \
                      gradients the scaler unscales are f32"
                    .into(),
            });
        }
        crate::optim::check_grads_in_place("GradScaler::unscale_", &grads)?;
        let checked = grads.len();
        let mut flag: Option<Tensor> = None;
        for g in grads {
            // 0 where every element is finite, NaN otherwise; summed in f32.
            // Taken of the gradient as it was, before it is divided, as
            // PyTorch's `_amp_foreach_non_finite_check_and_unscale_` checks
            // each value before multiplying it by `inv_scale`: with a scale
            // below 1, a finite gradient that the division makes infinite
            // is not flagged and the step runs (its parameter becomes
            // inf/NaN, as in PyTorch). Until session 53 the check followed
            // the division and skipped that step.
            let bad = g
                .mul(0.0)?
                .sum(None, false)?
                .to_dtype_contiguous(DType::F32)?;
            if !hand_scale {
                g.mul_(inv)?;
            }
            flag = Some(match flag {
                None => bad,
                Some(f) => {
                    f.add_(&bad)?;
                    f
                }
            });
        }
        let found_inf = match flag {
            Some(f) => f,
            None => match optimizer.params().first() {
                Some(p) => Tensor::zeros(&[], DType::F32, p.device())?,
                None => Tensor::zeros(&[], DType::F32, strata_tensor::Device::Cpu)?,
            },
        };
        Ok(OptimizerState {
            key,
            found_inf,
            checked,
            handed: hand_scale,
            skipped: None,
        })
    }

    /// Unscales (unless done already), reads the device flag once and runs
    /// `optimizer.step()` only when every gradient of this optimizer is
    /// finite. Returns whether the step ran. Each optimizer steps once per
    /// iteration (a second `step` for it before [`GradScaler::update`] is an
    /// error); several optimizers may each step, each skipping only on its
    /// own gradients, as in PyTorch. An optimizer none of whose parameters
    /// has a gradient is an error (PyTorch's "No inf checks were recorded
    /// for this optimizer": call `backward` on the scaled loss first), and
    /// changes nothing. When the optimizer's step fails, its error is
    /// returned and the scaler records no step for it, as PyTorch's (whose
    /// stage stays UNSCALED): the gradients stay unscaled (once), `step`
    /// may be called again, `unscale_` is refused, and `update` counts the
    /// check (a clean one towards growing the scale). f16 gradients are refused, as by [`GradScaler::unscale_`],
    /// except by an optimizer that takes the scale (below), as PyTorch's
    /// `step` takes them only for its fused optimizers.
    ///
    /// An optimizer that takes the scale
    /// ([`Optimizer::takes_grad_scale`]: Adam and AdamW made with
    /// `with_fused(true)`, PyTorch's `fused=True`) gets it instead, unless
    /// `unscale_` ran already: the gradients are checked as they are
    /// (scaled), and the step divides them by the scale itself
    /// ([`Optimizer::step_with_grad_scale`]); a skipped step leaves them
    /// scaled, as PyTorch's fused optimizers do.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer) -> Result<bool> {
        if !self.enabled {
            // PyTorch's disabled scaler: the optimizer's own step.
            optimizer.step()?;
            return Ok(true);
        }
        let key = key_of(&*optimizer);
        let i = match self.per_optimizer.iter().position(|s| s.key == key) {
            Some(i) if self.per_optimizer[i].skipped.is_some() => {
                return Err(AutogradError::GradScaler {
                    msg: "step was already called for this optimizer since the last update(); \
                          call update() after each iteration's steps"
                        .into(),
                });
            }
            Some(i) => i,
            None => {
                // PyTorch hands the scale to an optimizer that takes it
                // unless `unscale_` ran (its stage is then UNSCALED and
                // `grad_scale` None). f16 gradients are taken only by such
                // an optimizer (PyTorch's fused Adam/AdamW unscale inside
                // the step in f32); for any other, PyTorch's `step` calls
                // `unscale_`, which refuses them.
                let hand_scale = optimizer.takes_grad_scale();
                if !optimizer.params().iter().any(|p| p.grad().is_some()) {
                    return Err(no_gradients());
                }
                let st = self.check_grads(&*optimizer, key, hand_scale)?;
                self.per_optimizer.push(st);
                self.per_optimizer.len() - 1
            }
        };
        let st = &self.per_optimizer[i];
        if st.checked == 0 {
            // `unscale_` found no gradient to check.
            return Err(no_gradients());
        }
        let hand_scale = st.handed && optimizer.takes_grad_scale();
        let flag = st.found_inf.clone();
        // A step that failed did not happen: the scaler records none, so
        // `step` may be called again (the gradients stay unscaled, once;
        // or, for an optimizer that takes the scale, scaled, and handed it
        // again), and `update` counts the check.
        let result = flag
            .item::<f32>()
            .map_err(AutogradError::from)
            .and_then(|f| {
                let found = f != 0.0;
                if !found {
                    if hand_scale {
                        // PyTorch's scale is an f32 tensor.
                        optimizer.step_with_grad_scale(self.scale as f32)?;
                    } else {
                        optimizer.step()?;
                    }
                }
                Ok(found)
            });
        let found = result?;
        self.per_optimizer[i].skipped = Some(found);
        Ok(!found)
    }

    /// Adapts the scale after an iteration's steps: times `backoff_factor`
    /// if any optimizer's gradients were non-finite (never below the
    /// smallest normal f32), times `growth_factor` after `growth_interval`
    /// clean iterations (unless that would pass the largest f32, as in
    /// PyTorch). As PyTorch's, it counts every optimizer whose gradients
    /// were checked since the last update, by [`GradScaler::step`] or by
    /// [`GradScaler::unscale_`] alone (an iteration whose step the caller
    /// skipped after unscaling still backs off on a non-finite gradient),
    /// also one whose optimizer step failed (its check counts, as in
    /// PyTorch: a finite one towards growing the scale; until session 54
    /// strata left it out).
    ///
    /// When no gradient at all was checked since the last update (no
    /// `step` or `unscale_`, a second `update` in a row, or only optimizers
    /// without gradients) it is a [`AutogradError::GradScaler`] error that
    /// changes nothing, as PyTorch's `update` raises "No inf checks were
    /// recorded prior to update." (session 53; before, it did nothing).
    /// PyTorch raises exactly then: a check of gradients counts even when
    /// the optimizer's step then failed, so that case updates (counting the
    /// check, above) without an error. A disabled scaler never fails here.
    /// To end an iteration without a check, set the scale with
    /// [`update_to`](GradScaler::update_to) (PyTorch's `update(new_scale)`;
    /// `update_to(get_scale())` keeps it).
    pub fn update(&mut self) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        // PyTorch's condition: some optimizer's gradients were checked (its
        // `found_inf_per_device` is not empty), whether or not its step then
        // failed. Checked before anything changes: PyTorch raises before it
        // clears its per-optimizer states, and so does this.
        if !self.per_optimizer.iter().any(|st| st.checked > 0) {
            return Err(AutogradError::GradScaler {
                msg: "update() found no gradient checked for infs/NaNs since the last update \
                      (PyTorch: \"No inf checks were recorded prior to update.\"): call \
                      step (or unscale_) for an optimizer whose parameters have gradients, \
                      after backward on the scaled loss, before update(); to end the iteration \
                      without one, set the scale with update_to (update_to(get_scale()) keeps \
                      it); nothing was changed"
                    .into(),
            });
        }
        let mut skipped = false;
        for st in std::mem::take(&mut self.per_optimizer) {
            if st.checked == 0 {
                continue;
            }
            skipped |= match st.skipped {
                Some(s) => s,
                // Unscaled but not stepped (or its step failed): the flag
                // is read here (a flag that cannot be read counts as
                // non-finite, the safe side).
                None => st.found_inf.item::<f32>().map_or(true, |f| f != 0.0),
            };
        }
        if skipped {
            // Never below the smallest normal f32: a scale that rounds to 0
            // in f32 zeroes every loss and makes its reciprocal infinite, so
            // every later step would be skipped and the scale stay stuck.
            self.scale = f32_round(self.scale * self.backoff_factor).max(MIN_SCALE);
            self.growth_tracker = 0;
        } else {
            self.growth_tracker = self.growth_tracker.saturating_add(1);
            // At or past the interval (past it after a lowered
            // `set_growth_interval`; PyTorch's `==` would then never grow).
            if self.growth_tracker >= self.growth_interval {
                // As PyTorch's `_amp_update_scale_`: the product rounded to
                // f32; the scale does not grow past the f32 range (it would
                // turn every scaled loss into inf); it stays where it is.
                let grown = f32_round(self.scale * self.growth_factor);
                if grown.is_finite() {
                    self.scale = grown;
                }
                self.growth_tracker = 0;
            }
        }
        Ok(())
    }
}

/// Checks a scaler's settings (see [`GradScaler::with_settings`]).
fn check_settings(
    init_scale: f64,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: u32,
) -> Result<()> {
    let ok = (MIN_SCALE..=MAX_SCALE).contains(&init_scale)
        && growth_factor.is_finite()
        && growth_factor > 1.0
        && backoff_factor > 0.0
        && backoff_factor < 1.0
        && growth_interval > 0;
    if ok {
        return Ok(());
    }
    Err(AutogradError::GradScaler {
        msg: format!(
            "invalid settings (scale {init_scale}, growth_factor {growth_factor}, \
             backoff_factor {backoff_factor}, growth_interval {growth_interval}): need the scale \
             (init_scale, update_to) a positive normal f32 value (1.2e-38 to 3.4e38, e.g. \
             65536), growth_factor > 1 (finite), 0 < backoff_factor < 1, growth_interval > 0"
        ),
    })
}

/// The error of a step over an optimizer none of whose parameters has a
/// gradient (PyTorch: "No inf checks were recorded for this optimizer").
fn no_gradients() -> AutogradError {
    AutogradError::GradScaler {
        msg: "no parameter of this optimizer has a gradient, so there is nothing to unscale or \
              step (PyTorch: \"No inf checks were recorded for this optimizer\"); call backward \
              on the scaled loss before step"
            .into(),
    }
}
