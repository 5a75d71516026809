//! Session 52 (helper): resuming training against PyTorch 2.15.
//!
//! * Learning-rate schedules resumed mid-run. PyTorch's resume is
//!   `optimizer.load_state_dict(sd)` (restores `lr` and `initial_lr`) then
//!   `scheduler.load_state_dict(sd)` (restores `last_epoch`, `base_lrs`,
//!   `_last_lr`, nothing on the optimizer); the next `step()` continues
//!   from the restored `lr` with the chainable recurrence. Its resumed
//!   rates are the uninterrupted run's bit for bit at every epoch k of
//!   every schedule below. strata's `LrScheduler::resume` set the closed
//!   form of epoch k instead (a cosine resumed at 10 restarted from
//!   0.1 = 0x3fb999999999999a where PyTorch continues from its
//!   0x3fb999999999999d), so every later rate differed in the last bits;
//!   it now keeps the optimizer's restored rate, as PyTorch.
//!
//! * `GradScaler` against `torch.amp.GradScaler("cpu")`: two optimizers
//!   (SGD with momentum, and Adam, plain or fused), inf gradients in one,
//!   `unscale_` then `clip_grad_value_`, `update(new_scale)` mid-run, a
//!   save/load mid-run, a disabled scaler in the same loop: PyTorch's
//!   traces (below, as `float.hex`) bit for bit, without a fix. Not
//!   covered: `clip_grad_norm_` (its 2-norm is 1 ulp from PyTorch's on
//!   `[0.37, -0.925, 1.48]`: PyTorch's CPU `vector_norm` of f32 sums the
//!   squares in 8 f32 lanes (AVX2) with a fused multiply-add tail, strata
//!   `(g * g).sum().sqrt()`; strata-tensor's, reported), so the scenario
//!   clips with `clip_grad_value_`.
//! * Optimizer states made by PyTorch (`tests/data/resume_s52_*.safetensors`,
//!   written by `tests/data/gen_resume_s52.py`): SGD (momentum, Nesterov,
//!   weight decay), Adam (AMSGrad) and AdamW loaded into strata, stepped 3
//!   more times, parameters and states PyTorch's bit for bit. Adam and
//!   AdamW are PyTorch's `fused=True` over 64 elements (strata's CPU step
//!   rounds as its fused kernel's vectorized loop; over 5 elements, all in
//!   PyTorch's scalar tail, the last bits differ: strata-tensor's kernel,
//!   reported).
//!
//! The schedules' figures are PyTorch's (`torch.optim.SGD([p], lr=0.1)`, one
//! `scheduler.step()` per epoch, the rates of epochs 0..=14 as
//! `param_groups[0]["lr"]`, their f64 bits).

use strata_autograd::optim::clip_grad_value_;
use strata_autograd::optim::lr_scheduler::{
    CosineAnnealingLr, ExponentialLr, LambdaLr, LinearLr, LrSchedule, LrScheduler, MultiStepLr,
    SequentialLr, StepLr,
};
use strata_autograd::{Adam, AutogradError, GradScaler, Optimizer, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

// step: [0.1, 0.1, 0.1, 0.010000000000000002, 0.010000000000000002, 0.010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.0010000000000000002, 0.00010000000000000003, 0.00010000000000000003, 0.00010000000000000003, 1.0000000000000004e-05, 1.0000000000000004e-05, 1.0000000000000004e-05]
const STEP: [u64; 15] = [
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3f847ae147ae147c,
    0x3f847ae147ae147c,
    0x3f847ae147ae147c,
    0x3f50624dd2f1a9fd,
    0x3f50624dd2f1a9fd,
    0x3f50624dd2f1a9fd,
    0x3f1a36e2eb1c432f,
    0x3f1a36e2eb1c432f,
    0x3f1a36e2eb1c432f,
    0x3ee4f8b588e368f3,
    0x3ee4f8b588e368f3,
    0x3ee4f8b588e368f3,
];
// multistep: [0.1, 0.1, 0.03, 0.03, 0.03, 0.0026999999999999997, 0.0026999999999999997, 0.0026999999999999997, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998, 0.0008099999999999998]
const MULTISTEP: [u64; 15] = [
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3f9eb851eb851eb8,
    0x3f9eb851eb851eb8,
    0x3f9eb851eb851eb8,
    0x3f661e4f765fd8ad,
    0x3f661e4f765fd8ad,
    0x3f661e4f765fd8ad,
    0x3f4a8ac5c13fd0cf,
    0x3f4a8ac5c13fd0cf,
    0x3f4a8ac5c13fd0cf,
    0x3f4a8ac5c13fd0cf,
    0x3f4a8ac5c13fd0cf,
    0x3f4a8ac5c13fd0cf,
    0x3f4a8ac5c13fd0cf,
];
// exp: [0.1, 0.09000000000000001, 0.08100000000000002, 0.07290000000000002, 0.06561000000000002, 0.05904900000000002, 0.05314410000000002, 0.04782969000000002, 0.043046721000000024, 0.03874204890000002, 0.03486784401000002, 0.03138105960900001, 0.028242953648100012, 0.025418658283290013, 0.022876792454961013]
const EXP: [u64; 15] = [
    0x3fb999999999999a,
    0x3fb70a3d70a3d70b,
    0x3fb4bc6a7ef9db24,
    0x3fb2a9930be0ded4,
    0x3fb0cbd1244a6225,
    0x3fae3baba7b91710,
    0x3fab35b416f3618f,
    0x3fa87d2214a7d7ce,
    0x3fa60a3845ca423a,
    0x3fa3d5ff7202d534,
    0x3fa1da32b368f315,
    0x3fa0112da1780df9,
    0x3f9cebb8890b4c5a,
    0x3f9a07594823c4b8,
    0x3f976d038db9caa6,
];
// cos: [0.1, 0.0905463412215599, 0.06579634122155989, 0.035203658778440096, 0.010453658778440105, 0.001, 0.010453658778440102, 0.03520365877844012, 0.06579634122155993, 0.09054634122155995, 0.10000000000000005, 0.09054634122155998, 0.06579634122155995, 0.03520365877844014, 0.010453658778440116]
const COS: [u64; 15] = [
    0x3fb999999999999a,
    0x3fb72e0b8651adaf,
    0x3fb0d8076dbe38f2,
    0x3fa20636c64e4e9d,
    0x3f8568ba549d9496,
    0x3f50624dd2f1a9fc,
    0x3f8568ba549d9494,
    0x3fa20636c64e4ea0,
    0x3fb0d8076dbe38f5,
    0x3fb72e0b8651adb3,
    0x3fb999999999999d,
    0x3fb72e0b8651adb5,
    0x3fb0d8076dbe38f6,
    0x3fa20636c64e4ea3,
    0x3f8568ba549d949c,
];
// linear: [0.025, 0.04000000000000001, 0.05500000000000001, 0.07, 0.085, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
const LINEAR: [u64; 15] = [
    0x3f9999999999999a,
    0x3fa47ae147ae147c,
    0x3fac28f5c28f5c2a,
    0x3fb1eb851eb851ec,
    0x3fb5c28f5c28f5c3,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
    0x3fb999999999999a,
];
// lambda: [0.1, 0.095, 0.09025, 0.0857375, 0.081450625, 0.07737809374999999, 0.07350918906249998, 0.06983372960937498, 0.06634204312890622, 0.0630249409724609, 0.05987369392383787, 0.05688000922764597, 0.05403600876626367, 0.051334208327950485, 0.04876749791155296]
const LAMBDA: [u64; 15] = [
    0x3fb999999999999a,
    0x3fb851eb851eb852,
    0x3fb71a9fbe76c8b4,
    0x3fb5f2e48e8a71de,
    0x3fb4d9f2ba9d1f60,
    0x3fb3cf0cfe154434,
    0x3fb2d17f8afa9a64,
    0x3fb1e09f90d47912,
    0x3fb0fbcac996a637,
    0x3fb022670c4f1de7,
    0x3faea7c3ca96526c,
    0x3fad1f6066db9b18,
    0x3fabaa9b94ea39bd,
    0x3faa487a33de83a7,
    0x3fa8f80db14696ab,
];
// seq: [0.010000000000000002, 0.04, 0.07, 0.1, 0.09330127018922195, 0.07500000000000001, 0.05, 0.025000000000000012, 0.006698729810778065, 0.0, 0.006698729810778065, 0.025, 0.05000000000000004, 0.07500000000000008, 0.09330127018922202]
const SEQ: [u64; 15] = [
    0x3f847ae147ae147c,
    0x3fa47ae147ae147b,
    0x3fb1eb851eb851ec,
    0x3fb999999999999a,
    0x3fb7e297902351df,
    0x3fb3333333333334,
    0x3fa999999999999a,
    0x3f9999999999999d,
    0x3f7b702097647bba,
    0x0,
    0x3f7b702097647bba,
    0x3f9999999999999a,
    0x3fa999999999999f,
    0x3fb3333333333339,
    0x3fb7e297902351e4,
];
const BASE: f64 = 0.1;

fn sgd() -> Sgd {
    let p = Var::parameter(Tensor::zeros(&[2], DType::F32, Device::Cpu).unwrap()).unwrap();
    Sgd::new(vec![p], BASE, 0.0).unwrap()
}

/// Runs `make()` uninterrupted, and resumed at every epoch k in 1..14
/// (a fresh optimizer loads the state saved at k, a fresh scheduler
/// resumes at k), comparing every rate with PyTorch's bits.
fn check<S: LrSchedule>(name: &str, want: &[u64; 15], make: impl Fn() -> S) {
    let mut opt = sgd();
    let mut s = LrScheduler::new(&mut opt, make()).unwrap();
    assert_eq!(opt.lr().to_bits(), want[0], "{name}: epoch 0");
    let mut saved = vec![None];
    for (e, &w) in want.iter().enumerate().skip(1) {
        s.step(&mut opt).unwrap();
        assert_eq!(opt.lr().to_bits(), w, "{name}: epoch {e}: {}", opt.lr());
        assert_eq!(s.last_lr(), opt.lr());
        saved.push(Some((opt.state_dict().unwrap(), s.epoch(), s.base_lr())));
    }
    for (k, state) in saved.iter().enumerate().take(14).skip(1) {
        let (sd, epoch, base) = state.as_ref().unwrap();
        // A fresh optimizer and scheduler, as PyTorch's resume makes them.
        let mut opt = sgd();
        let _ = LrScheduler::new(&mut opt, make()).unwrap();
        opt.load_state_dict(sd).unwrap();
        let mut s = LrScheduler::resume(&opt, make(), *base, *epoch).unwrap();
        assert_eq!((s.epoch(), s.last_lr().to_bits()), (k as u64, want[k]));
        assert_eq!(opt.lr().to_bits(), want[k], "{name}: resumed at {k}");
        for (e, &w) in want.iter().enumerate().skip(k + 1) {
            s.step(&mut opt).unwrap();
            assert_eq!(
                opt.lr().to_bits(),
                w,
                "{name}: resumed at {k}, epoch {e}: {}",
                opt.lr()
            );
        }
    }
}

#[test]
fn step_lr_resumes_as_pytorch() {
    check("StepLR(3, 0.1)", &STEP, || StepLr::new(3, 0.1).unwrap());
}

#[test]
fn multi_step_lr_resumes_as_pytorch() {
    check("MultiStepLR([2,5,5,8], 0.3)", &MULTISTEP, || {
        MultiStepLr::new(vec![2, 5, 5, 8], 0.3).unwrap()
    });
}

#[test]
fn exponential_lr_resumes_as_pytorch() {
    check("ExponentialLR(0.9)", &EXP, || {
        ExponentialLr::new(0.9).unwrap()
    });
}

#[test]
fn cosine_annealing_lr_resumes_as_pytorch() {
    check("CosineAnnealingLR(5, 0.001)", &COS, || {
        CosineAnnealingLr::new(5, 0.001).unwrap()
    });
}

#[test]
fn linear_lr_resumes_as_pytorch() {
    check("LinearLR(0.25, 1.0, 5)", &LINEAR, || {
        LinearLr::new(0.25, 1.0, 5).unwrap()
    });
}

#[test]
fn lambda_lr_resumes_as_pytorch() {
    // PyTorch: `lambda e: 0.95 ** e` (C's pow).
    check("LambdaLR(0.95 ** e)", &LAMBDA, || {
        LambdaLr(|e: u64| 0.95f64.powf(e as f64))
    });
}

#[test]
fn sequential_lr_resumes_as_pytorch() {
    // PyTorch: SequentialLR([LinearLR(0.1, 1.0, 3), CosineAnnealingLR(6)], [3]).
    check("SequentialLR", &SEQ, || {
        SequentialLr::new(
            LinearLr::new(0.1, 1.0, 3).unwrap(),
            3,
            CosineAnnealingLr::new(6, 0.0).unwrap(),
        )
    });
}

/// `resume` sets nothing on the optimizer (PyTorch's
/// `scheduler.load_state_dict` neither), and a NaN or negative base rate
/// is refused.
#[test]
fn resume_keeps_the_optimizers_rate_and_refuses_a_bad_base() {
    let mut opt = sgd();
    opt.set_lr(0.0625).unwrap();
    let s = LrScheduler::resume(&opt, StepLr::new(2, 0.5).unwrap(), 1.0, 3).unwrap();
    assert_eq!(
        (opt.lr(), s.last_lr(), s.base_lr(), s.epoch()),
        (0.0625, 0.0625, 1.0, 3)
    );
    for base in [f64::NAN, -1.0] {
        let r = LrScheduler::resume(&opt, StepLr::new(2, 0.5).unwrap(), base, 3);
        assert!(
            matches!(r, Err(AutogradError::Hyperparameter { .. })),
            "{r:?}"
        );
        assert_eq!(opt.lr(), 0.0625);
    }
}

// ----- GradScaler -----

/// PyTorch 2.15's trace (fused=False).
const PT_ADAM: &str = "\
0 0x1.7700000000000p+11 1 w1=0x1.da1cac0000000p-2,-0x1.3333340000000p+0,0x1.f333340000000p+0 g1=0x1.7ae1480000000p-2,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7d70a40000000p+0,-0x1.851eb80000000p-1 g2=0x1.6ae1480000000p+0,0x1.6ae1480000000p-2\n\
1 0x1.7700000000000p+12 0 w1=0x1.84d0140000000p-2,-0x1.1ae1480000000p+0,0x1.dae1480000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7ae1860000000p+0,-0x1.8a3e3a0000000p-1 g2=0x1.660ec80000000p+0,0x1.749f100000000p-2\n\
2 0x1.7700000000000p+10 0 w1=0x1.04d7f00000000p-2,-0x1.f0624e0000000p-1,0x1.b831280000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7ae1860000000p+0,-0x1.8a3e3a0000000p-1 g2=inf,0x1.7e7f640000000p-2\n\
3 0x1.7700000000000p+10 1 w1=0x1.79e2760000000p-4,-0x1.98587a0000000p-1,0x1.8c2c3e0000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7852d00000000p+0,-0x1.8f5f0a0000000p-1 g2=0x1.6144fe0000000p+0,0x1.7e7f640000000p-2\n\
4 0x1.2c00000000000p+8 1 w1=-0x1.68df840000000p-4,-0x1.2f82d40000000p-1,0x1.57c16c0000000p+0 g1=0x1.5d8b120000000p-2,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.75c4ac0000000p+0,-0x1.9481a80000000p-1 g2=0x1.5c84340000000p+0,0x1.88835c0000000p-2\n\
5 0x1.2c00000000000p+6 0 w1=-0x1.b0c3820000000p-3,-0x1.6f1eb20000000p-2,0x1.1bc7ae0000000p+0 g1=-0x1.9091b40000000p-2,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.75c4ac0000000p+0,-0x1.9481a80000000p-1 g2=inf,0x1.92ac0e0000000p-2\n\
6 0x1.2c00000000000p+6 1 w1=-0x1.16baa40000000p-2,-0x1.9008200000000p-4,0x1.b201080000000p-1 g1=-0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7337440000000p+0,-0x1.99a6920000000p-1 g2=0x1.57ccb40000000p+0,0x1.92ac0e0000000p-2\n\
7 0x1.2c00000000000p+7 0 w1=-0x1.1ba43e0000000p-2,0x1.7f2f860000000p-3,0x1.2034220000000p-1 g1=-0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.70aac40000000p+0,-0x1.9ece400000000p-1 g2=0x1.531ec60000000p+0,0x1.9cfa9a0000000p-2\n\
";

/// PyTorch 2.15's trace (fused=True).
const PT_FUSED: &str = "\
0 0x1.7700000000000p+11 1 w1=0x1.da1cac0000000p-2,-0x1.3333340000000p+0,0x1.f333340000000p+0 g1=0x1.7ae1480000000p-2,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7d70a40000000p+0,-0x1.851eb80000000p-1 g2=0x1.6ae1480000000p+0,0x1.6ae1480000000p-2\n\
1 0x1.7700000000000p+12 0 w1=0x1.84d0140000000p-2,-0x1.1ae1480000000p+0,0x1.dae1480000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7ae1860000000p+0,-0x1.8a3e3a0000000p-1 g2=0x1.660ec80000000p+0,0x1.749f100000000p-2\n\
2 0x1.7700000000000p+10 0 w1=0x1.04d7f00000000p-2,-0x1.f0624e0000000p-1,0x1.b831280000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7ae1860000000p+0,-0x1.8a3e3a0000000p-1 g2=inf,0x1.18264e0000000p+11\n\
3 0x1.7700000000000p+10 1 w1=0x1.79e2760000000p-4,-0x1.98587a0000000p-1,0x1.8c2c3e0000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7852d00000000p+0,-0x1.8f5f0a0000000p-1 g2=0x1.6144fe0000000p+0,0x1.7e7f640000000p-2\n\
4 0x1.2c00000000000p+8 1 w1=-0x1.68df840000000p-4,-0x1.2f82d40000000p-1,0x1.57c16c0000000p+0 g1=0x1.5d8b120000000p-2,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.75c4ac0000000p+0,-0x1.9481a80000000p-1 g2=0x1.5c84340000000p+0,0x1.88835c0000000p-2\n\
5 0x1.2c00000000000p+6 0 w1=-0x1.b0c3820000000p-3,-0x1.6f1eb20000000p-2,0x1.1bc7ae0000000p+0 g1=-0x1.9091b40000000p-2,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.75c4ac0000000p+0,-0x1.9481a80000000p-1 g2=inf,0x1.d7e1a00000000p+6\n\
6 0x1.2c00000000000p+6 1 w1=-0x1.16baa40000000p-2,-0x1.9008200000000p-4,0x1.b201080000000p-1 g1=-0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7337440000000p+0,-0x1.99a6920000000p-1 g2=0x1.57ccb40000000p+0,0x1.92ac0e0000000p-2\n\
7 0x1.2c00000000000p+7 0 w1=-0x1.1ba43e0000000p-2,0x1.7f2f860000000p-3,0x1.2034220000000p-1 g1=-0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.70aac40000000p+0,-0x1.9ece400000000p-1 g2=0x1.531ec60000000p+0,0x1.9cfa9a0000000p-2\n\
";

/// PyTorch 2.15's trace (disabled).
const PT_DISABLED: &str = "\
0 0x1.0000000000000p+0 0 w1=0x1.da1cac0000000p-2,-0x1.3333340000000p+0,0x1.f333340000000p+0 g1=0x1.7ae1480000000p-2,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7d70a40000000p+0,-0x1.851eb80000000p-1 g2=0x1.6ae1480000000p+0,0x1.6ae1480000000p-2\n\
1 0x1.0000000000000p+0 0 w1=0x1.84d0140000000p-2,-0x1.1ae1480000000p+0,0x1.dae1480000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7ae1860000000p+0,-0x1.8a3e3a0000000p-1 g2=0x1.660ec60000000p+0,0x1.749f0c0000000p-2\n\
2 0x1.0000000000000p+0 0 w1=0x1.04d7f00000000p-2,-0x1.f0624e0000000p-1,0x1.b831280000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7852d00000000p+0,-0x1.8f5f0a0000000p-1 g2=0x1.6144fc0000000p+0,0x1.7e7f640000000p-2\n\
3 0x1.0000000000000p+0 0 w1=0x1.79e2760000000p-4,-0x1.98587a0000000p-1,0x1.8c2c3e0000000p+0 g1=0x1.0000000000000p-1,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.75c4ac0000000p+0,-0x1.9481a80000000p-1 g2=0x1.5c84340000000p+0,0x1.8883580000000p-2\n\
4 0x1.0000000000000p+0 0 w1=-0x1.68df840000000p-4,-0x1.2f82d40000000p-1,0x1.57c16c0000000p+0 g1=0x1.5d8b140000000p-2,-0x1.0000000000000p-1,0x1.0000000000000p-1 w2=0x1.7337440000000p+0,-0x1.99a6920000000p-1 g2=0x1.57ccb40000000p+0,0x1.92ac0e0000000p-2\n\
";

/// Python's `float.hex`.
fn pyhex(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x.is_infinite() {
        return format!("{sign}inf");
    }
    if x == 0.0 {
        return format!("{sign}0x0.0p+0");
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64 - 1023;
    format!("{sign}0x1.{:013x}p{exp:+}", bits & ((1 << 52) - 1))
}

fn hexes(t: &Tensor) -> String {
    let v = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    v.iter().map(|&x| pyhex(x)).collect::<Vec<_>>().join(",")
}

struct Run {
    w1: Var,
    w2: Var,
    o1: Sgd,
    o2: Adam,
    s: GradScaler,
}

fn f32s(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], Device::Cpu).unwrap()
}

/// PyTorch: `w1 = [0.5, -1.25, 2]` under `SGD(lr=0.1, momentum=0.9)`,
/// `w2 = [1.5, -0.75]` under `Adam(lr=0.01, fused=fused)`, one
/// `GradScaler("cpu", init_scale=3000, growth_factor=2, backoff_factor=0.25,
/// growth_interval=2, enabled=enabled)`.
fn run(fused: bool, enabled: bool) -> Run {
    let w1 = Var::parameter(f32s(&[0.5, -1.25, 2.0])).unwrap();
    let w2 = Var::parameter(f32s(&[1.5, -0.75])).unwrap();
    let o1 = Sgd::new(vec![w1.clone()], 0.1, 0.9).unwrap();
    let o2 = Adam::new(vec![w2.clone()], 0.01).unwrap().with_fused(fused);
    let s = if enabled {
        GradScaler::with_settings(3000.0, 2.0, 0.25, 2).unwrap()
    } else {
        GradScaler::disabled()
    };
    Run { w1, w2, o1, o2, s }
}

/// One iteration: `loss = (w1 * w1).sum() * (0.37 * (i + 1)) +
/// (w2 ** 3).sum() * 0.21`, plus `w2[0] * inf` at iterations 2 and 5
/// (`inf`); `scale(loss).backward()`, `unscale_(o1)`,
/// `clip_grad_value_([w1], 0.5)`, `step(o1)`, `step(o2)`, `update(300.0)`
/// at iteration 4, else `update()`. The line has the scale, the growth
/// tracker, the parameters and gradients.
fn iteration(r: &mut Run, i: usize, inf: bool) -> String {
    r.o1.zero_grad(true).unwrap();
    r.o2.zero_grad(true).unwrap();
    let l1 = r.w1.mul(&r.w1).unwrap().sum(None, false).unwrap();
    let l1 = l1.mul(0.37 * (i + 1) as f64).unwrap();
    let cube = r.w2.mul(&r.w2).unwrap().mul(&r.w2).unwrap();
    let l2 = cube.sum(None, false).unwrap().mul(0.21).unwrap();
    let mut loss = l1.add(&l2).unwrap();
    if inf && (i == 2 || i == 5) {
        // d/dw2 of (w2 * [inf, 0]).sum() is PyTorch's w2[0] * inf's [inf, 0].
        let c = Var::new(f32s(&[f32::INFINITY, 0.0]));
        let t = r.w2.mul(&c).unwrap().sum(None, false).unwrap();
        loss = loss.add(&t).unwrap();
    }
    r.s.scale(&loss).unwrap().backward().unwrap();
    r.s.unscale_(&r.o1).unwrap();
    clip_grad_value_(std::slice::from_ref(&r.w1), 0.5).unwrap();
    r.s.step(&mut r.o1).unwrap();
    r.s.step(&mut r.o2).unwrap();
    if i == 4 {
        r.s.update_to(300.0).unwrap();
    } else {
        r.s.update().unwrap();
    }
    format!(
        "{i} {} {} w1={} g1={} w2={} g2={}",
        pyhex(r.s.get_scale()),
        r.s.growth_tracker(),
        hexes(r.w1.data()),
        hexes(&r.w1.grad().unwrap()),
        hexes(r.w2.data()),
        hexes(&r.w2.grad().unwrap())
    )
}

/// The uninterrupted trace of 8 iterations, and the trace of iterations
/// 4..8 resumed from a checkpoint after iteration 3 (fresh parameters,
/// optimizers and scaler loading the saved ones).
fn traces(fused: bool) -> (Vec<String>, Vec<String>) {
    let mut r = run(fused, true);
    let mut full = Vec::new();
    let mut saved = None;
    for i in 0..8 {
        full.push(iteration(&mut r, i, true));
        if i == 3 {
            saved = Some((
                r.s.state_dict().unwrap(),
                r.o1.state_dict().unwrap(),
                r.o2.state_dict().unwrap(),
                r.w1.data().to_vec::<f32>().unwrap(),
                r.w2.data().to_vec::<f32>().unwrap(),
            ));
        }
    }
    let (s, o1, o2, w1, w2) = saved.unwrap();
    let mut r = run(fused, true);
    r.w1.data().copy_(&f32s(&w1)).unwrap();
    r.w2.data().copy_(&f32s(&w2)).unwrap();
    r.o1.load_state_dict(&o1).unwrap();
    r.o2.load_state_dict(&o2).unwrap();
    r.s.load_state_dict(&s).unwrap();
    assert_eq!((r.s.get_scale(), r.s.growth_tracker()), (1500.0, 1));
    let resumed = (4..8).map(|i| iteration(&mut r, i, true)).collect();
    (full, resumed)
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_owned).collect()
}

/// Two optimizers under one scaler, inf gradients in the second's at
/// iterations 2 and 5 (it skips, the first steps; the scale backs off),
/// `unscale_` then `clip_grad_value_` for the first, `update(300.0)` at iteration 4,
/// and a save/load after iteration 3: scales, growth trackers, parameters
/// and gradients are PyTorch's bit for bit, resumed or not.
#[test]
fn grad_scaler_with_two_optimizers_matches_pytorch() {
    let (full, resumed) = traces(false);
    let want = lines(PT_ADAM);
    assert_eq!(full, want);
    assert_eq!(resumed, want[4..]);
}

/// The same with the second optimizer fused (`Adam(fused=True)`): the
/// scaler hands it the scale, and its skipped steps leave the gradients
/// scaled (`g2` at iterations 2 and 5), as PyTorch's.
#[test]
fn grad_scaler_with_a_fused_adam_matches_pytorch() {
    let (full, resumed) = traces(true);
    let want = lines(PT_FUSED);
    assert_eq!(full, want);
    assert_eq!(resumed, want[4..]);
}

/// `GradScaler(enabled=False)` in the same loop (no inf): scale 1, tracker
/// 0, `update(300.0)` ignored, the optimizers' own steps; its state
/// dictionary is empty.
#[test]
fn a_disabled_grad_scaler_matches_pytorch() {
    let mut r = run(false, false);
    let got: Vec<String> = (0..5).map(|i| iteration(&mut r, i, false)).collect();
    assert_eq!(got, lines(PT_DISABLED));
    assert!(r.s.state_dict().unwrap().is_empty());
}

/// The scale's arithmetic in f32 with factors that are not powers of two:
/// `GradScaler("cpu", init_scale=1000.1, growth_factor=1.7,
/// backoff_factor=0.3, growth_interval=1)` over `loss = (p * p).sum()`
/// (`p = [1, 2]`, `SGD(lr=0.01)`), `+ p[0] * inf` at iterations 0, 3 and
/// 7, `update(0.1)` at iteration 5. PyTorch's scales after each update and
/// its final `p`. (Before its first `scale`, PyTorch's `get_scale()` is the
/// Python float 1000.1 itself, 0x1.f40cccccccccdp+9; strata's is rounded
/// to f32 from the start, the scale every step uses in both.)
#[test]
fn grad_scaler_scale_arithmetic_matches_pytorch() {
    const WANT: [&str; 8] = [
        "0x1.2c07ae0000000p+8",
        "0x1.fe0d0e0000000p+8",
        "0x1.b18b180000000p+9",
        "0x1.0420420000000p+8",
        "0x1.ba36d60000000p+8",
        "0x1.99999a0000000p-4",
        "0x1.5c28f60000000p-3",
        "0x1.a1cac00000000p-5",
    ];
    let p = Var::parameter(f32s(&[1.0, 2.0])).unwrap();
    let mut o = Sgd::new(vec![p.clone()], 0.01, 0.0).unwrap();
    let mut s = GradScaler::with_settings(1000.1, 1.7, 0.3, 1).unwrap();
    let mut got = Vec::new();
    for i in 0..8 {
        o.zero_grad(true).unwrap();
        let mut loss = p.mul(&p).unwrap().sum(None, false).unwrap();
        if [0, 3, 7].contains(&i) {
            let c = Var::new(f32s(&[f32::INFINITY, 0.0]));
            loss = loss
                .add(&p.mul(&c).unwrap().sum(None, false).unwrap())
                .unwrap();
        }
        s.scale(&loss).unwrap().backward().unwrap();
        s.step(&mut o).unwrap();
        if i == 5 {
            s.update_to(0.1).unwrap();
        } else {
            s.update().unwrap();
        }
        got.push(pyhex(s.get_scale()));
    }
    assert_eq!(got, WANT);
    // PyTorch's p: 0x1.ceceb6p-1, 0x1.ceceb6p+0.
    assert_eq!(hexes(p.data()), "0x1.ceceb60000000p-1,0x1.ceceb60000000p+0");
}

// ----- A PyTorch-made optimizer state -----

/// Loads `tests/data/resume_s52_{name}.safetensors` (written by
/// `tests/data/gen_resume_s52.py` from PyTorch 2.15: an optimizer's
/// `state_dict()` after 3 steps flattened to strata's names, the parameter
/// then, the gradients of 3 more steps, and PyTorch's parameter and state
/// after them), loads the state into a strata optimizer over the saved
/// parameter, steps it with the same gradients, and compares the
/// parameter and every state entry with PyTorch's bit for bit.
fn resume_from_pytorch(name: &str, make: impl Fn(Var) -> Box<dyn Optimizer>) {
    let path = format!(
        "{}/tests/data/resume_s52_{name}.safetensors",
        env!("CARGO_MANIFEST_DIR")
    );
    let all = strata_tensor::load_safetensors(&path, Device::Cpu).unwrap();
    let state: strata_autograd::optim::StateDict = all
        .iter()
        .filter(|(k, _)| !k.starts_with("x."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let p = Var::parameter(all["x.p"].deep_clone().unwrap()).unwrap();
    let mut opt = make(p.clone());
    opt.load_state_dict(&state).unwrap();
    for t in 3..6 {
        p.set_grad(Some(all[&format!("x.grad.{t}")].deep_clone().unwrap()))
            .unwrap();
        opt.step().unwrap();
    }
    assert_eq!(hexes(p.data()), hexes(&all["x.want.p"]), "{name}: p");
    let got = opt.state_dict().unwrap();
    for (k, want) in all.iter().filter(|(k, _)| k.starts_with("x.want.state.")) {
        let key = &k["x.want.".len()..];
        let g = &got[key];
        assert_eq!(
            (g.dtype(), g.shape()),
            (want.dtype(), want.shape()),
            "{name}: {key}"
        );
        assert_eq!(hexes(g), hexes(want), "{name}: {key}");
    }
}

#[test]
fn sgd_resumes_from_a_pytorch_state() {
    // Saved with lr 0.05, momentum 0.9, nesterov, weight_decay 0.01: the
    // fresh optimizer's own settings are replaced by the loaded ones.
    resume_from_pytorch("sgd", |p| Box::new(Sgd::new(vec![p], 1.0, 0.0).unwrap()));
}

#[test]
fn adam_resumes_from_a_pytorch_state() {
    // Saved with lr 0.01, betas (0.8, 0.95), eps 1e-7, amsgrad.
    resume_from_pytorch("adam", |p| Box::new(Adam::new(vec![p], 1.0).unwrap()));
}

#[test]
fn adamw_resumes_from_a_pytorch_state() {
    // Saved with lr 0.02, weight_decay 0.05 (PyTorch's other defaults).
    resume_from_pytorch("adamw", |p| {
        Box::new(strata_autograd::optim::AdamW::new(vec![p]))
    });
}
