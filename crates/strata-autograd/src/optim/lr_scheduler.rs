//! Learning-rate schedules (PyTorch's `torch.optim.lr_scheduler`).
//!
//! A schedule ([`LrSchedule`]) gives the learning rate at each epoch (the
//! number of [`LrScheduler::step`] calls so far) from the optimizer's base
//! rate, in closed form, and the rate of the next epoch from the rate now,
//! as PyTorch's `scheduler.step()` computes it (its chainable `get_lr`:
//! `StepLR` multiplies the optimizer's rate by `gamma`, `CosineAnnealingLR`
//! by a ratio of cosines, ...); an [`LrScheduler`] counts the epochs and
//! sets the rate on the optimizer. Stepping with PyTorch's recurrences gives
//! its rates bit for bit (the closed form, which strata used until session
//! 52, differs from them in the last bits: a `LinearLR` warm-up to 0.1 ends
//! at PyTorch's 0.10000000000000002, and every later step uses it), and, as
//! in PyTorch, a rate set on the optimizer between steps is where the next
//! step continues from. As in PyTorch, making the scheduler applies the
//! rate of epoch 0 (a [`LinearLr`] warm-up starts at its first factor), and
//! `step` is called after the optimizer's step, once per epoch (or per
//! batch, for per-iteration schedules).
//!
//! To resume, save the scheduler's [`epoch`](LrScheduler::epoch) and
//! [`base_lr`](LrScheduler::base_lr) with the optimizer's
//! [`state_dict`](Optimizer::state_dict) (which holds its rate); load the
//! optimizer's state into a fresh optimizer, then
//! [`LrScheduler::resume`] with them: as PyTorch's two `load_state_dict`
//! calls, the optimizer keeps its restored rate and the next step continues
//! from it, so that the resumed run's rates are the uninterrupted run's
//! bit for bit (checked against PyTorch in
//! `tests/suite/resume_s52.rs`). [`LrScheduler::at_epoch`] sets the closed
//! form of an epoch instead, where the optimizer's rate was not saved.
//!
//! ```
//! use strata_autograd::optim::lr_scheduler::{CosineAnnealingLr, LrScheduler};
//! use strata_autograd::{Optimizer, Sgd, Var};
//! use strata_tensor::{DType, Device, Tensor};
//!
//! let w = Var::parameter(Tensor::zeros(&[2], DType::F32, Device::Cpu)?)?;
//! let mut opt = Sgd::new(vec![w], 0.1, 0.9)?;
//! let mut sched = LrScheduler::new(&mut opt, CosineAnnealingLr::new(10, 0.0)?)?;
//! for _ in 0..5 {
//!     // ... backward, opt.step() ...
//!     sched.step(&mut opt)?;
//! }
//! // Half-way through the cosine: half the base rate.
//! assert!((opt.lr() - 0.05).abs() < 1e-12);
//! # Ok::<(), strata_autograd::AutogradError>(())
//! ```

use super::{check, check_non_negative, Optimizer};
use crate::error::Result;

/// A learning-rate schedule: the rate at an epoch from the base rate.
pub trait LrSchedule {
    /// The learning rate at `epoch` (0 before the first scheduler step)
    /// for an optimizer whose base rate is `base_lr`.
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64;

    /// The rate at `epoch` (>= 1) from `lr`, the optimizer's rate at the
    /// epoch before, as PyTorch's `scheduler.step()` computes it (the
    /// schedule's chainable `get_lr`). By default the closed form,
    /// [`lr_at`](LrSchedule::lr_at) (PyTorch's `LambdaLR`).
    fn next_lr(&self, lr: f64, base_lr: f64, epoch: u64) -> f64 {
        let _ = lr;
        self.lr_at(base_lr, epoch)
    }
}

impl<S: LrSchedule + ?Sized> LrSchedule for Box<S> {
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64 {
        (**self).lr_at(base_lr, epoch)
    }

    fn next_lr(&self, lr: f64, base_lr: f64, epoch: u64) -> f64 {
        (**self).next_lr(lr, base_lr, epoch)
    }
}

/// Counts epochs and sets the rate of a schedule on an optimizer.
#[derive(Debug, Clone)]
pub struct LrScheduler<S> {
    schedule: S,
    base_lr: f64,
    epoch: u64,
    /// The rate this scheduler last set (PyTorch's `get_last_lr()`).
    last_lr: f64,
}

impl<S: LrSchedule> LrScheduler<S> {
    /// A scheduler for `opt` whose base rate is its rate now; sets the rate
    /// of epoch 0.
    pub fn new(opt: &mut dyn Optimizer, schedule: S) -> Result<LrScheduler<S>> {
        let base_lr = opt.lr();
        Self::at_epoch(opt, schedule, base_lr, 0)
    }

    /// A scheduler resumed from a checkpoint at `epoch` of a schedule over
    /// `base_lr` (the [`epoch`](LrScheduler::epoch) and
    /// [`base_lr`](LrScheduler::base_lr) saved with it), for an optimizer
    /// whose rate has been restored by its
    /// [`load_state_dict`](Optimizer::load_state_dict): as PyTorch's
    /// `scheduler.load_state_dict` after `optimizer.load_state_dict`, it
    /// sets nothing on the optimizer, and the next [`step`](Self::step)
    /// continues from the optimizer's rate with the schedule's recurrence,
    /// so that the resumed rates are the uninterrupted run's bit for bit
    /// (the closed form of [`at_epoch`](Self::at_epoch) differs from them
    /// in the last bits). [`last_lr`](Self::last_lr) is the optimizer's
    /// rate. A negative or NaN base rate is refused.
    pub fn resume(
        opt: &dyn Optimizer,
        schedule: S,
        base_lr: f64,
        epoch: u64,
    ) -> Result<LrScheduler<S>> {
        check_non_negative("LrScheduler", "base learning rate", base_lr)?;
        Ok(LrScheduler {
            schedule,
            base_lr,
            epoch,
            last_lr: opt.lr(),
        })
    }

    /// A scheduler for `opt` at `epoch` of a schedule over `base_lr` that
    /// sets the rate of `epoch` in closed form (to restart a schedule
    /// where the optimizer's rate was not saved; PyTorch has no such call,
    /// and its later steps differ from an uninterrupted run's in the last
    /// bits: use [`resume`](Self::resume) after loading the optimizer's
    /// state). A rate the optimizer refuses, or a negative or NaN base,
    /// is an error and changes nothing.
    pub fn at_epoch(
        opt: &mut dyn Optimizer,
        schedule: S,
        base_lr: f64,
        epoch: u64,
    ) -> Result<LrScheduler<S>> {
        // The base is checked itself, not only through the rate of `epoch`
        // (a negative base times a factor of 0 is a rate of -0.0, accepted,
        // and a later epoch's rate would then be refused for good).
        check_non_negative("LrScheduler", "base learning rate", base_lr)?;
        let last_lr = schedule.lr_at(base_lr, epoch);
        opt.set_lr(last_lr)?;
        Ok(LrScheduler {
            schedule,
            base_lr,
            epoch,
            last_lr,
        })
    }

    /// Moves to the next epoch and sets its rate on `opt` (PyTorch's
    /// `scheduler.step()`): the schedule's [`next_lr`](LrSchedule::next_lr)
    /// of the optimizer's rate now, PyTorch's recurrence. A rate the
    /// optimizer refuses (NaN from a [`LambdaLr`]) is an error and the
    /// epoch does not advance.
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> Result<()> {
        let next = self.epoch.saturating_add(1);
        let lr = self.schedule.next_lr(opt.lr(), self.base_lr, next);
        opt.set_lr(lr)?;
        (self.epoch, self.last_lr) = (next, lr);
        Ok(())
    }

    /// The current epoch (PyTorch's `last_epoch`).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The rate this scheduler set last (PyTorch's `get_last_lr()`).
    pub fn last_lr(&self) -> f64 {
        self.last_lr
    }

    /// The base rate.
    pub fn base_lr(&self) -> f64 {
        self.base_lr
    }
}

/// Refuses a factor that is negative, NaN or infinite.
fn check_factor(schedule: &'static str, name: &'static str, v: f64) -> Result<()> {
    check(
        schedule,
        name,
        v,
        v.is_finite() && v >= 0.0,
        "a finite number >= 0",
    )
}

/// Refuses a period of 0.
fn check_period(schedule: &'static str, name: &'static str, v: u64) -> Result<()> {
    check(schedule, name, v as f64, v > 0, "a whole number >= 1")
}

/// `gamma^n`, with `0^0 = 1`.
fn power(gamma: f64, n: u64) -> f64 {
    gamma.powf(n as f64)
}

/// Multiplies the rate by `gamma` every `step_size` epochs (PyTorch's
/// `StepLR`).
#[derive(Debug, Clone, Copy)]
pub struct StepLr {
    step_size: u64,
    gamma: f64,
}

impl StepLr {
    /// `step_size >= 1`, `gamma >= 0` (PyTorch's default is 0.1).
    pub fn new(step_size: u64, gamma: f64) -> Result<StepLr> {
        check_period("StepLR", "step_size", step_size)?;
        check_factor("StepLR", "gamma", gamma)?;
        Ok(StepLr { step_size, gamma })
    }
}

impl LrSchedule for StepLr {
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64 {
        base_lr * power(self.gamma, epoch / self.step_size)
    }

    /// PyTorch's: `lr * gamma` at each multiple of `step_size`.
    fn next_lr(&self, lr: f64, _base_lr: f64, epoch: u64) -> f64 {
        if epoch.is_multiple_of(self.step_size) {
            lr * self.gamma
        } else {
            lr
        }
    }
}

/// Multiplies the rate by `gamma` at each milestone epoch (PyTorch's
/// `MultiStepLR`; a milestone given twice counts twice, as there).
#[derive(Debug, Clone)]
pub struct MultiStepLr {
    milestones: Vec<u64>,
    gamma: f64,
}

impl MultiStepLr {
    /// `gamma >= 0`; the milestones in any order.
    pub fn new(mut milestones: Vec<u64>, gamma: f64) -> Result<MultiStepLr> {
        check_factor("MultiStepLR", "gamma", gamma)?;
        milestones.sort_unstable();
        Ok(MultiStepLr { milestones, gamma })
    }
}

impl LrSchedule for MultiStepLr {
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64 {
        let passed = self.milestones.partition_point(|&m| m <= epoch);
        base_lr * power(self.gamma, passed as u64)
    }

    /// PyTorch's: `lr * gamma ** k` at a milestone given `k` times.
    fn next_lr(&self, lr: f64, _base_lr: f64, epoch: u64) -> f64 {
        let from = self.milestones.partition_point(|&m| m < epoch);
        let k = self.milestones.partition_point(|&m| m <= epoch) - from;
        if k == 0 {
            lr
        } else {
            lr * power(self.gamma, k as u64)
        }
    }
}

/// Multiplies the rate by `gamma` every epoch (PyTorch's `ExponentialLR`).
#[derive(Debug, Clone, Copy)]
pub struct ExponentialLr {
    gamma: f64,
}

impl ExponentialLr {
    /// `gamma >= 0`.
    pub fn new(gamma: f64) -> Result<ExponentialLr> {
        check_factor("ExponentialLR", "gamma", gamma)?;
        Ok(ExponentialLr { gamma })
    }
}

impl LrSchedule for ExponentialLr {
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64 {
        base_lr * power(self.gamma, epoch)
    }

    /// PyTorch's: `lr * gamma`.
    fn next_lr(&self, lr: f64, _base_lr: f64, _epoch: u64) -> f64 {
        lr * self.gamma
    }
}

/// The rate falls from the base to `eta_min` along half a cosine over
/// `t_max` epochs, and rises back over the next `t_max` (PyTorch's
/// `CosineAnnealingLR`, its closed form:
/// `eta_min + (base - eta_min) (1 + cos(pi epoch / t_max)) / 2`).
#[derive(Debug, Clone, Copy)]
pub struct CosineAnnealingLr {
    t_max: u64,
    eta_min: f64,
}

impl CosineAnnealingLr {
    /// `t_max >= 1`, `eta_min >= 0`.
    pub fn new(t_max: u64, eta_min: f64) -> Result<CosineAnnealingLr> {
        check_period("CosineAnnealingLR", "T_max", t_max)?;
        check_factor("CosineAnnealingLR", "eta_min", eta_min)?;
        Ok(CosineAnnealingLr { t_max, eta_min })
    }
}

impl LrSchedule for CosineAnnealingLr {
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64 {
        // PyTorch starts at the base rate itself (its first `get_lr`);
        // the formula rounds it when eta_min is above it (0.1 with
        // eta_min 0.5 gave 0.09999999999999998).
        if epoch == 0 {
            return base_lr;
        }
        // The cosine's period is 2 t_max: reduce first, so that a large
        // epoch loses no precision (a period beyond u64 reduces nothing: a
        // saturated one would wrap u64::MAX to 0).
        let reduced = self.t_max.checked_mul(2).map_or(epoch, |p| epoch % p);
        let phase = reduced as f64 / self.t_max as f64;
        self.eta_min + (base_lr - self.eta_min) * (1.0 + (std::f64::consts::PI * phase).cos()) / 2.0
    }

    /// PyTorch's recurrence: at the start of each rise (`(epoch - 1 -
    /// t_max) % (2 t_max) == 0`) `lr + (base - eta_min) (1 - cos(pi /
    /// t_max)) / 2`, elsewhere `(1 + cos(pi e / t_max)) / (1 + cos(pi (e -
    /// 1) / t_max)) (lr - eta_min) + eta_min`, evaluated in PyTorch's order.
    fn next_lr(&self, lr: f64, base_lr: f64, epoch: u64) -> f64 {
        use std::f64::consts::PI;
        let (e, t) = (i128::from(epoch), i128::from(self.t_max));
        let eta = self.eta_min;
        if (e - 1 - t).rem_euclid(2 * t) == 0 {
            return lr + (base_lr - eta) * (1.0 - (PI / t as f64).cos()) / 2.0;
        }
        let (ef, tf) = (epoch as f64, self.t_max as f64);
        (1.0 + (PI * ef / tf).cos()) / (1.0 + (PI * (e - 1) as f64 / tf).cos()) * (lr - eta) + eta
    }
}

/// The rate goes linearly from `start_factor` to `end_factor` times the
/// base over `total_iters` epochs, then stays (PyTorch's `LinearLR`; the
/// usual warm-up is `LinearLr::new(0.01, 1.0, warmup_steps)`).
#[derive(Debug, Clone, Copy)]
pub struct LinearLr {
    start_factor: f64,
    end_factor: f64,
    total_iters: u64,
}

impl LinearLr {
    /// `start_factor` in `(0, 1]`, `end_factor` in `[0, 1]` (PyTorch's
    /// checks), `total_iters >= 1`.
    pub fn new(start_factor: f64, end_factor: f64, total_iters: u64) -> Result<LinearLr> {
        check(
            "LinearLR",
            "start_factor",
            start_factor,
            start_factor > 0.0 && start_factor <= 1.0,
            "a number in (0, 1]",
        )?;
        check(
            "LinearLR",
            "end_factor",
            end_factor,
            (0.0..=1.0).contains(&end_factor),
            "a number in [0, 1]",
        )?;
        check_period("LinearLR", "total_iters", total_iters)?;
        Ok(LinearLr {
            start_factor,
            end_factor,
            total_iters,
        })
    }
}

impl LrSchedule for LinearLr {
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64 {
        let t = epoch.min(self.total_iters) as f64 / self.total_iters as f64;
        base_lr * (self.start_factor + (self.end_factor - self.start_factor) * t)
    }

    /// PyTorch's recurrence: `lr * (1 + (end - start) / (total * start +
    /// (epoch - 1) (end - start)))` up to `total_iters`, then `lr`.
    fn next_lr(&self, lr: f64, _base_lr: f64, epoch: u64) -> f64 {
        if epoch > self.total_iters {
            return lr;
        }
        let d = self.end_factor - self.start_factor;
        let total = self.total_iters as f64 * self.start_factor;
        lr * (1.0 + d / (total + (epoch - 1) as f64 * d))
    }
}

/// The base rate times `f(epoch)` (PyTorch's `LambdaLR`).
pub struct LambdaLr<F>(pub F);

impl<F: Fn(u64) -> f64> LrSchedule for LambdaLr<F> {
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64 {
        base_lr * (self.0)(epoch)
    }
}

/// One schedule for the epochs before `milestone`, another from there,
/// its epochs counted from the milestone (PyTorch's `SequentialLR` of two
/// schedulers; e.g. a linear warm-up, then a cosine).
#[derive(Debug, Clone)]
pub struct SequentialLr<A, B> {
    first: A,
    milestone: u64,
    then: B,
}

impl<A: LrSchedule, B: LrSchedule> SequentialLr<A, B> {
    /// `first` for epochs `0..milestone`, `then` from `milestone` on.
    pub fn new(first: A, milestone: u64, then: B) -> SequentialLr<A, B> {
        SequentialLr {
            first,
            milestone,
            then,
        }
    }
}

impl<A: LrSchedule, B: LrSchedule> LrSchedule for SequentialLr<A, B> {
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64 {
        if epoch < self.milestone {
            self.first.lr_at(base_lr, epoch)
        } else {
            self.then.lr_at(base_lr, epoch - self.milestone)
        }
    }

    /// PyTorch's `SequentialLR.step()`: the first schedule's step before
    /// the milestone, the second's closed form at the milestone (its
    /// `step(0)`), its steps after.
    fn next_lr(&self, lr: f64, base_lr: f64, epoch: u64) -> f64 {
        if epoch < self.milestone {
            self.first.next_lr(lr, base_lr, epoch)
        } else if epoch == self.milestone {
            self.then.lr_at(base_lr, 0)
        } else {
            self.then.next_lr(lr, base_lr, epoch - self.milestone)
        }
    }
}
