//! Issue 13's training remedies: autocast, checkpointing, GradScaler, AdamW,
//! clip_grad_norm_ and the nn layers, each against a plain f32 run or a
//! hand-written reference.

use std::sync::Arc;
use strata_autograd::nn::{Linear, Module};
use strata_autograd::{
    autocast, checkpoint, checkpoint_blocks, clip_grad_norm_, AdamW, AutocastGuard, AutogradError,
    DeviceType, GradScaler, Optimizer, Sgd, Var,
};
use strata_tensor::generator::{manual_seed, next_seed};
use strata_tensor::{DType, Device, Tensor};

const DEV: Device = Device::Cpu;
/// The default generator is process-wide (as PyTorch's is) and the tests
/// run on several threads: every test here takes this lock, so one test's
/// seeds are not consumed by another's `Linear` initialisation.
fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, DType::F32, seed, DEV).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// ‖a - b‖ / ‖b‖.
fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-300)).sqrt()
}

/// Three layers with fixed weights (scaled for unit-size activations).
fn mlp(seed: u64) -> Vec<Arc<Linear>> {
    let dims = [16usize, 32, 32, 8];
    dims.windows(2)
        .enumerate()
        .map(|(i, w)| {
            let weight = randn(&[w[1], w[0]], seed + i as u64)
                .mul(1.0 / (w[0] as f64).sqrt())
                .unwrap();
            let bias = randn(&[w[1]], seed + 100 + i as u64).mul(0.1).unwrap();
            Arc::new(Linear::from_tensors(weight, Some(bias)).unwrap())
        })
        .collect()
}

fn block(l: &Linear, x: &Var) -> strata_autograd::Result<Var> {
    l.forward(x)?.relu()
}

fn params(layers: &[Arc<Linear>]) -> Vec<Var> {
    layers.iter().flat_map(|l| l.parameters()).collect()
}

fn grads(ps: &[Var]) -> Vec<Vec<f64>> {
    ps.iter()
        .map(|p| values(&p.grad().expect("a gradient")))
        .collect()
}

fn loss_of(layers: &[Arc<Linear>], x: &Var, every: usize) -> Var {
    let h = checkpoint_blocks(layers, every, x, block).unwrap();
    h.mul(&h).unwrap().mean(None, false).unwrap()
}

/// Under CPU autocast the linears run in bf16 and, as in PyTorch (whose CPU
/// autocast lists cast only matrix products and losses), the mean of their
/// bf16 output stays bf16 (on CUDA it runs in f32):
///
/// ```python
/// with torch.autocast("cpu", dtype=torch.bfloat16):
///     h = F.relu(F.linear(x, w, b))
///     (h * h).mean().dtype   # torch.bfloat16
/// ```
#[test]
fn autocast_runs_matmuls_in_bf16_and_gradients_match_f32() {
    let _rng = rng_lock();
    let layers = mlp(1);
    let ps = params(&layers);
    let x = Var::new(randn(&[64, 16], 9));
    loss_of(&layers, &x, 0).backward().unwrap();
    let reference = grads(&ps);
    ps.iter().for_each(|p| p.zero_grad(true).unwrap());

    let loss = autocast(DeviceType::Cpu, DType::BF16, || {
        let h1 = layers[0].forward(&x).unwrap();
        assert_eq!(h1.dtype(), DType::BF16, "linear runs in the low precision");
        let h = loss_of(&layers, &x, 0);
        // Three parameters' copies per use... each f32 parameter is cast once per region.
        assert_eq!(strata_autograd::autocast::autocast_cache_len(), ps.len());
        h
    })
    .unwrap();
    assert_eq!(
        loss.dtype(),
        DType::BF16,
        "mean keeps bf16 under CPU autocast"
    );
    assert_eq!(
        strata_autograd::autocast::autocast_cache_len(),
        0,
        "cache freed"
    );
    loss.backward().unwrap();
    for (p, (g, r)) in ps.iter().zip(grads(&ps).iter().zip(&reference)) {
        assert_eq!(p.grad().unwrap().dtype(), DType::F32);
        let e = rel_err(g, r);
        assert!(e < 3e-2, "bf16 gradient off by {e}");
        assert!(e > 0.0, "the bf16 run should not be bit-identical to f32");
    }
}

/// Found by the gradient oracle's autocast programs (session 43, second
/// round): PyTorch's CPU autocast casts only the matrix products (to bf16)
/// and the losses (to f32); softmax, log_softmax, layer_norm, sum, mean,
/// exp and log of a bf16 product stay bf16 there (CUDA's lists cast them
/// to f32, as strata's one table did on both). PyTorch 2.15:
///
/// ```python
/// x = torch.tensor([[1., 2.], [3., 5.]], requires_grad=True)
/// w = torch.tensor([[0.5, -1.], [2., 0.25]], requires_grad=True)
/// with torch.autocast("cpu", dtype=torch.bfloat16):
///     h = x @ w            # bf16 [[4.5, -0.5], [11.5, -1.75]]
///     s = h.softmax(-1)    # bf16 [[0.9921875, 0.006683349609375], [1.0, 1.7583370208740234e-06]]
///     h.sum()              # bf16 13.75
///     F.cross_entropy(h, torch.tensor([0, 1]))  # f32 6.628358840942383
///     # log_softmax, mean, exp, log, layer_norm: bf16
/// (s.float() * torch.tensor([[1., 2.], [3., 4.]])).sum().backward()
/// x.grad  # [[-0.0093994140625, -0.0093994140625], [-5.334615707397461e-06, -1.3887882232666016e-05]]
/// w.grad  # [[-0.00555419921875, 0.00665283203125], [-0.0111083984375, 0.0133056640625]]
/// ```
#[test]
fn cpu_autocast_casts_only_products_and_losses_as_pytorch() {
    let t = |v: &[f32]| Tensor::from_slice(v, &[2, 2], Device::Cpu).unwrap();
    let x = Var::parameter(t(&[1.0, 2.0, 3.0, 5.0])).unwrap();
    let w = Var::parameter(t(&[0.5, -1.0, 2.0, 0.25])).unwrap();
    let target = Tensor::from_slice(&[0i64, 1], &[2], Device::Cpu).unwrap();
    let s = autocast(DeviceType::Cpu, DType::BF16, || {
        let h = x.matmul(&w).unwrap();
        assert_eq!(h.dtype(), DType::BF16);
        assert_eq!(values(h.data()), vec![4.5, -0.5, 11.5, -1.75]);
        let bf16 = [
            h.log_softmax(-1, None).unwrap(),
            h.mean(None, false).unwrap(),
            h.exp().unwrap(),
            h.abs().unwrap().log().unwrap(),
            h.layer_norm(&[2], None, None, 1e-5).unwrap(),
        ];
        assert!(bf16.iter().all(|v| v.dtype() == DType::BF16));
        let sum = h.sum(None, false).unwrap();
        assert_eq!(
            (sum.dtype(), values(sum.data())),
            (DType::BF16, vec![13.75])
        );
        let ce = h
            .cross_entropy(&target, strata_tensor::CrossEntropyArgs::default())
            .unwrap();
        assert_eq!(ce.dtype(), DType::F32);
        assert!((values(ce.data())[0] - 6.628358840942383).abs() < 1e-6);
        let s = h.softmax(-1, None).unwrap();
        assert_eq!(s.dtype(), DType::BF16);
        s
    })
    .unwrap();
    let want = [0.9921875, 0.006683349609375, 1.0, 1.7583370208740234e-06];
    assert_eq!(values(s.data()), want);
    let c = Var::new(t(&[1.0, 2.0, 3.0, 4.0]));
    (s.to_dtype(DType::F32).unwrap().mul(&c).unwrap())
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let close = |got: Vec<f64>, want: &[f64]| {
        let ok = got
            .iter()
            .zip(want)
            .all(|(a, b)| (a - b).abs() <= 2f64.powi(-8) * b.abs() + 1e-12);
        assert!(ok, "{got:?} vs PyTorch's {want:?}");
    };
    let gx = [
        -0.0093994140625,
        -0.0093994140625,
        -5.334615707397461e-06,
        -1.3887882232666016e-05,
    ];
    close(values(&x.grad().unwrap()), &gx);
    let gw = [
        -0.00555419921875,
        0.00665283203125,
        -0.0111083984375,
        0.0133056640625,
    ];
    close(values(&w.grad().unwrap()), &gw);
}

#[test]
fn autocast_leaves_other_devices_f64_and_disabled_regions_alone() {
    let _rng = rng_lock();
    let w = Var::parameter(randn(&[4, 4], 3)).unwrap();
    let x64 = Var::new(Tensor::ones(&[2, 4], DType::F64, DEV).unwrap());
    let w64 = Var::new(w.data().to_dtype(DType::F64).unwrap());
    let _g = AutocastGuard::new(DeviceType::Cuda, DType::F16).unwrap();
    assert_eq!(
        w.matmul(&w).unwrap().dtype(),
        DType::F32,
        "CPU op under a CUDA region"
    );
    let _c = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
    assert_eq!(
        x64.matmul(&w64).unwrap().dtype(),
        DType::F64,
        "f64 is not cast"
    );
    assert_eq!(w.matmul(&w).unwrap().dtype(), DType::BF16);
    let _off = AutocastGuard::disabled();
    assert_eq!(w.matmul(&w).unwrap().dtype(), DType::F32);
}

#[test]
fn checkpointed_gradients_equal_plain_ones_for_every_k() {
    let _rng = rng_lock();
    let layers = mlp(11);
    let ps = params(&layers);
    let xp = Var::parameter(randn(&[32, 16], 5)).unwrap();
    loss_of(&layers, &xp, 0).backward().unwrap();
    let mut reference = grads(&ps);
    reference.push(values(&xp.grad().unwrap()));
    for every in [1, 2, 3] {
        ps.iter().for_each(|p| p.zero_grad(true).unwrap());
        xp.zero_grad(true).unwrap();
        let loss = loss_of(&layers, &xp, every);
        loss.backward().unwrap();
        let mut got = grads(&ps);
        got.push(values(&xp.grad().unwrap()));
        for (g, r) in got.iter().zip(&reference) {
            assert!(rel_err(g, r) < 1e-6, "every {every}: {}", rel_err(g, r));
        }
    }
}

#[test]
fn checkpoint_reaches_captured_parameters_when_no_input_requires_grad() {
    let _rng = rng_lock();
    let w = Var::parameter(Tensor::full(&[3], 2.0, DType::F32, DEV).unwrap()).unwrap();
    let x = Var::new(Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], DEV).unwrap());
    let w2 = w.clone();
    let y = checkpoint(move |xs| xs[0].mul(&w2)?.mul(&w2), &[x]).unwrap();
    assert!(y.requires_grad());
    y.sum(None, false).unwrap().backward().unwrap();
    // d/dw sum(x w²) = 2 x w
    assert_eq!(
        w.grad().unwrap().to_vec::<f32>().unwrap(),
        vec![4.0, 8.0, 12.0]
    );
}

#[test]
fn checkpoint_refuses_captured_non_leaves_and_checks_saved_inputs() {
    let _rng = rng_lock();
    let w = Var::parameter(Tensor::ones(&[3], DType::F32, DEV).unwrap()).unwrap();
    let h = w.mul(2.0).unwrap();
    let x = Var::new(Tensor::ones(&[3], DType::F32, DEV).unwrap());
    let err = checkpoint(move |xs| xs[0].mul(&h), &[x]).unwrap_err();
    assert!(matches!(err, AutogradError::Checkpoint { .. }), "{err}");

    let a = Var::parameter(Tensor::ones(&[3], DType::F32, DEV).unwrap()).unwrap();
    let b = a.mul(1.0).unwrap(); // a non-leaf input
    let y = checkpoint(|xs| xs[0].exp(), std::slice::from_ref(&b)).unwrap();
    strata_autograd::no_grad(|| b.data().add_(1.0).unwrap());
    let err = y.sum(None, false).unwrap().backward().unwrap_err();
    assert!(
        matches!(err, AutogradError::SavedTensorModified { .. }),
        "{err}"
    );
}

#[test]
fn checkpoint_replays_the_random_state_so_masks_match() {
    let _rng = rng_lock();
    manual_seed(123);
    let x = Var::parameter(Tensor::ones(&[256], DType::F32, DEV).unwrap()).unwrap();
    // A dropout-like function: a fresh mask from the default generator each call.
    let y = checkpoint(
        |xs| {
            let u = Tensor::rand(&[256], DType::F32, next_seed(), DEV)?;
            let mask = Var::new(u.gt(0.5)?.to_dtype(DType::F32)?);
            xs[0].mul(&mask)?.mul(2.0)
        },
        std::slice::from_ref(&x),
    )
    .unwrap();
    for _ in 0..5 {
        next_seed(); // the generator moves on before backward
    }
    let after = strata_tensor::generator::rng_state();
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(
        strata_tensor::generator::rng_state(),
        after,
        "state restored"
    );
    // The gradient is the forward's mask times 2, i.e. the forward's output.
    assert_eq!(values(&x.grad().unwrap()), values(y.data()));
    let kept = values(y.data()).iter().filter(|&&v| v != 0.0).count();
    assert!(kept > 64 && kept < 192, "a real mask: {kept}");
}

#[test]
fn checkpoint_composes_with_autocast_and_nesting() {
    let _rng = rng_lock();
    let layers = mlp(21);
    let ps = params(&layers);
    let x = Var::parameter(randn(&[16, 16], 6)).unwrap();
    let run = |every: usize, nested: bool| -> Vec<Vec<f64>> {
        ps.iter().for_each(|p| p.zero_grad(true).unwrap());
        x.zero_grad(true).unwrap();
        let loss = autocast(DeviceType::Cpu, DType::BF16, || {
            let h = if nested {
                let inner: Vec<Arc<Linear>> = layers.clone();
                checkpoint(
                    move |xs| checkpoint_blocks(&inner, 1, &xs[0], block),
                    std::slice::from_ref(&x),
                )
                .unwrap()
            } else {
                checkpoint_blocks(&layers, every, &x, block).unwrap()
            };
            h.mul(&h).unwrap().mean(None, false).unwrap()
        })
        .unwrap();
        loss.backward().unwrap();
        let mut g = grads(&ps);
        g.push(values(&x.grad().unwrap()));
        g
    };
    let plain = run(0, false);
    for (every, nested) in [(1, false), (2, false), (0, true)] {
        let got = run(every, nested);
        for (g, r) in got.iter().zip(&plain) {
            let e = rel_err(g, r);
            assert!(e < 1e-6, "every {every} nested {nested}: {e}");
        }
    }
}

#[test]
fn checkpoint_takes_views_as_inputs() {
    let _rng = rng_lock();
    let x = Var::parameter(randn(&[4, 6], 2)).unwrap();
    let v = x.narrow(1, 1, 3).unwrap().transpose(0, 1).unwrap();
    let y = checkpoint(|xs| xs[0].exp(), &[v]).unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    let g = values(&x.grad().unwrap());
    let xs = values(x.data());
    for r in 0..4 {
        for c in 0..6 {
            let want = if (1..4).contains(&c) {
                xs[r * 6 + c].exp()
            } else {
                0.0
            };
            assert!((g[r * 6 + c] - want).abs() < 1e-5 * want.abs().max(1.0));
        }
    }
}

#[test]
fn grad_scaler_skips_non_finite_steps_backs_off_and_grows() {
    let _rng = rng_lock();
    let p = Var::parameter(Tensor::ones(&[2], DType::F32, DEV).unwrap()).unwrap();
    let mut opt = Sgd::new(vec![p.clone()], 1.0, 0.0).unwrap();
    let mut s = GradScaler::with_settings(8.0, 2.0, 0.5, 3).unwrap();
    assert_eq!(GradScaler::new().get_scale(), 65536.0);
    // A non-finite gradient: skipped, parameter untouched, scale halved.
    p.set_grad(Some(
        Tensor::from_slice(&[1.0f32, f32::INFINITY], &[2], DEV).unwrap(),
    ))
    .unwrap();
    assert!(!s.step(&mut opt).unwrap());
    assert_eq!(p.to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    s.update().unwrap();
    assert_eq!(s.get_scale(), 4.0);
    p.set_grad(Some(
        Tensor::from_slice(&[f32::NAN, 0.0], &[2], DEV).unwrap(),
    ))
    .unwrap();
    assert!(!s.step(&mut opt).unwrap());
    s.update().unwrap();
    assert_eq!(s.get_scale(), 2.0);
    // Clean steps: gradients divided by the scale; growth after 3 of them.
    for i in 0..3 {
        p.set_grad(Some(Tensor::full(&[2], 2.0, DType::F32, DEV).unwrap()))
            .unwrap();
        s.unscale_(&opt).unwrap();
        assert_eq!(p.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
        assert!(s.unscale_(&opt).is_err(), "unscale_ twice in one iteration");
        assert!(s.step(&mut opt).unwrap());
        assert!(s.step(&mut opt).is_err(), "step twice in one iteration");
        s.update().unwrap();
        assert_eq!(s.growth_tracker(), (i + 1) % 3);
    }
    assert_eq!(s.get_scale(), 4.0);
    assert_eq!(p.to_vec::<f32>().unwrap(), vec![-2.0, -2.0]);
    assert!(GradScaler::with_settings(1.0, 0.5, 0.5, 1).is_err());
}

/// AdamW on f64 host vectors, as PyTorch's `_single_tensor_adamw`.
struct RefAdamW {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl RefAdamW {
    fn step(&mut self, p: &mut [f64], g: &[f64], (lr, b1, b2, eps, wd): (f64, f64, f64, f64, f64)) {
        self.t += 1;
        let (c1, c2) = (1.0 - b1.powi(self.t), 1.0 - b2.powi(self.t));
        for i in 0..p.len() {
            p[i] *= 1.0 - lr * wd;
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g[i];
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g[i] * g[i];
            let denom = self.v[i].sqrt() / c2.sqrt() + eps;
            p[i] -= lr / c1 * self.m[i] / denom;
        }
    }
}

#[test]
fn adamw_matches_a_hand_written_reference_including_skipped_parameters() {
    let _rng = rng_lock();
    let hp = (3e-2, 0.9, 0.95, 1e-8, 0.1);
    let shapes = [vec![3usize, 4], vec![5], vec![2, 2, 2]];
    let mut host: Vec<Vec<f64>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| values(&Tensor::randn(s, DType::F64, 40 + i as u64, DEV).unwrap()))
        .collect();
    let ps: Vec<Var> = shapes
        .iter()
        .zip(&host)
        .map(|(s, h)| Var::parameter(Tensor::from_slice(h, s, DEV).unwrap()).unwrap())
        .collect();
    let mut opt = AdamW::new(ps.clone())
        .with_lr(hp.0)
        .unwrap()
        .with_betas(hp.1, hp.2)
        .unwrap()
        .with_eps(hp.3)
        .unwrap()
        .with_weight_decay(hp.4)
        .unwrap();
    let mut refs: Vec<RefAdamW> = host
        .iter()
        .map(|h| RefAdamW {
            m: vec![0.0; h.len()],
            v: vec![0.0; h.len()],
            t: 0,
        })
        .collect();
    for step in 0..5u64 {
        for (i, (p, s)) in ps.iter().zip(&shapes).enumerate() {
            // Parameter 1 has no gradient at step 2 (the per-parameter path).
            if i == 1 && step == 2 {
                p.set_grad(None).unwrap();
                continue;
            }
            let g = Tensor::randn(s, DType::F64, 1000 + 10 * step + i as u64, DEV).unwrap();
            refs[i].step(&mut host[i], &values(&g), hp);
            p.set_grad(Some(g)).unwrap();
        }
        opt.step().unwrap();
        for (p, h) in ps.iter().zip(&host) {
            let got = values(p.data());
            for (a, b) in got.iter().zip(h) {
                assert!(
                    (a - b).abs() < 1e-12 * b.abs().max(1.0),
                    "step {step}: {a} vs {b}"
                );
            }
        }
    }
    assert_eq!(opt.state_bytes(), 2 * (12 + 5 + 8) * 8);
    assert!(AdamW::new(vec![]).with_lr(-1.0).is_err());
}

#[test]
fn clip_grad_norm_scales_only_above_the_limit() {
    let _rng = rng_lock();
    let a = Var::parameter(Tensor::zeros(&[2], DType::F32, DEV).unwrap()).unwrap();
    let b = Var::parameter(Tensor::zeros(&[1], DType::F32, DEV).unwrap()).unwrap();
    a.set_grad(Some(Tensor::from_slice(&[2.0f32, 4.0], &[2], DEV).unwrap()))
        .unwrap();
    b.set_grad(Some(Tensor::from_slice(&[4.0f32], &[1], DEV).unwrap()))
        .unwrap();
    let n = clip_grad_norm_(&[a.clone(), b.clone()], 12.0).unwrap();
    assert!((n.item::<f32>().unwrap() - 6.0).abs() < 1e-5);
    assert_eq!(a.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    let n = clip_grad_norm_(&[a.clone(), b.clone()], 3.0).unwrap();
    assert!((n.item::<f32>().unwrap() - 6.0).abs() < 1e-5);
    let g: Vec<f32> = a.grad().unwrap().to_vec().unwrap();
    assert!((g[0] - 1.0).abs() < 1e-5 && (g[1] - 2.0).abs() < 1e-5);
    // A negative max_norm flips and scales, as PyTorch's (session 45; it
    // was refused): a's norm is sqrt(5), the coefficient -1 / sqrt(5).
    let n = clip_grad_norm_(std::slice::from_ref(&a), -1.0).unwrap();
    assert!((n.item::<f32>().unwrap() - 5f32.sqrt()).abs() < 1e-5);
    let g: Vec<f32> = a.grad().unwrap().to_vec().unwrap();
    let r = 5f32.sqrt();
    assert!((g[0] + 1.0 / r).abs() < 1e-5 && (g[1] + 2.0 / r).abs() < 1e-5);
}

#[test]
fn linear_initialises_like_pytorch_and_moves_to_a_dtype() {
    let _rng = rng_lock();
    manual_seed(0);
    let mut lin = Linear::new(64, 32, true, DEV).unwrap();
    let bound = 1.0 / 8.0;
    let w = values(lin.weight.data());
    assert!(w.iter().all(|x| x.abs() <= bound));
    // Uniform(±b) has variance b²/3.
    let var: f64 = w.iter().map(|x| x * x).sum::<f64>() / w.len() as f64;
    assert!(
        (var - bound * bound / 3.0).abs() < 0.2 * bound * bound / 3.0,
        "{var}"
    );
    assert!(values(lin.bias.as_ref().unwrap().data())
        .iter()
        .all(|x| x.abs() <= bound));
    assert_eq!(lin.num_parameters(), 64 * 32 + 32);
    lin.eval();
    assert!(!lin.is_training());
    lin.to(DEV, Some(DType::BF16)).unwrap();
    assert!(lin
        .parameters()
        .iter()
        .all(|p| p.dtype() == DType::BF16 && p.requires_grad()));
    assert!(lin.to(DEV, Some(DType::I32)).is_err());
    assert!(lin.parameters().iter().all(|p| p.dtype() == DType::BF16));
    // PyTorch's nn.Linear(0, 3): an empty weight and a zero bias.
    let empty = Linear::new(0, 3, true, DEV).unwrap();
    assert_eq!(empty.weight.shape(), &[3, 0]);
    assert_eq!(values(empty.bias.as_ref().unwrap().data()), vec![0.0; 3]);
    let x = Var::new(Tensor::ones(&[2, 5], DType::BF16, DEV).unwrap());
    assert!(lin.forward(&x).is_err(), "wrong in_features");
}
