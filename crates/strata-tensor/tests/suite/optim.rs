//! The fused Adam / AdamW step (`Tensor::adam_step_`) against a reference
//! written here from PyTorch's `_single_tensor_adam(w)` formulas, in f64.

use proptest::prelude::*;
use strata_tensor::{AdamHyper, DType, Device, Tensor, TensorError};

/// One step of PyTorch's single-tensor Adam(W) on f64 host vectors.
fn reference(p: &mut [f64], g: &[f64], m: &mut [f64], v: &mut [f64], h: AdamHyper) {
    let bc1 = 1.0 - h.beta1.powi(h.step);
    let bc2 = 1.0 - h.beta2.powi(h.step);
    for i in 0..p.len() {
        p[i] *= 1.0 - h.lr * h.weight_decay;
        m[i] += (g[i] - m[i]) * (1.0 - h.beta1);
        v[i] = v[i] * h.beta2 + (1.0 - h.beta2) * g[i] * g[i];
        let denom = v[i].sqrt() / bc2.sqrt() + h.eps;
        p[i] -= h.lr / bc1 * m[i] / denom;
    }
}

fn hyper(step: i32, weight_decay: f64) -> AdamHyper {
    AdamHyper {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay,
        step,
    }
}

/// Deterministic values in [-1, 1) (a small LCG; the moments need v >= 0).
fn values(n: usize, seed: u64, nonneg: bool) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            if nonneg {
                u
            } else {
                2.0 * u - 1.0
            }
        })
        .collect()
}

fn tensor(x: &[f64], shape: &[usize], d: DType) -> Tensor {
    Tensor::from_vec(x.to_vec(), shape, Device::Cpu)
        .unwrap()
        .to_dtype(d)
        .unwrap()
}

fn host(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// Runs `steps` fused steps and the reference from the same start; returns
/// the worst error relative to max(1, |reference|) over p, m and v.
fn worst_error(n: usize, d: DType, steps: i32, wd: f64, seed: u64) -> f64 {
    let (mut p, mut m, mut v) = (
        values(n, seed, false),
        values(n, seed + 1, false),
        values(n, seed + 2, true),
    );
    // Start from values the dtype holds exactly, so only the step rounds.
    for x in p.iter_mut().chain(m.iter_mut()).chain(v.iter_mut()) {
        *x = host(&tensor(&[*x], &[1], d))[0];
    }
    let (tp, tm, tv) = (
        tensor(&p, &[n], d),
        tensor(&m, &[n], d),
        tensor(&v, &[n], d),
    );
    let mut worst: f64 = 0.0;
    for t in 1..=steps {
        let g: Vec<f64> = host(&tensor(&values(n, seed + 10 + t as u64, false), &[n], d));
        let tg = tensor(&g, &[n], d);
        tp.adam_step_(&tg, &tm, &tv, hyper(t, wd)).unwrap();
        reference(&mut p, &g, &mut m, &mut v, hyper(t, wd));
        for (got, want) in [(host(&tp), &p), (host(&tm), &m), (host(&tv), &v)] {
            for (a, b) in got.iter().zip(want.iter()) {
                worst = worst.max((a - b).abs() / b.abs().max(1.0));
            }
        }
        // Continue from what the kernel stored (the reference must not drift
        // away by the dtype's rounding of earlier steps).
        p = host(&tp);
        m = host(&tm);
        v = host(&tv);
    }
    worst
}

#[test]
fn matches_pytorchs_formulas_in_every_float_dtype() {
    for (d, tol) in [
        (DType::F64, 1e-13),
        (DType::F32, 1e-6),
        (DType::BF16, 1e-2),
        (DType::F16, 2e-3),
    ] {
        for wd in [0.0, 0.1] {
            // 70_000 elements: several parallel chunks and a ragged tail.
            for n in [1, 7, 70_001] {
                let e = worst_error(n, d, 3, wd, 42 + n as u64);
                assert!(e <= tol, "{d} n={n} wd={wd}: error {e} > {tol}");
            }
        }
    }
}

#[test]
fn strided_operands_take_the_same_formula() {
    let (r, c) = (5, 3);
    let n = r * c;
    let p0 = values(n, 1, false);
    let m0 = values(n, 2, false);
    let v0 = values(n, 3, true);
    let g0 = values(n, 4, false);
    // Contiguous run.
    let (p, m, v) = (
        tensor(&p0, &[r, c], DType::F64),
        tensor(&m0, &[r, c], DType::F64),
        tensor(&v0, &[r, c], DType::F64),
    );
    p.adam_step_(&tensor(&g0, &[r, c], DType::F64), &m, &v, hyper(2, 0.05))
        .unwrap();
    // The same elements seen through transposes of [c, r] storages.
    let tr = |x: &[f64]| {
        let mut y = vec![0.0; n];
        for i in 0..r {
            for j in 0..c {
                y[j * r + i] = x[i * c + j];
            }
        }
        tensor(&y, &[c, r], DType::F64).t().unwrap()
    };
    let (ps, ms, vs, gs) = (tr(&p0), tr(&m0), tr(&v0), tr(&g0));
    assert!(!ps.is_contiguous());
    ps.adam_step_(&gs, &ms, &vs, hyper(2, 0.05)).unwrap();
    for (a, b) in [(&p, &ps), (&m, &ms), (&v, &vs)] {
        let (x, y) = (host(a), host(&b.contiguous().unwrap()));
        for (u, w) in x.iter().zip(&y) {
            assert!((u - w).abs() <= 1e-14 * u.abs().max(1.0), "{u} vs {w}");
        }
    }
}

#[test]
fn bad_arguments_are_typed_errors_and_change_nothing() {
    let f = |x: &[f64]| tensor(x, &[x.len()], DType::F32);
    let (p, g, m, v) = (
        f(&[1.0, 2.0]),
        f(&[0.5, 0.5]),
        f(&[0.0, 0.0]),
        f(&[0.0, 0.0]),
    );
    let before = host(&p);
    let mut bad = vec![];
    for h in [
        AdamHyper {
            step: 0,
            ..hyper(1, 0.0)
        },
        AdamHyper {
            beta1: 1.0,
            ..hyper(1, 0.0)
        },
        AdamHyper {
            beta2: -0.1,
            ..hyper(1, 0.0)
        },
        AdamHyper {
            lr: -1.0,
            ..hyper(1, 0.0)
        },
        AdamHyper {
            lr: f64::NAN,
            ..hyper(1, 0.0)
        },
        // (eps = inf is accepted, as PyTorch's `0.0 <= eps`.)
        AdamHyper {
            eps: f64::NAN,
            ..hyper(1, 0.0)
        },
        AdamHyper {
            weight_decay: -0.5,
            ..hyper(1, 0.0)
        },
    ] {
        bad.push(p.adam_step_(&g, &m, &v, h));
    }
    let h = hyper(1, 0.0);
    bad.push(p.adam_step_(&g.to_dtype(DType::F64).unwrap(), &m, &v, h));
    bad.push(p.adam_step_(&f(&[1.0, 2.0, 3.0]), &m, &v, h));
    bad.push(p.adam_step_(&g, &m, &m, h));
    bad.push(p.adam_step_(&p, &m, &v, h));
    let i = Tensor::from_vec(vec![1i64, 2], &[2], Device::Cpu).unwrap();
    bad.push(i.adam_step_(&i.clone(), &i.clone(), &i.clone(), h));
    for r in bad {
        match r {
            Err(
                TensorError::Value { .. }
                | TensorError::DType { .. }
                | TensorError::Shape { .. }
                | TensorError::Overlap { .. },
            ) => {}
            other => panic!("expected a typed argument error, got {other:?}"),
        }
    }
    assert_eq!(host(&p), before);
    assert_eq!(host(&m), vec![0.0, 0.0]);
    // Empty tensors are a no-op.
    let e = f(&[]);
    e.adam_step_(&f(&[]), &f(&[]), &f(&[]), h).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random lengths, hyper-parameters and step numbers: f64 within
    /// rounding of the reference.
    #[test]
    fn random_hyper_parameters(
        n in 0usize..40_000,
        lr in 0.0f64..1.0,
        b1 in 0.0f64..0.999,
        b2 in 0.0f64..0.9999,
        eps in 0.0f64..1e-3,
        wd in 0.0f64..0.5,
        step in 1i32..50,
        seed in 0u64..1000,
    ) {
        let h = AdamHyper { lr, beta1: b1, beta2: b2, eps: eps.max(1e-12), weight_decay: wd, step };
        let (mut p, g, mut m, mut v) = (
            values(n, seed, false), values(n, seed + 1, false),
            values(n, seed + 2, false), values(n, seed + 3, true),
        );
        let (tp, tm, tv) = (tensor(&p, &[n], DType::F64), tensor(&m, &[n], DType::F64), tensor(&v, &[n], DType::F64));
        tp.adam_step_(&tensor(&g, &[n], DType::F64), &tm, &tv, h).unwrap();
        reference(&mut p, &g, &mut m, &mut v, h);
        for (got, want) in [(host(&tp), p), (host(&tm), m), (host(&tv), v)] {
            for (a, b) in got.iter().zip(&want) {
                prop_assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{} vs {}", a, b);
            }
        }
    }
}

/// Items for `adam_step_list_` as an optimizer builds them: parameters of
/// the given lengths, gradients as views into one bucket, moments as views
/// into two flat buffers. Returns (params, grads, exp_avgs, exp_avg_sqs).
type Lists = (Vec<Tensor>, Vec<Tensor>, Vec<Tensor>, Vec<Tensor>);

fn lists(lens: &[usize], d: DType, seed: u64) -> Lists {
    let total: usize = lens.iter().sum();
    let bucket = tensor(&values(total, seed, false), &[total], d);
    let m = tensor(&values(total, seed + 1, false), &[total], d);
    let v = tensor(&values(total, seed + 2, true), &[total], d);
    let (mut ps, mut gs, mut ms, mut vs) = (vec![], vec![], vec![], vec![]);
    let mut off = 0;
    for (k, &n) in lens.iter().enumerate() {
        ps.push(tensor(&values(n, seed + 10 + k as u64, false), &[n], d));
        let view = |t: &Tensor| t.narrow(0, off as i64, n as i64).unwrap();
        gs.push(view(&bucket));
        ms.push(view(&m));
        vs.push(view(&v));
        off += n;
    }
    (ps, gs, ms, vs)
}

fn deep(ts: &[Tensor]) -> Vec<Tensor> {
    ts.iter().map(|t| t.deep_clone().unwrap()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// The list step equals `adam_step_` item by item, bit for bit, on any
    /// number of items of any lengths (empty ones included).
    #[test]
    fn list_step_equals_each_items_step(
        lens in prop::collection::vec(0usize..300, 0..12),
        f64_dtype in any::<bool>(),
        wd in 0.0f64..0.3,
        step in 1i32..20,
        seed in 0u64..1000,
    ) {
        let d = if f64_dtype { DType::F64 } else { DType::F32 };
        let (ps, gs, ms, vs) = lists(&lens, d, seed);
        let (ps2, ms2, vs2) = (deep(&ps), deep(&ms), deep(&vs));
        let h = hyper(step, wd);
        Tensor::adam_step_list_(&ps, &gs, &ms, &vs, h).unwrap();
        for k in 0..lens.len() {
            ps2[k].adam_step_(&gs[k], &ms2[k], &vs2[k], h).unwrap();
            prop_assert_eq!(host(&ps[k]), host(&ps2[k]));
            prop_assert_eq!(host(&ms[k]), host(&ms2[k]));
            prop_assert_eq!(host(&vs[k]), host(&vs2[k]));
        }
    }
}

/// Items that write the same memory (one parameter listed twice) are updated
/// one after the other, as `adam_step_` twice would.
#[test]
fn list_step_with_items_sharing_memory_goes_in_order() {
    let (ps, gs, ms, vs) = lists(&[5, 5], DType::F32, 3);
    let twice = [ps[0].clone(), ps[0].clone()];
    let reference = ps[0].deep_clone().unwrap();
    let (m2, v2) = (deep(&ms), deep(&vs));
    let h = hyper(1, 0.1);
    Tensor::adam_step_list_(&twice, &gs, &ms, &vs, h).unwrap();
    reference.adam_step_(&gs[0], &m2[0], &v2[0], h).unwrap();
    reference.adam_step_(&gs[1], &m2[1], &v2[1], h).unwrap();
    assert_eq!(host(&ps[0]), host(&reference));
}

/// Lists of different lengths, and one bad item anywhere in the list, are
/// typed errors that leave every item unchanged.
#[test]
fn list_step_errors_change_nothing() {
    let (ps, gs, ms, vs) = lists(&[4, 3, 2], DType::F32, 9);
    let before: Vec<Vec<f64>> = ps.iter().chain(&ms).chain(&vs).map(host).collect();
    let h = hyper(1, 0.0);
    let short = Tensor::adam_step_list_(&ps, &gs[..2], &ms, &vs, h).unwrap_err();
    assert!(matches!(short, TensorError::Value { .. }), "{short:?}");
    assert!(short.to_string().contains("one length"), "{short}");
    let mut bad = gs.clone();
    bad[2] = bad[2].to_dtype(DType::F64).unwrap();
    let e = Tensor::adam_step_list_(&ps, &bad, &ms, &vs, h).unwrap_err();
    assert!(matches!(e, TensorError::DType { .. }), "{e:?}");
    let e = Tensor::adam_step_list_(&ps, &gs, &ms, &vs, hyper(0, 0.0)).unwrap_err();
    assert!(matches!(e, TensorError::Value { .. }), "{e:?}");
    let after: Vec<Vec<f64>> = ps.iter().chain(&ms).chain(&vs).map(host).collect();
    assert_eq!(before, after);
    // Empty lists are a no-op.
    Tensor::adam_step_list_(&[], &[], &[], &[], h).unwrap();
}

/// An item whose gradient is another item's parameter reads it as updated
/// by the items before it, as `adam_step_` item by item would.
#[test]
fn list_step_reads_an_earlier_items_update() {
    let (ps, _, ms, vs) = lists(&[6, 6], DType::F64, 21);
    let g0 = tensor(&values(6, 99, false), &[6], DType::F64);
    let grads = [g0.clone(), ps[0].clone()];
    let (p2, m2, v2) = (deep(&ps), deep(&ms), deep(&vs));
    let h = hyper(2, 0.05);
    Tensor::adam_step_list_(&ps, &grads, &ms, &vs, h).unwrap();
    p2[0].adam_step_(&g0, &m2[0], &v2[0], h).unwrap();
    p2[1].adam_step_(&p2[0], &m2[1], &v2[1], h).unwrap();
    for k in 0..2 {
        assert_eq!(host(&ps[k]), host(&p2[k]), "parameter {k}");
        assert_eq!(host(&ms[k]), host(&m2[k]), "exp_avg {k}");
    }
}

// ----- session 44: maximize and AMSGrad (`adam_step_with_`, `adam_step_list_with_`) -----

/// One step of PyTorch's single-tensor Adam(W) with `maximize` and
/// `amsgrad` (`max` the running maximum of v), on f64 host vectors.
fn reference_with(
    p: &mut [f64],
    g: &[f64],
    m: &mut [f64],
    v: &mut [f64],
    max: &mut [f64],
    h: AdamHyper,
    maximize: bool,
) {
    let bc1 = 1.0 - h.beta1.powi(h.step);
    let bc2 = 1.0 - h.beta2.powi(h.step);
    for i in 0..p.len() {
        let g = if maximize { -g[i] } else { g[i] };
        p[i] *= 1.0 - h.lr * h.weight_decay;
        m[i] += (g - m[i]) * (1.0 - h.beta1);
        v[i] = v[i] * h.beta2 + (1.0 - h.beta2) * g * g;
        max[i] = max[i].max(v[i]);
        let denom = max[i].sqrt() / bc2.sqrt() + h.eps;
        p[i] -= h.lr / bc1 * m[i] / denom;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// maximize and AMSGrad against the reference in f64 (random lengths,
    /// past the parallel chunks too; a running maximum above or below the
    /// new v), within rounding; without AMSGrad, maximize is the step on
    /// the negated gradient, bit for bit.
    #[test]
    fn maximize_and_amsgrad_follow_the_reference(
        n in 0usize..40_000,
        lr in 0.0f64..1.0,
        b1 in 0.0f64..0.999,
        b2 in 0.0f64..0.9999,
        wd in 0.0f64..0.5,
        step in 1i32..50,
        maximize in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let h = AdamHyper { lr, beta1: b1, beta2: b2, eps: 1e-8, weight_decay: wd, step };
        let (mut p, g, mut m, mut v) = (
            values(n, seed, false), values(n, seed + 1, false),
            values(n, seed + 2, false), values(n, seed + 3, true),
        );
        let mut max: Vec<f64> = values(n, seed + 4, true).iter().map(|x| x * 0.01).collect();
        let t = |x: &[f64]| tensor(x, &[n], DType::F64);
        let (tp, tm, tv, tx) = (t(&p), t(&m), t(&v), t(&max));
        let (np, nm, nv) = (t(&p), t(&m), t(&v));
        tp.adam_step_with_(&t(&g), &tm, &tv, Some(&tx), h, maximize).unwrap();
        reference_with(&mut p, &g, &mut m, &mut v, &mut max, h, maximize);
        for (got, want) in [(host(&tp), p), (host(&tm), m), (host(&tv), v), (host(&tx), max)] {
            for (a, b) in got.iter().zip(&want) {
                prop_assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{} vs {}", a, b);
            }
        }
        // maximize without AMSGrad: adam_step_ on -g.
        let (qp, qm, qv) = (np.deep_clone().unwrap(), nm.deep_clone().unwrap(), nv.deep_clone().unwrap());
        np.adam_step_with_(&t(&g), &nm, &nv, None, h, true).unwrap();
        qp.adam_step_(&t(&g).neg().unwrap(), &qm, &qv, h).unwrap();
        for (a, b) in [(&np, &qp), (&nm, &qm), (&nv, &qv)] {
            prop_assert!(host(a) == host(b));
        }
    }
}

/// AMSGrad in f16 and bf16: the maximum is taken in f32 with the unrounded
/// new v and divides unrounded (PyTorch's fused kernel), so the parameter
/// may differ from a step on a rounded v; the stored maximum is the rounded
/// maximum, never below the stored v.
#[test]
fn amsgrad_keeps_the_running_maximum_in_every_float_dtype() {
    for d in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let n = 257;
        let t = |x: &[f64]| tensor(x, &[n], d);
        let p = t(&values(n, 1, false));
        let (m, v, x) = (t(&vec![0.0; n]), t(&vec![0.0; n]), t(&vec![0.0; n]));
        let mut last_max = vec![0.0; n];
        for step in 1..=6 {
            // Large gradients first, then small: v decays below its maximum.
            let scale = if step <= 2 { 4.0 } else { 0.1 };
            let g: Vec<f64> = values(n, 10 + step as u64, false)
                .iter()
                .map(|g| g * scale)
                .collect();
            let h = AdamHyper {
                beta2: 0.9,
                ..hyper(step, 0.0)
            };
            p.adam_step_with_(&t(&g), &m, &v, Some(&x), h, false)
                .unwrap();
            let (hv, hx) = (host(&v), host(&x));
            for i in 0..n {
                assert!(
                    hx[i] >= hv[i] && hx[i] >= last_max[i],
                    "{d} step {step} element {i}"
                );
            }
            last_max = hx;
        }
        let (hv, hx) = (host(&v), host(&x));
        assert!(
            hx.iter().zip(&hv).any(|(x, v)| x > v),
            "{d}: the maximum never mattered"
        );
    }
}

/// With AMSGrad and maximize, strided operands (the maximum transposed too)
/// take the same formula as contiguous ones, and the list step equals each
/// item's step, bit for bit.
#[test]
fn options_on_strided_operands_and_lists_match_the_single_step() {
    let (r, c) = (5, 3);
    let n = r * c;
    for d in [DType::F32, DType::BF16] {
        let t = |seed: u64, nonneg: bool| tensor(&values(n, seed, nonneg), &[r, c], d);
        let h = hyper(3, 0.1);
        // Contiguous.
        let (p, m, v, x, g) = (
            t(1, false),
            t(2, false),
            t(3, true),
            t(4, true),
            t(5, false),
        );
        // The same values in transposed storages.
        let tr = |a: &Tensor| {
            a.transpose(0, 1)
                .unwrap()
                .contiguous()
                .unwrap()
                .transpose(0, 1)
                .unwrap()
        };
        let (sp, sm, sv, sx) = (tr(&p), tr(&m), tr(&v), tr(&x));
        assert!(!sp.is_contiguous());
        p.adam_step_with_(&g, &m, &v, Some(&x), h, true).unwrap();
        sp.adam_step_with_(&g, &sm, &sv, Some(&sx), h, true)
            .unwrap();
        for (a, b) in [(&p, &sp), (&m, &sm), (&v, &sv), (&x, &sx)] {
            assert_eq!(host(a), host(b), "{d} strided");
        }
        // Lists of three items against item by item.
        let items = |seed: u64| -> [Vec<Tensor>; 5] {
            let mk = |k: u64, nonneg| {
                (0..3)
                    .map(|i| {
                        tensor(
                            &values(7 + i, seed + 10 * k + i as u64, nonneg),
                            &[7 + i],
                            d,
                        )
                    })
                    .collect()
            };
            [
                mk(0, false),
                mk(1, false),
                mk(2, false),
                mk(3, true),
                mk(4, true),
            ]
        };
        let [ps, gs, ms, vs, xs] = items(100);
        let [ps2, _, ms2, vs2, xs2] = items(100);
        Tensor::adam_step_list_with_(&ps, &gs, &ms, &vs, Some(&xs), h, true).unwrap();
        for i in 0..3 {
            ps2[i]
                .adam_step_with_(&gs[i], &ms2[i], &vs2[i], Some(&xs2[i]), h, true)
                .unwrap();
            for (a, b) in [(&ps, &ps2), (&ms, &ms2), (&vs, &vs2), (&xs, &xs2)] {
                assert_eq!(host(&a[i]), host(&b[i]), "{d} list item {i}");
            }
        }
    }
}

/// A bad fifth operand is a typed error before anything is written: a
/// maximum of another dtype, shape or device, in the storage of another
/// operand, expanded (elements sharing memory); a list of maxima of another
/// length.
#[test]
fn a_bad_running_maximum_is_refused_and_changes_nothing() {
    let f = |x: &[f64]| tensor(x, &[x.len()], DType::F32);
    let (p, g, m, v) = (
        f(&[1.0, 2.0]),
        f(&[0.5, -0.5]),
        f(&[0.1, 0.2]),
        f(&[0.3, 0.4]),
    );
    let before = [host(&p), host(&m), host(&v)];
    let h = hyper(1, 0.0);
    let bad: Vec<(Tensor, &str)> = vec![
        (tensor(&[0.0, 0.0], &[2], DType::F64), "dtype"),
        (f(&[0.0, 0.0, 0.0]), "shape"),
        (v.clone(), "storage"),
        (p.clone(), "storage"),
        (f(&[0.0]).expand(&[2]).unwrap(), "expanded"),
    ];
    for (x, why) in &bad {
        let e = p.adam_step_with_(&g, &m, &v, Some(x), h, false);
        assert!(e.is_err(), "{why}: accepted");
        assert_eq!([host(&p), host(&m), host(&v)], before, "{why}: changed");
    }
    let e = Tensor::adam_step_list_with_(
        std::slice::from_ref(&p),
        std::slice::from_ref(&g),
        std::slice::from_ref(&m),
        std::slice::from_ref(&v),
        Some(&[]),
        h,
        false,
    );
    assert!(matches!(e, Err(TensorError::Value { .. })), "{e:?}");
    assert_eq!([host(&p), host(&m), host(&v)], before);
}
