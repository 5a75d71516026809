//! Autograd on the GPU against the CPU. Every test here needs a CUDA GPU and
//! is `#[ignore]`d with the reason, so a machine without one lists it as
//! ignored; on a GPU machine run
//! `cargo test --release -p strata-autograd --test cuda -- --include-ignored`.
//! New tests are appended at the end of this file.

use strata_autograd::{autocast, AttentionArgs, AttentionSaving, DeviceType, Var};
use strata_tensor::{cuda, DType, Device, Tensor};

const GPU: Device = Device::Cuda(0);

fn gpu() -> Device {
    assert!(
        strata_tensor::has_backend(GPU),
        "this test needs a CUDA GPU and none is usable: {}",
        cuda::unavailable_reason().unwrap_or_else(|| "no CUDA backend".into())
    );
    GPU
}

/// ‖a - b‖ / ‖b‖ over all elements, in f64.
fn rel_err(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let v = |t: &Tensor| -> Vec<f64> {
        t.to(Device::Cpu)
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    };
    let (a, b) = (v(a), v(b));
    let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den.max(1e-300)).sqrt()
}

/// Output and qkv gradient of the causal attention core on q/k/v views of a
/// `[b, t, 3 h hd]` projection (as the GPT makes them), loss `sum(y * w)`.
fn attention_run(
    qkv0: &Tensor,
    w: &Tensor,
    h: usize,
    saving: AttentionSaving,
    autocast_bf16: bool,
) -> (Tensor, Tensor) {
    let (b, t, d3) = (qkv0.shape()[0], qkv0.shape()[1], qkv0.shape()[2]);
    let d = d3 / 3;
    let qkv = Var::parameter(qkv0.deep_clone().unwrap()).unwrap();
    let parts = qkv.split(d as i64, 2).unwrap();
    let heads = |z: &Var| {
        z.reshape(&[b as i64, t as i64, h as i64, (d / h) as i64])
            .unwrap()
            .transpose(1, 2)
            .unwrap()
    };
    let (q, k, v) = (heads(&parts[0]), heads(&parts[1]), heads(&parts[2]));
    let args = AttentionArgs {
        scale: Some(1.0 / ((d / h) as f64).sqrt()),
        causal: true,
        saving,
    };
    let y = if autocast_bf16 {
        autocast(DeviceType::of(qkv0.device()), DType::BF16, || {
            q.attention(&k, &v, args)
        })
        .unwrap()
        .unwrap()
    } else {
        q.attention(&k, &v, args).unwrap()
    };
    let w = Var::new(w.to_dtype(y.dtype()).unwrap());
    y.mul(&w)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    (y.data().clone(), qkv.grad().unwrap())
}

/// The fused attention core (scale and causal mask fused into the softmax,
/// probabilities recomputed or kept) on the GPU against the CPU: f32 and
/// f64 at GPT-like sizes (rows of 1024 and of odd length), and under
/// autocast bf16 against the f64 truth.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn attention_core_matches_cpu() {
    let dev = gpu();
    for (b, h, t, hd, seed) in [(2, 4, 1024, 64, 1u64), (1, 3, 333, 16, 2), (2, 2, 7, 8, 3)] {
        let qkv0 = Tensor::randn(&[b, t, 3 * h * hd], DType::F64, seed, Device::Cpu).unwrap();
        let w = Tensor::randn(&[b, h, t, hd], DType::F64, seed + 10, Device::Cpu).unwrap();
        let (y64, g64) = attention_run(&qkv0, &w, h, AttentionSaving::Recompute, false);
        for saving in [AttentionSaving::Recompute, AttentionSaving::SaveProbs] {
            for dtype in [DType::F64, DType::F32] {
                let (y, g) = attention_run(
                    &qkv0.to_dtype(dtype).unwrap().to(dev).unwrap(),
                    &w.to(dev).unwrap(),
                    h,
                    saving,
                    false,
                );
                let tol = if dtype == DType::F64 { 1e-12 } else { 1e-5 };
                let what = format!("[{b}, {h}, {t}, {hd}] {saving:?} {dtype}");
                assert!(
                    rel_err(&y, &y64) < tol,
                    "{what} output {}",
                    rel_err(&y, &y64)
                );
                assert!(
                    rel_err(&g, &g64) < tol,
                    "{what} gradient {}",
                    rel_err(&g, &g64)
                );
            }
            let (y, g) = attention_run(
                &qkv0.to_dtype(DType::F32).unwrap().to(dev).unwrap(),
                &w.to(dev).unwrap(),
                h,
                saving,
                true,
            );
            assert_eq!(y.dtype(), DType::BF16);
            let what = format!("[{b}, {h}, {t}, {hd}] {saving:?} autocast bf16");
            assert!(
                rel_err(&y, &y64) < 2e-2,
                "{what} output {}",
                rel_err(&y, &y64)
            );
            assert!(
                rel_err(&g, &g64) < 4e-2,
                "{what} gradient {}",
                rel_err(&g, &g64)
            );
        }
    }
}

/// Session 30's autograd changes on the GPU against the CPU: cross_entropy
/// with probability targets (f32 logits with f64 targets give an f64 loss
/// and an f32 gradient; label smoothing and mean reduction), and the var/std
/// gradients, with a correction below and beyond the count.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn probability_cross_entropy_and_var_std_gradients_match_cpu() {
    use strata_tensor::{CrossEntropyArgs, Reduction};
    let dev = gpu();
    let logits = Tensor::randn(&[6, 11], DType::F32, 31, Device::Cpu).unwrap();
    let raw = Tensor::rand(&[6, 11], DType::F64, 32, Device::Cpu).unwrap();
    let targets = raw.div(&raw.sum(Some(&[1]), true).unwrap()).unwrap();
    let run = |d: Device| {
        let x = Var::parameter(logits.to(d).unwrap()).unwrap();
        let args = CrossEntropyArgs {
            label_smoothing: 0.1,
            reduction: Reduction::Mean,
            ..Default::default()
        };
        let loss = x.cross_entropy(&targets.to(d).unwrap(), args).unwrap();
        assert_eq!(loss.dtype(), DType::F64, "f32 logits, f64 targets");
        loss.backward().unwrap();
        let g = x.grad().unwrap();
        assert_eq!(g.dtype(), DType::F32);
        (loss.data().clone(), g)
    };
    let (lc, gc) = run(Device::Cpu);
    let (lg, gg) = run(dev);
    assert!(rel_err(&lg, &lc) < 1e-6, "loss {}", rel_err(&lg, &lc));
    assert!(rel_err(&gg, &gc) < 1e-5, "grad {}", rel_err(&gg, &gc));

    let x0 = Tensor::randn(&[5, 7], DType::F32, 33, Device::Cpu).unwrap();
    for correction in [0.0, 1.0, 9.0] {
        for std in [false, true] {
            let run = |d: Device| {
                let x = Var::parameter(x0.to(d).unwrap()).unwrap();
                let y = if std {
                    x.std(Some(&[1]), correction, false).unwrap()
                } else {
                    x.var(Some(&[1]), correction, false).unwrap()
                };
                y.sum(None, false).unwrap().backward().unwrap();
                (y.data().clone(), x.grad().unwrap())
            };
            let (yc, gc) = run(Device::Cpu);
            let (yg, gg) = run(dev);
            let what = format!("std={std} correction={correction}");
            if correction >= 7.0 {
                // Divided by max(0, N - correction) = 0: +inf on both.
                let inf = |t: &Tensor| {
                    let v = t.to(Device::Cpu).unwrap().to_dtype(DType::F64).unwrap();
                    v.to_vec::<f64>()
                        .unwrap()
                        .iter()
                        .all(|&e| e == f64::INFINITY)
                };
                assert!(inf(&yc) && inf(&yg), "{what}: value");
            } else {
                assert!(rel_err(&yg, &yc) < 1e-5, "{what}: value");
            }
            assert!(rel_err(&gg, &gc) < 1e-5, "{what}: grad");
        }
    }
}

/// `max()`/`min()` of every element on the GPU back-propagate with
/// PyTorch's CUDA formula (`evenly_distribute_backward`'s CUDA branch,
/// FunctionsManual.cpp: `mask = (input == value) | (isnan(input) &
/// isnan(value)); mask * (grad / mask.sum())`), not the CPU one
/// (`zeros.masked_fill_(mask, grad / mask.sum())`). They differ only where
/// the upstream gradient is NaN or infinite: off the mask the CUDA branch
/// gives `0 * (g / count)`, NaN. Expected values (PyTorch 2.15 on a CUDA
/// device, derived from that formula; the CPU gives 0 off the mask):
///
/// ```python
/// x = torch.tensor([3., 1., 3., 2.], device="cuda", requires_grad=True)
/// (x.max() * nan).backward()   # x.grad: [nan, nan, nan, nan]
/// x.grad = None
/// (x.max() * inf).backward()   # x.grad: [inf, nan, inf, nan]
/// x.grad = None
/// (x.min() * -inf).backward()  # x.grad: [nan, -inf, nan, nan]
/// x.grad = None
/// (x.max() * 2.).backward()    # x.grad: [1., 0., 1., 0.] (finite: as the CPU)
/// y = torch.tensor([1., nan, 4., nan], device="cuda", requires_grad=True)
/// y.max().backward()           # y.grad: [0., .5, 0., .5] (split among the NaNs)
/// y.grad = None
/// (y.min() * inf).backward()   # y.grad: [nan, inf, nan, inf]
/// ```
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn max_min_of_every_element_back_propagate_with_pytorchs_cuda_formula() {
    let dev = gpu();
    let n = f32::NAN;
    let inf = f32::INFINITY;
    let grad = |x: &[f32], max: bool, up: f32| -> Vec<f32> {
        let v = Var::parameter(
            Tensor::from_slice(x, &[x.len()], Device::Cpu)
                .unwrap()
                .to(dev)
                .unwrap(),
        )
        .unwrap();
        let r = if max { v.max() } else { v.min() }.unwrap();
        r.mul(up).unwrap().backward().unwrap();
        v.grad()
            .unwrap()
            .to(Device::Cpu)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    let same = |got: Vec<f32>, want: &[f32], what: &str| {
        let ok = got.len() == want.len()
            && got
                .iter()
                .zip(want)
                .all(|(a, b)| (a.is_nan() && b.is_nan()) || a == b);
        assert!(ok, "{what}: got {got:?}, PyTorch (CUDA) {want:?}");
    };
    let x = [3.0f32, 1.0, 3.0, 2.0];
    same(grad(&x, true, n), &[n, n, n, n], "max * nan");
    same(grad(&x, true, inf), &[inf, n, inf, n], "max * inf");
    same(grad(&x, false, -inf), &[n, -inf, n, n], "min * -inf");
    same(grad(&x, true, 2.0), &[1.0, 0.0, 1.0, 0.0], "max * 2");
    let y = [1.0f32, n, 4.0, n];
    same(grad(&y, true, 1.0), &[0.0, 0.5, 0.0, 0.5], "max of NaNs");
    same(grad(&y, false, inf), &[n, inf, n, inf], "min of NaNs * inf");
}

/// Attention with an empty embedding dim (`E = 0`, session 40): every score
/// is an empty sum, 0 whatever the scale (the default 1/sqrt(0) and an
/// infinite one included), so each output row is the mean of the values it
/// may attend to, as PyTorch's `scaled_dot_product_attention` gives; on the
/// GPU as on the CPU, with the values' gradient `sum_i p_ij w_i`.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn attention_with_an_empty_embedding_dim_averages_the_values() {
    let dev = gpu();
    let (b, l, s, ev) = (2usize, 3usize, 4usize, 5usize);
    let v0 = Tensor::randn(&[b, s, ev], DType::F64, 40, Device::Cpu).unwrap();
    let w0 = Tensor::randn(&[b, l, ev], DType::F64, 41, Device::Cpu).unwrap();
    let vals = v0.to_vec::<f64>().unwrap();
    let ws = w0.to_vec::<f64>().unwrap();
    for causal in [false, true] {
        // Row i attends to keys 0..=i when causal (PyTorch's top-left
        // mask), to all S keys otherwise.
        let keys = |i: usize| if causal { i + 1 } else { s };
        let mut want_y = vec![0.0; b * l * ev];
        let mut want_gv = vec![0.0; b * s * ev];
        for n in 0..b {
            for i in 0..l {
                let k = keys(i);
                for j in 0..k {
                    for c in 0..ev {
                        want_y[(n * l + i) * ev + c] += vals[(n * s + j) * ev + c] / k as f64;
                        want_gv[(n * s + j) * ev + c] += ws[(n * l + i) * ev + c] / k as f64;
                    }
                }
            }
        }
        for scale in [None, Some(f64::INFINITY)] {
            for dtype in [DType::F64, DType::F32] {
                let on = |t: &Tensor| t.to_dtype(dtype).unwrap().to(dev).unwrap();
                let q = Var::new(on(
                    &Tensor::zeros(&[b, l, 0], DType::F64, Device::Cpu).unwrap()
                ));
                let k = Var::new(on(
                    &Tensor::zeros(&[b, s, 0], DType::F64, Device::Cpu).unwrap()
                ));
                let v = Var::parameter(on(&v0)).unwrap();
                let args = AttentionArgs {
                    scale,
                    causal,
                    saving: AttentionSaving::Recompute,
                };
                let y = q.attention(&k, &v, args).unwrap();
                assert_eq!(y.shape(), &[b, l, ev]);
                y.mul(&Var::new(on(&w0)))
                    .unwrap()
                    .sum(None, false)
                    .unwrap()
                    .backward()
                    .unwrap();
                let want =
                    |x: &[f64], shape: &[usize]| Tensor::from_slice(x, shape, Device::Cpu).unwrap();
                let tol = if dtype == DType::F64 { 1e-12 } else { 1e-6 };
                let what = format!("causal {causal} scale {scale:?} {dtype}");
                let ey = rel_err(y.data(), &want(&want_y, &[b, l, ev]));
                assert!(ey < tol, "{what} output {ey}");
                let eg = rel_err(&v.grad().unwrap(), &want(&want_gv, &[b, s, ev]));
                assert!(eg < tol, "{what} value gradient {eg}");
            }
        }
    }
}

/// `grad`, a gradient hook, `retain_grad` and an optimizer state saved on
/// the GPU and loaded into an optimizer over CPU parameters: the same
/// gradients and the same state as on the CPU.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn grad_hooks_and_optimizer_state_work_on_the_gpu() {
    use strata_autograd::{grad, AdamW, Optimizer};
    let dev = gpu();
    let x0 = Tensor::randn(&[4, 3], DType::F32, 50, Device::Cpu).unwrap();
    let run = |device: Device| {
        let x = Var::parameter(x0.to(device).unwrap()).unwrap();
        let y = x.mul(&x).unwrap().tanh().unwrap();
        y.retain_grad().unwrap();
        y.register_hook(|g| Ok(Some(g.mul(3.0)?))).unwrap();
        let loss = y.sum(None, false).unwrap();
        let g = grad(&[&loss], &[&x]).unwrap().remove(0);
        assert!(x.grad().is_none());
        let yg = y.grad().unwrap();
        (g.to(Device::Cpu).unwrap(), yg.to(Device::Cpu).unwrap(), x)
    };
    let (g_gpu, y_gpu, x_gpu) = run(dev);
    let (g_cpu, y_cpu, _) = run(Device::Cpu);
    assert!(rel_err(&g_gpu, &g_cpu) < 1e-5);
    assert_eq!(y_gpu.to_vec::<f32>().unwrap(), vec![3.0; 12]);
    assert_eq!(y_cpu.to_vec::<f32>().unwrap(), vec![3.0; 12]);

    let mut opt = AdamW::new(vec![x_gpu.clone()]);
    x_gpu.set_grad(Some(g_gpu.to(dev).unwrap())).unwrap();
    opt.step().unwrap();
    let saved = opt.state_dict().unwrap();
    assert_eq!(saved["state.0.exp_avg"].device(), dev);
    let x_cpu = Var::parameter(x_gpu.data().to(Device::Cpu).unwrap()).unwrap();
    let mut cpu_opt = AdamW::new(vec![x_cpu]);
    cpu_opt.load_state_dict(&saved).unwrap();
    let back = cpu_opt.state_dict().unwrap();
    assert_eq!(back["state.0.exp_avg"].device(), Device::Cpu);
    assert_eq!(
        back["state.0.exp_avg_sq"].to_vec::<f32>().unwrap(),
        saved["state.0.exp_avg_sq"]
            .to(Device::Cpu)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    );
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn an_in_place_op_on_a_view_rebases_its_base_as_on_the_cpu() {
    // y = x.sin().reshape(3, 4); v = y.t().narrow(0, 1, 2) (a strided view
    // of a view); v.mul_(b) with b broadcast; e = y.narrow(1, 0, 2) taken
    // before the op (its history regenerated); loss through y, v and e:
    // gradients of x and b as on the CPU (session 42, CopySlices).
    let run = |dev: Device| -> Vec<Tensor> {
        let x0 = Tensor::rand(&[12], DType::F32, 7, Device::Cpu).unwrap();
        let b0 = Tensor::rand(&[2, 1], DType::F32, 8, Device::Cpu).unwrap();
        let x = Var::parameter(x0.to(dev).unwrap()).unwrap();
        let b = Var::parameter(b0.to(dev).unwrap()).unwrap();
        let y = x.sin().unwrap().reshape(&[3, 4]).unwrap();
        let e = y.narrow(1, 0, 2).unwrap();
        let v = y.t().unwrap().narrow(0, 1, 2).unwrap();
        v.mul_(&b).unwrap();
        // y is itself a view (of the sin output, the root that takes the
        // CopySlices node), so its history is regenerated from the root's,
        // as PyTorch's `y.grad_fn` is then `AsStridedBackward0`.
        assert_eq!(y.grad_fn_name(), Some("AsStridedBackward"));
        let loss = y
            .mul(&y)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .add(&v.mul(3.0).unwrap().sum(None, false).unwrap())
            .unwrap()
            .add(&e.exp().unwrap().sum(None, false).unwrap())
            .unwrap();
        loss.backward().unwrap();
        vec![x.grad().unwrap(), b.grad().unwrap(), y.data().clone()]
    };
    let cpu = run(Device::Cpu);
    let on_gpu = run(gpu());
    for (what, (g, c)) in ["x.grad", "b.grad", "y"]
        .iter()
        .zip(on_gpu.iter().zip(&cpu))
    {
        assert_eq!(g.device(), GPU, "{what}");
        let err = rel_err(g, c);
        assert!(err < 1e-5, "{what}: relative error {err}");
    }
}

/// Session 44's optimizer options on the GPU against the CPU, in f32, f64,
/// f16 and bf16: SGD with dampening, with Nesterov momentum and maximize
/// and weight decay; Adam and AdamW with AMSGrad and maximize (the fused
/// CUDA kernel's fifth operand, through the list step of two parameters);
/// four steps with shrinking gradients (so that AMSGrad's maximum
/// matters). The parameters and every state tensor agree within the
/// dtype's rounding (the CUDA kernel matches the CPU within a tolerance,
/// not bit for bit: its compiler contracts other products into
/// multiply-adds).
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn optimizer_options_match_cpu_on_the_gpu() {
    use strata_autograd::{Adam, AdamW, Optimizer, Sgd};
    let dev = gpu();
    type Make = fn(Vec<Var>) -> Box<dyn Optimizer>;
    let makes: [(&str, Make); 4] = [
        ("SGD dampening", |ps| {
            Box::new(Sgd::new(ps, 0.1, 0.9).unwrap().with_dampening(0.3).unwrap())
        }),
        ("SGD nesterov maximize", |ps| {
            Box::new(
                Sgd::new(ps, 0.1, 0.9)
                    .and_then(|o| o.with_weight_decay(0.1))
                    .and_then(|o| o.with_nesterov(true))
                    .unwrap()
                    .with_maximize(true),
            )
        }),
        ("Adam amsgrad maximize", |ps| {
            Box::new(
                Adam::new(ps, 0.01)
                    .unwrap()
                    .with_amsgrad(true)
                    .unwrap()
                    .with_maximize(true),
            )
        }),
        ("AdamW amsgrad maximize", |ps| {
            Box::new(
                AdamW::new(ps)
                    .with_betas(0.4, 0.9)
                    .and_then(|o| o.with_amsgrad(true))
                    .unwrap()
                    .with_maximize(true),
            )
        }),
    ];
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let tol = match dtype {
            DType::F64 => 1e-12,
            DType::F32 => 1e-5,
            DType::F16 => 5e-3,
            _ => 3e-2,
        };
        for (name, make) in makes {
            let inits = [
                Tensor::randn(&[4099], dtype, 60, Device::Cpu).unwrap(),
                Tensor::randn(&[33, 7], dtype, 61, Device::Cpu).unwrap(),
            ];
            let run = |device: Device| {
                let ps: Vec<Var> = (inits.iter())
                    .map(|t| Var::parameter(t.to(device).unwrap()).unwrap())
                    .collect();
                let mut opt = make(ps.clone());
                for step in 0..4u64 {
                    for (k, p) in ps.iter().enumerate() {
                        let g =
                            Tensor::randn(p.shape(), dtype, 70 + 10 * step + k as u64, Device::Cpu)
                                .unwrap()
                                .mul(3.0 / (1.0 + step as f64 * step as f64))
                                .unwrap();
                        p.set_grad(Some(g.to(device).unwrap())).unwrap();
                    }
                    opt.step().unwrap();
                }
                let state = opt.state_dict().unwrap();
                (ps, state)
            };
            let (gps, gstate) = run(dev);
            let (cps, cstate) = run(Device::Cpu);
            for (k, (g, c)) in gps.iter().zip(&cps).enumerate() {
                let e = rel_err(g.data(), c.data());
                assert!(e < tol, "{name} {dtype:?} parameter {k}: {e}");
            }
            let mut keys: Vec<&String> = cstate.keys().collect();
            keys.sort();
            assert_eq!(keys.len(), gstate.len(), "{name} {dtype:?}");
            for key in keys {
                let (g, c) = (&gstate[key], &cstate[key]);
                let e = rel_err(g, c);
                assert!(e < tol, "{name} {dtype:?} {key}: {e}");
            }
        }
    }
}

/// Parameters that are all empty (one group of a device and dtype with no
/// element) step on the GPU as on the CPU: PyTorch's Adam and AdamW give
/// each a step count and empty moments (strata's AdamW skipped such a group
/// until session 52), SGD an empty momentum buffer; no kernel of zero
/// elements is launched in error.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn empty_parameters_step_on_the_gpu_as_on_the_cpu() {
    use strata_autograd::{Adam, AdamW, Optimizer, Sgd};
    let dev = gpu();
    type Make = fn(Vec<Var>) -> Box<dyn Optimizer>;
    let makes: [(&str, Make); 4] = [
        ("Adam", |ps| Box::new(Adam::new(ps, 0.01).unwrap())),
        ("AdamW", |ps| Box::new(AdamW::new(ps))),
        ("AdamW amsgrad", |ps| {
            Box::new(AdamW::new(ps).with_amsgrad(true).unwrap())
        }),
        ("SGD momentum", |ps| {
            Box::new(Sgd::new(ps, 0.1, 0.9).unwrap())
        }),
    ];
    for (name, make) in makes {
        let run = |device: Device| {
            let ps: Vec<Var> = [&[0usize][..], &[2, 0]]
                .iter()
                .map(|s| Var::parameter(Tensor::zeros(s, DType::F32, device).unwrap()).unwrap())
                .collect();
            let mut opt = make(ps.clone());
            for _ in 0..2 {
                for p in &ps {
                    let g = Tensor::zeros(p.shape(), DType::F32, device).unwrap();
                    p.set_grad(Some(g)).unwrap();
                }
                opt.step().unwrap();
            }
            opt.state_dict().unwrap()
        };
        let (g, c) = (run(dev), run(Device::Cpu));
        let mut keys: Vec<&String> = c.keys().collect();
        keys.sort();
        let mut gkeys: Vec<&String> = g.keys().collect();
        gkeys.sort();
        assert_eq!(gkeys, keys, "{name}");
        if name != "SGD momentum" {
            assert!(c.contains_key("state.1.step"), "{name}: {keys:?}");
            let step = |d: &strata_autograd::optim::StateDict| {
                d["state.1.step"]
                    .to_dtype(DType::F64)
                    .unwrap()
                    .item::<f64>()
                    .unwrap()
            };
            assert_eq!((step(&g), step(&c)), (2.0, 2.0), "{name}");
        }
        for key in keys {
            assert_eq!(g[key].shape(), c[key].shape(), "{name} {key}");
        }
    }
}

/// clip_grad_norm_ with every kind of norm_type (2, 1, inf, -inf, 0, 3,
/// 0.5, -1), error_if_nonfinite, and clip_grad_value_, on GPU gradients of
/// one and of mixed dtypes: the same total norm (its dtype exactly) and
/// the same clipped gradients as on the CPU, within the rounding of
/// another summation order; a non-finite norm with error_if_nonfinite is
/// refused on both, changing nothing.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradient_clipping_options_match_cpu_on_the_gpu() {
    use strata_autograd::{clip_grad_value_, AutogradError, ClipGradNorm};
    let dev = gpu();
    for dtypes in [
        vec![DType::F32],
        vec![DType::F64],
        vec![DType::F16, DType::F32],
        vec![DType::BF16, DType::F16, DType::F64],
    ] {
        let tol = if dtypes.contains(&DType::BF16) {
            3e-2
        } else if dtypes.contains(&DType::F16) {
            5e-3
        } else {
            1e-5
        };
        let grads: Vec<Tensor> = (dtypes.iter().enumerate())
            .map(|(k, &d)| Tensor::randn(&[1000 + k * 37], d, 80 + k as u64, Device::Cpu).unwrap())
            .collect();
        let params = |device: Device, nonfinite: bool| -> Vec<Var> {
            (grads.iter())
                .map(|g| {
                    let p = Var::parameter(Tensor::zeros(g.shape(), g.dtype(), device).unwrap())
                        .unwrap();
                    let g = if nonfinite {
                        let mut v = g.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                        v[3] = f64::INFINITY;
                        Tensor::from_slice(&v, g.shape(), Device::Cpu)
                            .unwrap()
                            .to_dtype(g.dtype())
                            .unwrap()
                    } else {
                        g.clone()
                    };
                    p.set_grad(Some(g.to(device).unwrap())).unwrap();
                    p
                })
                .collect()
        };
        for nt in [
            2.0,
            1.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            3.0,
            0.5,
            -1.0,
        ] {
            let clip = ClipGradNorm::new(1.0).unwrap().with_norm_type(nt).unwrap();
            let (gp, cp) = (params(dev, false), params(Device::Cpu, false));
            let (gt, ct) = (clip.clip(&gp).unwrap(), clip.clip(&cp).unwrap());
            assert_eq!(gt.dtype(), ct.dtype(), "{dtypes:?} {nt}");
            assert_eq!(gt.device(), dev);
            assert!(rel_err(&gt, &ct) < tol, "{dtypes:?} {nt}: total");
            for (g, c) in gp.iter().zip(&cp) {
                let e = rel_err(&g.grad().unwrap(), &c.grad().unwrap());
                assert!(e < tol, "{dtypes:?} {nt}: gradient {e}");
            }
            // One infinite gradient makes the total infinite for p > 0; for
            // p = 0 (a count), p < 0 and -inf (the smallest |g|) the total
            // stays finite (PyTorch's too) and the clip goes ahead.
            let strict = clip.with_error_if_nonfinite(true);
            let (gp, cp) = (params(dev, true), params(Device::Cpu, true));
            let before: Vec<Tensor> = gp
                .iter()
                .map(|p| p.grad().unwrap().to(Device::Cpu).unwrap())
                .collect();
            if nt > 0.0 {
                assert!(
                    matches!(strict.clip(&gp), Err(AutogradError::NonFiniteNorm { .. })),
                    "{dtypes:?} {nt}"
                );
                assert!(
                    matches!(strict.clip(&cp), Err(AutogradError::NonFiniteNorm { .. })),
                    "{dtypes:?} {nt}"
                );
                for (p, b) in gp.iter().zip(&before) {
                    assert!(p.grad().unwrap().to(Device::Cpu).unwrap().equal(b).unwrap());
                }
            } else {
                let (gt, ct) = (strict.clip(&gp).unwrap(), strict.clip(&cp).unwrap());
                let total = gt.to_dtype(DType::F64).unwrap().item::<f64>().unwrap();
                assert!(total.is_finite(), "{dtypes:?} {nt}: {total}");
                assert!(rel_err(&gt, &ct) < tol, "{dtypes:?} {nt}: total");
            }
        }
        let (gp, cp) = (params(dev, true), params(Device::Cpu, true));
        clip_grad_value_(&gp, 0.5).unwrap();
        clip_grad_value_(&cp, 0.5).unwrap();
        for (g, c) in gp.iter().zip(&cp) {
            let g = g.grad().unwrap().to(Device::Cpu).unwrap();
            assert!(
                g.equal(&c.grad().unwrap()).unwrap(),
                "{dtypes:?} clip_grad_value_"
            );
        }
    }
}
