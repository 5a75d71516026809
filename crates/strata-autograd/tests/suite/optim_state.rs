//! Optimizer state saved and loaded (`Optimizer::state_dict`,
//! `Optimizer::load_state_dict`) and learning-rate schedules
//! (`optim::lr_scheduler`). Resuming from a saved state must continue
//! exactly as uninterrupted training; a refused state must change nothing;
//! the schedules' rates are PyTorch's closed forms, worked out by hand.

use std::collections::HashMap;
use strata_autograd::optim::lr_scheduler::{
    CosineAnnealingLr, ExponentialLr, LambdaLr, LinearLr, LrSchedule, LrScheduler, MultiStepLr,
    SequentialLr, StepLr,
};
use strata_autograd::optim::StateDict;
use strata_autograd::{Adam, AdamW, AutogradError, Optimizer, Sgd, Var};
use strata_tensor::{DType, Device, Tensor};

/// Parameters of two dtypes, the second without a gradient in the first
/// steps (so that it has no state when the first state is saved).
fn params() -> Vec<Var> {
    let a = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25], &[2, 2], Device::Cpu).unwrap();
    let b = Tensor::from_slice(&[1.5f64, -0.5], &[2], Device::Cpu).unwrap();
    let c = Tensor::from_slice(&[0.1f32, 0.2, 0.3], &[3], Device::Cpu).unwrap();
    [a, b, c]
        .into_iter()
        .map(|t| Var::parameter(t).unwrap())
        .collect()
}

/// Independent copies of `ps` (same values, fresh storage).
fn copies(ps: &[Var]) -> Vec<Var> {
    ps.iter()
        .map(|p| Var::parameter(p.data().deep_clone().unwrap()).unwrap())
        .collect()
}

/// One step: a loss over the parameters (all but the second before step 3).
fn train_step(opt: &mut dyn Optimizer, t: usize) {
    opt.zero_grad(true).unwrap();
    let ps = opt.params().to_vec();
    let mut loss = ps[0].mul(&ps[0]).unwrap().sum(None, false).unwrap();
    loss = loss
        .add(
            &ps[2]
                .exp()
                .unwrap()
                .sum(None, false)
                .unwrap()
                .mul((t + 1) as f64)
                .unwrap(),
        )
        .unwrap();
    if t >= 3 {
        let b = ps[1].to_dtype(DType::F32).unwrap();
        loss = loss
            .add(&b.mul(&b).unwrap().sum(None, false).unwrap())
            .unwrap();
    }
    loss.backward().unwrap();
    opt.step().unwrap();
}

fn as_f64(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Training 6 steps equals training 2, saving (through a safetensors
/// file), loading into a fresh optimizer over copies of the parameters,
/// and training 4 more: bit for bit.
fn resumes_exactly(make: impl Fn(Vec<Var>) -> Box<dyn Optimizer>) {
    let mut whole = make(params());
    for t in 0..6 {
        train_step(whole.as_mut(), t);
    }
    let mut first = make(params());
    for t in 0..2 {
        train_step(first.as_mut(), t);
    }
    let saved = first.state_dict().unwrap();
    let dir = std::env::temp_dir().join(format!("strata-optim-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("state-{}.safetensors", saved.len()));
    strata_tensor::save_safetensors(&path, saved.iter()).unwrap();
    let loaded: StateDict = strata_tensor::load_safetensors(&path, Device::Cpu).unwrap();
    std::fs::remove_file(&path).ok();
    let mut second = make(copies(first.params()));
    second.load_state_dict(&loaded).unwrap();
    // Training on after the save does not change what was saved.
    train_step(first.as_mut(), 2);
    for (k, v) in &saved {
        assert_eq!(as_f64(v), as_f64(&loaded[k]), "{k}");
    }
    for t in 2..6 {
        train_step(second.as_mut(), t);
    }
    for (a, b) in whole.params().iter().zip(second.params()) {
        assert_eq!(as_f64(a.data()), as_f64(b.data()));
    }
}

#[test]
fn sgd_resumes_exactly_from_a_saved_state() {
    resumes_exactly(|ps| {
        Box::new(
            Sgd::new(ps, 0.05, 0.9)
                .unwrap()
                .with_weight_decay(0.01)
                .unwrap(),
        )
    });
}

#[test]
fn adam_resumes_exactly_from_a_saved_state() {
    resumes_exactly(|ps| {
        Box::new(
            Adam::new(ps, 0.01)
                .unwrap()
                .with_betas(0.8, 0.99)
                .unwrap()
                .with_eps(1e-6)
                .unwrap(),
        )
    });
}

#[test]
fn adamw_resumes_exactly_from_a_saved_state() {
    resumes_exactly(|ps| {
        Box::new(
            AdamW::new(ps)
                .with_lr(0.02)
                .unwrap()
                .with_weight_decay(0.1)
                .unwrap(),
        )
    });
}

#[test]
fn the_state_has_pytorchs_names_and_only_stepped_parameters() {
    let mut opt = AdamW::new(params()).with_lr(0.02).unwrap();
    train_step(&mut opt, 0);
    let d = opt.state_dict().unwrap();
    let mut keys: Vec<&str> = d.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "param_groups.0.betas",
            "param_groups.0.eps",
            "param_groups.0.lr",
            "param_groups.0.weight_decay",
            "state.0.exp_avg",
            "state.0.exp_avg_sq",
            "state.0.step",
            "state.2.exp_avg",
            "state.2.exp_avg_sq",
            "state.2.step",
        ]
    );
    assert_eq!(as_f64(&d["param_groups.0.lr"]), vec![0.02]);
    assert_eq!(as_f64(&d["param_groups.0.betas"]), vec![0.9, 0.999]);
    assert_eq!(d["state.0.step"].dtype(), DType::F32);
    assert_eq!(as_f64(&d["state.0.step"]), vec![1.0]);
    // After one step from zero moments, exp_avg = (1 - beta1) g, g = 2 p.
    let g: Vec<f64> = [0.5, -1.0, 2.0, 0.25]
        .iter()
        .map(|p| 0.1 * 2.0 * p)
        .collect();
    let m = as_f64(&d["state.0.exp_avg"]);
    assert!(m.iter().zip(&g).all(|(a, b)| (a - b).abs() < 1e-7), "{m:?}");
    assert_eq!(d["state.0.exp_avg"].shape(), &[2, 2]);
}

/// Every way a state can be unusable is refused with a message naming the
/// problem, and the optimizer stays as it was.
#[test]
fn a_refused_state_changes_nothing() {
    let mut opt = Adam::new(params(), 0.01).unwrap();
    train_step(&mut opt, 0);
    let good = opt.state_dict().unwrap();
    let edit = |f: &dyn Fn(&mut StateDict)| {
        let mut d = good.clone();
        f(&mut d);
        d
    };
    let f32s = |v: &[f32], shape: &[usize]| Tensor::from_slice(v, shape, Device::Cpu).unwrap();
    let cases: Vec<(StateDict, &str)> = vec![
        (
            edit(&|d| {
                d.insert("state.0.exp_avg".into(), f32s(&[1.0; 4], &[4]));
            }),
            "shape [4] but parameter 0 has shape [2, 2]",
        ),
        (
            edit(&|d| {
                d.insert("state.7.exp_avg".into(), f32s(&[1.0], &[1]));
            }),
            "a parameter this optimizer does not have",
        ),
        (
            edit(&|d| {
                d.insert("param_groups.0.momentum".into(), f32s(&[0.9], &[]));
            }),
            "`param_groups.0.momentum` is not part of a Adam state",
        ),
        (
            edit(&|d| {
                d.remove("state.2.exp_avg_sq");
            }),
            "parameter 2 has only part of its state",
        ),
        (
            edit(&|d| {
                d.remove("param_groups.0.lr");
            }),
            "no `param_groups.0.lr`",
        ),
        (
            edit(&|d| {
                d.insert("state.0.step".into(), f32s(&[1.5], &[]));
            }),
            "a step count is a whole number",
        ),
        (
            edit(&|d| {
                d.insert("param_groups.0.betas".into(), f32s(&[0.9], &[]));
            }),
            "expected 2 numbers",
        ),
        (
            edit(&|d| {
                let ints = Tensor::zeros(&[2, 2], DType::I64, Device::Cpu).unwrap();
                d.insert("state.0.exp_avg".into(), ints);
            }),
            "is a i64 tensor",
        ),
    ];
    for (bad, what) in cases {
        match opt.load_state_dict(&bad) {
            Err(AutogradError::Optimizer { msg, .. }) => {
                assert!(
                    msg.contains(what) && msg.contains("nothing was loaded"),
                    "{msg}"
                )
            }
            r => panic!("expected a refusal about {what}, got {:?}", r.map(|_| ())),
        }
    }
    let nan_lr = edit(&|d| {
        d.insert("param_groups.0.lr".into(), f32s(&[f32::NAN], &[]));
    });
    assert!(matches!(
        opt.load_state_dict(&nan_lr),
        Err(AutogradError::Hyperparameter { .. })
    ));
    let now = opt.state_dict().unwrap();
    assert_eq!(now.len(), good.len());
    for (k, v) in &good {
        assert_eq!(as_f64(v), as_f64(&now[k]), "{k}");
    }
    assert_eq!(opt.lr(), 0.01);
}

#[test]
fn a_state_is_converted_to_each_parameters_dtype() {
    let mut a = Sgd::new(params(), 0.1, 0.5).unwrap();
    train_step(&mut a, 4);
    let d: HashMap<String, Tensor> = a
        .state_dict()
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.to_dtype(DType::F64).unwrap()))
        .collect();
    let mut b = Sgd::new(copies(a.params()), 0.0, 0.0).unwrap();
    b.load_state_dict(&d).unwrap();
    assert_eq!(b.lr(), 0.1);
    let back = b.state_dict().unwrap();
    assert_eq!(back["state.0.momentum_buffer"].dtype(), DType::F32);
    assert_eq!(back["state.1.momentum_buffer"].dtype(), DType::F64);
}

/// The rates of epochs 0.. of `schedule` over a base rate of 1.
fn rates(schedule: &dyn LrSchedule, n: u64) -> Vec<f64> {
    (0..n).map(|e| schedule.lr_at(1.0, e)).collect()
}

fn assert_close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
    }
}

#[test]
fn schedules_give_pytorchs_closed_form_rates() {
    assert_close(
        &rates(&StepLr::new(2, 0.5).unwrap(), 6),
        &[1.0, 1.0, 0.5, 0.5, 0.25, 0.25],
    );
    assert_close(
        &rates(&MultiStepLr::new(vec![3, 1], 0.1).unwrap(), 5),
        &[1.0, 0.1, 0.1, 0.01, 0.01],
    );
    assert_close(
        &rates(&ExponentialLr::new(0.5).unwrap(), 3),
        &[1.0, 0.5, 0.25],
    );
    let c = (1.0 + std::f64::consts::FRAC_1_SQRT_2) / 2.0;
    assert_close(
        &rates(&CosineAnnealingLr::new(4, 0.0).unwrap(), 6),
        &[1.0, c, 0.5, 1.0 - c, 0.0, 1.0 - c],
    );
    assert_close(
        &rates(&CosineAnnealingLr::new(2, 0.2).unwrap(), 3),
        &[1.0, 0.6, 0.2],
    );
    assert_close(
        &rates(&LinearLr::new(0.25, 1.0, 3).unwrap(), 5),
        &[0.25, 0.5, 0.75, 1.0, 1.0],
    );
    let warm_then_decay = SequentialLr::new(
        LinearLr::new(0.5, 1.0, 2).unwrap(),
        2,
        ExponentialLr::new(0.5).unwrap(),
    );
    assert_close(&rates(&warm_then_decay, 4), &[0.5, 0.75, 1.0, 0.5]);
}

#[test]
fn a_scheduler_sets_the_rate_at_creation_and_at_each_step() {
    let mut opt = AdamW::new(params()).with_lr(0.4).unwrap();
    let mut s = LrScheduler::new(&mut opt, LinearLr::new(0.25, 1.0, 3).unwrap()).unwrap();
    assert!((opt.lr() - 0.1).abs() < 1e-15);
    for want in [0.2, 0.3, 0.4, 0.4] {
        train_step(&mut opt, 0);
        s.step(&mut opt).unwrap();
        assert!((opt.lr() - want).abs() < 1e-15, "{} vs {want}", opt.lr());
        assert_eq!(s.last_lr(), opt.lr());
    }
    assert_eq!(s.epoch(), 4);
    assert_eq!(s.base_lr(), 0.4);
    // Resumed at epoch 1 of a schedule over the same base.
    let mut other = Sgd::new(params(), 7.0, 0.0).unwrap();
    let r = LrScheduler::at_epoch(&mut other, StepLr::new(1, 0.5).unwrap(), 0.4, 1).unwrap();
    assert_eq!(other.lr(), 0.2);
    assert_eq!(r.epoch(), 1);
}

#[test]
fn a_rate_the_optimizer_refuses_stops_the_schedule_where_it_was() {
    let mut opt = Sgd::new(params(), 1.0, 0.0).unwrap();
    let mut s =
        LrScheduler::new(&mut opt, LambdaLr(|e| if e < 2 { 0.5 } else { f64::NAN })).unwrap();
    s.step(&mut opt).unwrap();
    assert!(matches!(
        s.step(&mut opt),
        Err(AutogradError::Hyperparameter { .. })
    ));
    assert_eq!(s.epoch(), 1);
    assert_eq!(opt.lr(), 0.5);
}

#[test]
fn schedules_refuse_unusable_parameters() {
    let refused = |r: Result<(), AutogradError>, name: &str| match r {
        Err(AutogradError::Hyperparameter { name: n, .. }) => assert_eq!(n, name),
        r => panic!("expected {name} refused, got {r:?}"),
    };
    refused(StepLr::new(0, 0.1).map(|_| ()), "step_size");
    refused(StepLr::new(1, f64::NAN).map(|_| ()), "gamma");
    refused(ExponentialLr::new(-0.5).map(|_| ()), "gamma");
    refused(
        MultiStepLr::new(vec![1], f64::INFINITY).map(|_| ()),
        "gamma",
    );
    refused(CosineAnnealingLr::new(0, 0.0).map(|_| ()), "T_max");
    refused(CosineAnnealingLr::new(3, -1.0).map(|_| ()), "eta_min");
    refused(LinearLr::new(0.0, 1.0, 3).map(|_| ()), "start_factor");
    refused(LinearLr::new(0.5, 1.5, 3).map(|_| ()), "end_factor");
    refused(LinearLr::new(0.5, 1.0, 0).map(|_| ()), "total_iters");
    // A cosine with an enormous period neither overflows nor loses the
    // start: epoch 0 is the base rate.
    let c = CosineAnnealingLr::new(u64::MAX, 0.0).unwrap();
    assert_eq!(c.lr_at(1.0, 0), 1.0);
    assert!(c.lr_at(1.0, u64::MAX).is_finite());
}

/// Found by the gradient oracle's training programs (session 43, second
/// round): PyTorch's SGD step (`grad.add(param, alpha=weight_decay)`,
/// `param.add_(buf, alpha=-lr)`) converts `alpha` to an f16/bf16
/// parameter's dtype (bf16 0.1 is 0.10009765625) and, in its vectorized
/// loop (every element but the last `numel % 32` on AVX2), rounds
/// `p + alpha * buf` once; strata multiplied by the exact rate and rounded
/// the product first, and now and then ended a weight one unit in the last
/// place away from PyTorch's. PyTorch 2.15 on an AVX2 CPU (32 elements: one
/// vectorized block, no scalar tail):
///
/// ```python
/// for dt in (torch.bfloat16, torch.float16):
///     p = torch.tensor(P0, dtype=dt, requires_grad=True)
///     opt = torch.optim.SGD([p], lr=0.1, momentum=0.5, weight_decay=0.1)
///     for g in G:
///         p.grad = torch.tensor(g, dtype=dt)
///         opt.step()
///     p.float().tolist()   # BF16, F16 below
/// ```
#[test]
fn sgd_on_half_precision_parameters_rounds_as_pytorch() {
    let p0 = [
        2.765625,
        0.77734375,
        -2.5625,
        -2.546875,
        3.03125,
        -0.40234375,
        -0.1962890625,
        -2.15625,
        0.5859375,
        -0.0284423828125,
        -2.03125,
        -1.09375,
        1.484375,
        -0.62890625,
        -0.87890625,
        -1.171875,
        4.15625,
        1.8359375,
        -0.50390625,
        -1.4453125,
        -0.1943359375,
        -0.90234375,
        0.2177734375,
        -0.224609375,
        -0.65625,
        1.171875,
        -0.08740234375,
        -3.046875,
        2.21875,
        0.7421875,
        0.373046875,
        2.625,
    ];
    let g0 = [
        -0.26171875,
        -0.73046875,
        1.6953125,
        -0.1787109375,
        1.921875,
        0.287109375,
        0.9375,
        -2.40625,
        -0.1474609375,
        0.8984375,
        0.546875,
        -1.640625,
        -1.8125,
        -0.20703125,
        -0.52734375,
        -1.6953125,
        0.81640625,
        0.41015625,
        0.2158203125,
        1.0859375,
        0.1728515625,
        0.1669921875,
        -1.140625,
        -0.8203125,
        -1.7890625,
        0.87890625,
        2.171875,
        -0.185546875,
        0.9921875,
        0.7421875,
        1.2734375,
        1.3203125,
    ];
    let g1 = [
        -0.51953125,
        1.5625,
        1.234375,
        1.5,
        0.47265625,
        0.60546875,
        -0.87890625,
        -0.7421875,
        0.283203125,
        -1.5,
        -0.30859375,
        -0.60546875,
        -1.96875,
        -0.13671875,
        1.8671875,
        0.150390625,
        -0.81640625,
        -0.384765625,
        0.40234375,
        -1.4375,
        -0.07275390625,
        -0.546875,
        0.48828125,
        -0.65234375,
        -0.36328125,
        1.046875,
        0.99609375,
        0.92578125,
        1.921875,
        -0.04736328125,
        0.51953125,
        0.65234375,
    ];
    let bf16 = [
        2.796875,
        0.7109375,
        -2.875,
        -2.609375,
        2.625,
        -0.49609375,
        -0.244140625,
        -1.6640625,
        0.5625,
        -0.01104736328125,
        -2.03125,
        -0.76171875,
        1.9140625,
        -0.56640625,
        -0.96484375,
        -0.90625,
        4.0,
        1.765625,
        -0.5625,
        -1.4296875,
        -0.2080078125,
        -0.8515625,
        0.333984375,
        -0.0311279296875,
        -0.337890625,
        0.90625,
        -0.5078125,
        -3.03125,
        1.8203125,
        0.6171875,
        0.12060546875,
        2.296875,
    ];
    let f16 = [
        2.787109375,
        0.7109375,
        -2.875,
        -2.607421875,
        2.623046875,
        -0.49560546875,
        -0.2431640625,
        -1.669921875,
        0.56494140625,
        -0.01155853271484375,
        -2.03125,
        -0.76171875,
        1.9140625,
        -0.56884765625,
        -0.96533203125,
        -0.9052734375,
        4.01171875,
        1.767578125,
        -0.56396484375,
        -1.4267578125,
        -0.2080078125,
        -0.85009765625,
        0.33349609375,
        -0.0316162109375,
        -0.337158203125,
        0.9072265625,
        -0.50830078125,
        -3.03515625,
        1.82421875,
        0.6181640625,
        0.1221923828125,
        2.296875,
    ];
    let t = |v: &[f64], dt| {
        Tensor::from_slice(v, &[v.len()], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
    };
    for (dt, want) in [(DType::BF16, bf16), (DType::F16, f16)] {
        let p = Var::parameter(t(&p0, dt)).unwrap();
        let mut opt = Sgd::new(vec![p.clone()], 0.1, 0.5)
            .unwrap()
            .with_weight_decay(0.1)
            .unwrap();
        for g in [&g0, &g1] {
            p.set_grad(Some(t(g, dt))).unwrap();
            opt.step().unwrap();
        }
        assert_eq!(p.dtype(), dt);
        assert_eq!(as_f64(p.data()), want, "{dt}");
    }
}

/// Found by the gradient oracle's training programs (session 43, second
/// round): Adam and AdamW update as PyTorch's fused CPU kernel
/// (`fused=True`), bit for bit: its `m + (1-b1)(g - m)` (for b1 > 0.5,
/// `g + (-b1)(g - m)`) and `v b2 + ((1-b2) g) g` each rounded once (fused
/// multiply-adds), and `p - (lr' m) / denom`. strata's kernel rounded
/// `m + (1-b1)(g - m)` twice, formed `(1-b2)(g g)` and `lr' (m / denom)`,
/// and a third of the weights ended one unit in the last place away, which
/// a cancellation (a weight Adam moves to about 0) made large. PyTorch 2.15:
///
/// ```python
/// p0 = [-0.00927734375, -0.00188446044921875, 0.40625, 1.6328125,
///       -4.15625, 3.296875, 0.6171875, 0.033935546875]
/// gs = [[-0.4921875, -1.15625, -0.7421875, -1.65625, -0.2138671875, 1.8125, -0.66015625, 1.34375],
///       [0.47265625, -1.6015625, -1.6953125, 0.83203125, 1.75, -0.54296875, -0.42578125, 1.40625],
///       [-2.21875, -1.234375, -0.1474609375, 0.27734375, -0.486328125, 0.1572265625, 0.7734375, -1.640625]]
/// for opt in (lambda ps: torch.optim.Adam(ps, lr=0.1, fused=True),
///             lambda ps: torch.optim.AdamW(ps, lr=0.05, betas=(0.5, 0.9), eps=1e-6,
///                                          weight_decay=0.1, fused=True)):
///     p = torch.tensor(p0, requires_grad=True); o = opt([p])
///     for g in gs:
///         p.grad = torch.tensor(g); o.step()
///     p.tolist()
/// ```
#[test]
fn adam_and_adamw_steps_are_pytorchs_fused_cpu_steps_bit_for_bit() {
    let p0 = [
        -0.00927734375,
        -0.00188446044921875,
        0.40625,
        1.6328125,
        -4.15625,
        3.296875,
        0.6171875,
        0.033935546875,
    ];
    let grads = [
        [
            -0.4921875,
            -1.15625,
            -0.7421875,
            -1.65625,
            -0.2138671875,
            1.8125,
            -0.66015625,
            1.34375,
        ],
        [
            0.47265625,
            -1.6015625,
            -1.6953125,
            0.83203125,
            1.75,
            -0.54296875,
            -0.42578125,
            1.40625,
        ],
        [
            -2.21875,
            -1.234375,
            -0.1474609375,
            0.27734375,
            -0.486328125,
            0.1572265625,
            0.7734375,
            -1.640625,
        ],
    ];
    let adam = [
        0.1478119045495987,
        0.2967851758003235,
        0.6795894503593445,
        1.770024061203003,
        -4.153981685638428,
        3.1157727241516113,
        0.8222128748893738,
        -0.18407562375068665,
    ];
    let adamw = [
        0.0677068680524826,
        0.14828795194625854,
        0.5329236388206482,
        1.6501582860946655,
        -4.096412658691406,
        3.1796791553497314,
        0.6854846477508545,
        -0.054511185735464096,
    ];
    let t = |v: &[f64]| {
        Tensor::from_slice(v, &[v.len()], Device::Cpu)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
    };
    type Make = fn(Var) -> Box<dyn Optimizer>;
    let make: [(&str, Make, [f64; 8]); 2] = [
        ("Adam", |p| Box::new(Adam::new(vec![p], 0.1).unwrap()), adam),
        (
            "AdamW",
            |p| {
                Box::new(
                    AdamW::new(vec![p])
                        .with_lr(0.05)
                        .and_then(|o| o.with_betas(0.5, 0.9))
                        .and_then(|o| o.with_eps(1e-6))
                        .and_then(|o| o.with_weight_decay(0.1))
                        .unwrap(),
                )
            },
            adamw,
        ),
    ];
    for (name, make, want) in make {
        let p = Var::parameter(t(&p0)).unwrap();
        let mut opt = make(p.clone());
        for g in &grads {
            p.set_grad(Some(t(g))).unwrap();
            opt.step().unwrap();
        }
        assert_eq!(as_f64(p.data()), want, "{name}");
    }
}
