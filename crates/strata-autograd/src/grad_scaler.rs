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
//! multiplies every gradient by `1/scale` in place and adds `sum(g * 0)`
//! (0 for a finite gradient, NaN otherwise) into **one** device flag shared
//! by all parameters; [`GradScaler::step`] reads that flag once (the only
//! host synchronisation of the step) and skips the update when it is not 0.
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
//! scaler.update();
//! assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.8, 0.8]);
//! ```

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
    scale: f64,
    growth_factor: f64,
    backoff_factor: f64,
    growth_interval: u32,
    /// Clean steps since the last change of the scale.
    growth_tracker: u32,
    /// The device flag of this iteration, once `unscale_` ran.
    found_inf: Option<Tensor>,
    /// Whether this iteration's step found a non-finite gradient (set by `step`).
    skipped: Option<bool>,
    /// The gradients were checked but left scaled for an optimizer that
    /// takes the scale (a step that failed hands it again).
    handed: bool,
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
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            growth_tracker: 0,
            found_inf: None,
            skipped: None,
            handed: false,
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
        let ok = (MIN_SCALE..=MAX_SCALE).contains(&init_scale)
            && growth_factor.is_finite()
            && growth_factor > 1.0
            && backoff_factor > 0.0
            && backoff_factor < 1.0
            && growth_interval > 0;
        if !ok {
            return Err(AutogradError::GradScaler {
                msg: format!(
                    "invalid settings (init_scale {init_scale}, growth_factor {growth_factor}, \
                     backoff_factor {backoff_factor}, growth_interval {growth_interval}): need \
                     init_scale a positive normal f32 value (1.2e-38 to 3.4e38, e.g. 65536), \
                     growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0"
                ),
            });
        }
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
    /// `init_scale` and each update's product are rounded to f32).
    pub fn get_scale(&self) -> f64 {
        self.scale
    }

    /// Clean steps counted towards the next growth.
    pub fn growth_tracker(&self) -> u32 {
        self.growth_tracker
    }

    /// `loss * scale` (recorded, so its backward yields scaled gradients).
    ///
    /// PyTorch's scale is a 0-d f32 tensor, so a 0-d f16 or bf16 loss is
    /// promoted: the scaled loss is f32 (`2.0` in f16 scaled by 65536 is
    /// 131072, not inf), and so it is here; a loss with dims keeps its dtype.
    pub fn scale(&self, loss: &Var) -> Result<Var> {
        if loss.ndim() == 0 && matches!(loss.dtype(), DType::F16 | DType::BF16) {
            return loss.to_dtype(DType::F32)?.mul(self.scale);
        }
        loss.mul(self.scale)
    }

    /// Divides the gradients of `optimizer`'s parameters by the scale in place
    /// and records, on the device, whether any is non-finite. Called by
    /// [`GradScaler::step`] when the caller did not (call it yourself before
    /// clipping gradients); a second call in the same iteration is an error,
    /// and so are f16 gradients (as PyTorch's `unscale_` refuses them: keep
    /// f32 parameters and use autocast; bf16 gradients are accepted). A
    /// refused call changes nothing.
    pub fn unscale_(&mut self, optimizer: &dyn Optimizer) -> Result<()> {
        self.unscale(optimizer, false, true)
    }

    /// [`GradScaler::unscale_`], taking f16 gradients when `allow_f16`;
    /// without `unscale` only the non-finite check (PyTorch's
    /// `_check_inf_per_device`, before a step that takes the scale).
    fn unscale(&mut self, optimizer: &dyn Optimizer, allow_f16: bool, unscale: bool) -> Result<()> {
        if self.found_inf.is_some() {
            return Err(AutogradError::GradScaler {
                msg: "unscale_ was already called since the last update(); call update() after \
                      each step"
                    .into(),
            });
        }
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
        if !allow_f16 && grads.iter().any(|g| g.dtype() == DType::F16) {
            return Err(AutogradError::GradScaler {
                msg: "cannot unscale f16 gradients (as PyTorch refuses them): keep the \
                      parameters in f32 and run the forward pass under autocast, so that the \
                      gradients the scaler unscales are f32"
                    .into(),
            });
        }
        crate::optim::check_grads_in_place("GradScaler::unscale_", &grads)?;
        let mut flag: Option<Tensor> = None;
        for g in grads {
            if unscale {
                g.mul_(inv)?;
            }
            // 0 where every element is finite, NaN otherwise; summed in f32.
            let bad = g.mul(0.0)?.sum(None, false)?.to_dtype(DType::F32)?;
            flag = Some(match flag {
                None => bad,
                Some(f) => {
                    f.add_(&bad)?;
                    f
                }
            });
        }
        let flag = match flag {
            Some(f) => f,
            None => match optimizer.params().first() {
                Some(p) => Tensor::zeros(&[], DType::F32, p.device())?,
                None => Tensor::zeros(&[], DType::F32, strata_tensor::Device::Cpu)?,
            },
        };
        self.found_inf = Some(flag);
        Ok(())
    }

    /// Unscales (unless done already), reads the device flag once and runs
    /// `optimizer.step()` only when every gradient is finite. Returns whether
    /// the step ran. When the optimizer's step fails, its error is returned
    /// and the scaler counts no step: the gradients stay unscaled (once), and
    /// `step` may be called again, or `update` changes nothing. f16
    /// gradients are refused, as by [`GradScaler::unscale_`], except by an
    /// optimizer that takes the scale (below), as PyTorch's `step` takes
    /// them only for its fused optimizers.
    ///
    /// An optimizer that takes the scale
    /// ([`Optimizer::takes_grad_scale`]: Adam and AdamW made with
    /// `with_fused(true)`, PyTorch's `fused=True`) gets it instead, unless
    /// `unscale_` ran already: the gradients are checked as they are
    /// (scaled), and the step divides them by the scale itself
    /// ([`Optimizer::step_with_grad_scale`]); a skipped step leaves them
    /// scaled, as PyTorch's fused optimizers do.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer) -> Result<bool> {
        if self.skipped.is_some() {
            return Err(AutogradError::GradScaler {
                msg: "step was already called since the last update(); call update() after \
                      each step"
                    .into(),
            });
        }
        // PyTorch hands the scale to an optimizer that takes it unless
        // `unscale_` ran (its stage is then UNSCALED and `grad_scale` None).
        let hand_scale = (self.found_inf.is_none() || self.handed) && optimizer.takes_grad_scale();
        if self.found_inf.is_none() {
            // f16 gradients are taken only by an optimizer that takes the
            // scale (PyTorch's fused Adam/AdamW unscale inside the step in
            // f32); for any other, PyTorch's `step` calls `unscale_`, which
            // refuses them ("Attempting to unscale FP16 gradients.").
            self.unscale(&*optimizer, hand_scale, !hand_scale)?;
            self.handed = hand_scale;
        }
        let flag = self.found_inf.as_ref().expect("set by unscale_");
        let found = flag.item::<f32>()? != 0.0;
        // A step that failed did not happen: the scaler records none, so
        // `update` leaves the scale and the growth count alone and `step`
        // may be called again (the gradients stay unscaled, once; or, for
        // an optimizer that takes the scale, scaled, and handed it again).
        if !found {
            if hand_scale {
                // PyTorch's scale is an f32 tensor.
                optimizer.step_with_grad_scale(self.scale as f32)?;
            } else {
                optimizer.step()?;
            }
        }
        self.skipped = Some(found);
        Ok(!found)
    }

    /// Adapts the scale after a step: times `backoff_factor` if the step was
    /// skipped (never below the smallest normal f32), times `growth_factor`
    /// after `growth_interval` clean steps (unless that would pass the
    /// largest f32, as in PyTorch).
    /// Without a step since the last update, nothing changes.
    pub fn update(&mut self) {
        self.found_inf = None;
        self.handed = false;
        let Some(skipped) = self.skipped.take() else {
            return;
        };
        if skipped {
            // Never below the smallest normal f32: a scale that rounds to 0
            // in f32 zeroes every loss and makes its reciprocal infinite, so
            // every later step would be skipped and the scale stay stuck.
            self.scale = f32_round(self.scale * self.backoff_factor).max(MIN_SCALE);
            self.growth_tracker = 0;
        } else {
            self.growth_tracker += 1;
            if self.growth_tracker == self.growth_interval {
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
    }
}
