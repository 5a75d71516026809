//! Session 78: the `Var` forms of `cdist`, `diff`, `meshgrid` and
//! `cartesian_prod` against PyTorch 2.15's CPU
//! (`benches/anchors/gen_grad_forms_s78.py`: random values, small integers
//! that tie coordinates and zero distances, copied rows, p in {0, 0.5, 1,
//! 1.5, 2, 3, inf}, every `compute_mode`, broadcast batch dims, empty
//! inputs, f32 and f64, prepend/append, both indexings), values and the
//! gradients of every float input within a relative 1e-9 (f64) or 1e-4
//! (f32; 3e-3 in PyTorch's f32 matrix-product form, whose distances carry
//! its cancellation), absolute below 1; refused calls must be refused. Then central
//! finite differences in f64 where the functions are smooth, and the edges
//! from first principles (zero distances, p = 0, p = inf's ties, errors).

use crate::common::{gradcheck, randn};
use crate::math_grad_s74::{close, f64s};
use crate::pytorch_fixture::{assert_cases_agree, dtype, fixture, gunzip, input, nums, shape};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::{CdistMode, Var};
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/grad_forms_s78.json.gz"))));

fn mode_of(m: &Value) -> CdistMode {
    match m.as_str() {
        Some("use_mm") => CdistMode::UseMm,
        Some("no_mm") => CdistMode::DoNotUseMm,
        _ => CdistMode::UseMmIfNecessary,
    }
}

/// The case's call of strata's `Var` form.
fn call(c: &Value, xs: &[Var]) -> strata_autograd::Result<Vec<Var>> {
    let a = &c["args"];
    Ok(match c["op"].as_str().unwrap() {
        "cdist" => {
            let p = crate::pytorch_fixture::num(&a["p"]);
            vec![xs[0].cdist_with_mode(&xs[1], p, mode_of(&a["mode"]))?]
        }
        "diff" => {
            let names: Vec<&str> = a["parts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            let at = |name: &str| names.iter().position(|&n| n == name).map(|i| &xs[1 + i]);
            vec![xs[0].diff(
                a["n"].as_i64().unwrap(),
                a["dim"].as_i64().unwrap(),
                at("prepend"),
                at("append"),
            )?]
        }
        "meshgrid" => {
            let refs: Vec<&Var> = xs.iter().collect();
            Var::meshgrid(&refs, a["indexing"].as_str().unwrap())?
        }
        _ => {
            let refs: Vec<&Var> = xs.iter().collect();
            vec![Var::cartesian_prod(&refs)?]
        }
    })
}

/// The upstream gradient of output `k` (`((3 j + k) mod 7 - 3) / 2`).
fn upstream(shape: &[usize], k: usize, dt: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let u: Vec<f64> = (0..n)
        .map(|j| ((3 * j + k) % 7) as f64 / 2.0 - 1.5)
        .collect();
    Tensor::from_slice(&u, shape, Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap()
}

fn difference(c: &Value) -> Option<String> {
    let xs: Vec<Var> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let t = input(r, Device::Cpu);
            if t.dtype().is_float() {
                Var::parameter(t).unwrap()
            } else {
                Var::new(t)
            }
        })
        .collect();
    let outs = match (call(c, &xs), c.get("error")) {
        (Err(_), Some(_)) => return None,
        (Ok(_), Some(e)) => return Some(format!("succeeded, PyTorch failed: {e}")),
        (Err(e), None) => return Some(format!("failed ({e}), PyTorch did not")),
        (Ok(o), None) => o,
    };
    let want = c["results"].as_array().unwrap();
    if outs.len() != want.len() {
        return Some(format!("{} results, PyTorch {}", outs.len(), want.len()));
    }
    // PyTorch's f32 matrix-product form (p = 2, more than 25 rows or
    // use_mm) computes its distances as |a|² - 2 a·b + |b|², whose
    // cancellation leaves a close pair's distance off by up to ~1e-3 of
    // itself; its gradient divides by that distance (strata's is exact), so
    // those gradients are compared within 3e-3.
    let mm = c["op"] == "cdist" && c["args"]["p"] == 2.0 && {
        let rows = |i: usize| {
            let s = shape(&c["inputs"][i]["shape"]);
            s[s.len() - 2]
        };
        match c["args"]["mode"].as_str() {
            Some("use_mm") => true,
            Some("no_mm") => false,
            _ => rows(0) > 25 || rows(1) > 25,
        }
    };
    let rel = |dt: DType| match dt {
        DType::F64 => 1e-9,
        _ if mm => 3e-3,
        _ => 1e-4,
    };
    let mut loss: Option<Var> = None;
    for (k, (o, w)) in outs.iter().zip(want).enumerate() {
        let wd = dtype(w["dtype"].as_str().unwrap());
        if o.dtype() != wd || o.shape() != shape(&w["shape"]).as_slice() {
            return Some(format!(
                "result {k}: {:?} {:?}, PyTorch {w}",
                o.dtype(),
                o.shape()
            ));
        }
        let got = f64s(o.data());
        if !close(&got, &nums(&w["data"]), rel(wd)) {
            return Some(format!(
                "result {k}: {got:?}, PyTorch {:?}",
                nums(&w["data"])
            ));
        }
        if o.requires_grad() {
            let u = Var::new(upstream(o.shape(), k, o.dtype()));
            let l = o.mul(&u).and_then(|p| p.sum(None, false)).unwrap();
            loss = Some(match loss {
                None => l,
                Some(s) => s.add(&l).unwrap(),
            });
        }
    }
    let Some(grads) = c.get("grads") else {
        return loss.map(|_| "records a graph where PyTorch's result needs no gradient".into());
    };
    if let Some(l) = loss {
        if let Err(e) = l.backward() {
            return Some(format!("backward failed: {e}"));
        }
    }
    for (i, (x, w)) in xs.iter().zip(grads.as_array().unwrap()).enumerate() {
        let got = x.grad().map(|g| f64s(&g));
        match (got, w) {
            (None, Value::Null) => {}
            (Some(g), Value::Null) => {
                // PyTorch gives no gradient to an input the result does not
                // use (an empty prepend, say); strata may give zeros.
                if g.iter().any(|&v| v != 0.0) {
                    return Some(format!("input {i}: gradient {g:?}, PyTorch none"));
                }
            }
            (None, w) => {
                if nums(w).iter().any(|&v| v != 0.0) {
                    return Some(format!("input {i}: no gradient, PyTorch {w}"));
                }
            }
            (Some(g), w) => {
                if !close(&g, &nums(w), rel(x.dtype())) {
                    return Some(format!("input {i}: gradient {g:?}, PyTorch {:?}", nums(w)));
                }
            }
        }
    }
    None
}

#[test]
fn var_forms_and_gradients_match_pytorch() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert_cases_agree(
        cases,
        1000,
        |c| {
            format!(
                "{} {} {}",
                c["op"],
                c["args"],
                c.get("kind").unwrap_or(&Value::Null)
            )
        },
        difference,
    );
}

// ----- central finite differences (f64), away from the kinks -----

fn f64_input(shape: &[usize], seed: u64) -> Tensor {
    randn(shape, seed)
}

#[test]
fn cdist_gradients_match_finite_differences() {
    // Random normal points: no zero differences, distances or ties.
    let shapes: [(&[usize], &[usize]); 4] = [
        (&[3, 2], &[4, 2]),
        (&[2, 3, 3], &[1, 2, 3]),
        (&[2, 1, 2, 4], &[3, 5, 4]),
        (&[27, 2], &[3, 2]),
    ];
    for (k, (s1, s2)) in shapes.iter().enumerate() {
        for p in [0.5, 1.0, 1.5, 2.0, 3.0, f64::INFINITY] {
            for mode in [
                CdistMode::UseMmIfNecessary,
                CdistMode::UseMm,
                CdistMode::DoNotUseMm,
            ] {
                if p != 2.0 && mode != CdistMode::UseMmIfNecessary {
                    continue;
                }
                let seed = 100 + k as u64;
                let (a, b) = (f64_input(s1, seed), f64_input(s2, seed + 50));
                gradcheck(vec![a, b], seed, move |v| {
                    v[0].cdist_with_mode(&v[1], p, mode)
                });
            }
        }
    }
}

#[test]
fn diff_meshgrid_cartesian_prod_gradients_match_finite_differences() {
    let x = f64_input(&[3, 4, 2], 7);
    for (n, dim) in [(1, 0), (2, 1), (3, -1), (1, -2), (5, 1)] {
        gradcheck(vec![x.clone()], 7, move |v| v[0].diff(n, dim, None, None));
    }
    let (pre, app) = (f64_input(&[3, 2, 2], 8), f64_input(&[3, 1, 2], 9));
    gradcheck(vec![x.clone(), pre, app], 8, |v| {
        v[0].diff(2, 1, Some(&v[1]), Some(&v[2]))
    });
    let (a, b, c) = (
        f64_input(&[3], 10),
        f64_input(&[2], 11),
        f64_input(&[4], 12),
    );
    for indexing in ["ij", "xy"] {
        gradcheck(vec![a.clone(), b.clone(), c.clone()], 10, move |v| {
            let g = Var::meshgrid(&[&v[0], &v[1], &v[2]], indexing)?;
            // Each grid weighted differently: sum of g0 * g1 + g2.
            g[0].mul(&g[1])?.add(&g[2])
        });
    }
    gradcheck(vec![a, b, c], 11, |v| {
        Var::cartesian_prod(&[&v[0], &v[1], &v[2]])?
            .mul(&Var::cartesian_prod(&[&v[0], &v[1], &v[2]])?)
    });
}

// ----- the edges, from first principles -----

fn var(v: &[f64], shape: &[usize], dt: DType) -> Var {
    Var::parameter(
        Tensor::from_slice(v, shape, Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap(),
    )
    .unwrap()
}

fn grad(v: &Var) -> Vec<f64> {
    f64s(&v.grad().unwrap())
}

#[test]
fn cdist_gradient_is_zero_at_zero_distance_for_every_p() {
    for dt in [DType::F32, DType::F64] {
        for p in [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, f64::INFINITY] {
            for mode in [CdistMode::DoNotUseMm, CdistMode::UseMm] {
                // Row 0 of a is b's row 0 (distance 0); row 1 differs from
                // it in one coordinate only (zero differences elsewhere).
                let a = var(&[1.0, 2.0, 1.0, 5.0], &[2, 2], dt);
                let b = var(&[1.0, 2.0], &[1, 2], dt);
                let d = a.cdist_with_mode(&b, p, mode).unwrap();
                d.sum(None, false).unwrap().backward().unwrap();
                let (ga, gb) = (grad(&a), grad(&b));
                assert!(
                    ga.iter().chain(&gb).all(|g| g.is_finite()),
                    "{dt:?} p {p}: {ga:?} {gb:?}"
                );
                // Row 1's distance is |5 - 2| = 3 for every p > 0: the
                // gradient is sign(3) = 1 on the differing coordinate and 0
                // on the equal one; p = 0 has none.
                // (Within rounding: the matrix-product form subtracts.)
                let one = if p == 0.0 { 0.0 } else { 1.0 };
                let near =
                    |g: &[f64], w: &[f64]| g.iter().zip(w).all(|(a, b)| (a - b).abs() < 1e-6);
                assert!(
                    near(&ga, &[0.0, 0.0, 0.0, one]),
                    "{dt:?} p {p} {mode:?}: {ga:?}"
                );
                assert!(near(&gb, &[0.0, -one]), "{dt:?} p {p} {mode:?}: {gb:?}");
                // Row 0's pair adds exactly nothing.
                assert_eq!(&ga[..2], &[0.0, 0.0], "{dt:?} p {p} {mode:?}");
            }
        }
    }
}

#[test]
fn cdist_inf_sends_the_gradient_to_every_coordinate_reaching_the_maximum() {
    // Differences (-1, 1, -0.5): |d| = 1 twice; each tie gets the whole
    // upstream gradient with d's sign, as PyTorch's kernel gives it.
    let a = var(&[0.0, 0.0, 0.0], &[1, 3], DType::F64);
    let b = var(&[1.0, -1.0, 0.5], &[1, 3], DType::F64);
    let d = a.cdist(&b, f64::INFINITY).unwrap();
    assert_eq!(d.to_vec::<f64>().unwrap(), vec![1.0]);
    d.mul(&Var::new(
        Tensor::from_slice(&[2.0f64], &[1, 1], Device::Cpu).unwrap(),
    ))
    .unwrap()
    .sum(None, false)
    .unwrap()
    .backward()
    .unwrap();
    assert_eq!(grad(&a), vec![-2.0, 2.0, 0.0]);
    assert_eq!(grad(&b), vec![2.0, -2.0, 0.0]);
}

#[test]
fn cdist_p2_gradient_by_hand_in_both_forms() {
    // a = (0, 0), b = (3, 4): d = 5, the gradient (a - b) / 5 = (-0.6, -0.8).
    for mode in [CdistMode::DoNotUseMm, CdistMode::UseMm] {
        let a = var(&[0.0, 0.0], &[1, 2], DType::F64);
        let b = var(&[3.0, 4.0], &[1, 2], DType::F64);
        let d = a.cdist_with_mode(&b, 2.0, mode).unwrap();
        assert_eq!(
            d.grad_fn_name(),
            Some(if mode == CdistMode::UseMm {
                "EuclideanDistBackward"
            } else {
                "CdistBackward"
            })
        );
        d.sum(None, false).unwrap().backward().unwrap();
        let close = |g: Vec<f64>, w: [f64; 2]| g.iter().zip(w).all(|(a, b)| (a - b).abs() < 1e-15);
        assert!(close(grad(&a), [-0.6, -0.8]), "{mode:?}");
        assert!(close(grad(&b), [0.6, 0.8]), "{mode:?}");
    }
}

#[test]
fn refused_calls_are_typed_errors() {
    let x = var(&[1.0, 2.0, 3.0, 4.0], &[2, 2], DType::F32);
    let row = var(&[1.0, 2.0], &[2], DType::F32);
    let three = var(&[1.0, 2.0, 3.0], &[1, 3], DType::F32);
    let scalar = var(&[1.0], &[], DType::F32);
    let ints = Var::new(Tensor::from_slice(&[1i64, 2], &[1, 2], Device::Cpu).unwrap());
    assert!(row.cdist(&x, 2.0).is_err());
    assert!(x.cdist(&three, 2.0).is_err());
    assert!(x.cdist(&x, -1.0).is_err());
    assert!(x.cdist(&x, f64::NAN).is_err());
    assert!(ints.cdist(&ints, 2.0).is_err());
    assert!(x.cdist(&ints, 2.0).is_err());
    let half = Var::new(x.data().to_dtype(DType::F16).unwrap());
    let many = Var::new(Tensor::zeros(&[30, 2], DType::F16, Device::Cpu).unwrap());
    assert!(half.cdist(&half, 2.0).is_err());
    assert!(many
        .cdist_with_mode(&half, 2.0, CdistMode::DoNotUseMm)
        .is_err());
    assert!(many.cdist(&half, 2.0).is_ok());
    assert!(half.cdist_with_mode(&half, 2.0, CdistMode::UseMm).is_ok());
    assert!(scalar.diff(1, 0, None, None).is_err());
    assert!(x.diff(-1, 0, None, None).is_err());
    assert!(x.diff(1, 2, None, None).is_err());
    assert!(x.diff(1, 0, Some(&row), None).is_err());
    assert!(x.diff(1, 0, None, Some(&three)).is_err());
    assert!(Var::meshgrid(&[], "ij").is_err());
    assert!(Var::meshgrid(&[&x], "ij").is_err());
    assert!(Var::meshgrid(&[&row, &row], "yx").is_err());
    assert!(Var::meshgrid(
        &[&row, &Var::new(row.data().to_dtype(DType::F64).unwrap())],
        "ij"
    )
    .is_err());
    assert!(Var::cartesian_prod(&[]).is_err());
    assert!(Var::cartesian_prod(&[&x]).is_err());
    assert!(Var::cartesian_prod(&[&row, &scalar]).is_err());
}

#[test]
fn half_cdist_in_the_matrix_product_form_has_gradients() {
    let a = Var::parameter(
        Tensor::randn(&[30, 3], DType::F32, 5, Device::Cpu)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap(),
    )
    .unwrap();
    let b = Var::parameter(
        Tensor::randn(&[4, 3], DType::F32, 6, Device::Cpu)
            .unwrap()
            .to_dtype(DType::F16)
            .unwrap(),
    )
    .unwrap();
    let d = a.cdist(&b, 2.0).unwrap();
    assert_eq!(d.dtype(), DType::F16);
    d.sum(None, false).unwrap().backward().unwrap();
    // Against the f32 computation's gradient, within f16's rounding.
    let (a32, b32) = (
        Var::parameter(a.data().to_dtype(DType::F32).unwrap()).unwrap(),
        Var::parameter(b.data().to_dtype(DType::F32).unwrap()).unwrap(),
    );
    a32.cdist(&b32, 2.0)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(a.grad().unwrap().dtype(), DType::F16);
    assert!(close(&grad(&a), &grad(&a32), 4e-3));
    assert!(close(&grad(&b), &grad(&b32), 4e-3));
}

#[test]
fn cdist_runs_in_f32_under_autocast_as_pytorch_lists_it() {
    use strata_autograd::{autocast, DeviceType};
    // PyTorch 2.15: `torch.cdist` of bf16 inputs in a CPU bf16 region is
    // f32 (on its CPU and CUDA f32 lists); the gradients come back in bf16.
    let a = Var::parameter(Tensor::randn(&[3, 2], DType::BF16, 1, Device::Cpu).unwrap()).unwrap();
    let b = Var::parameter(Tensor::randn(&[4, 2], DType::BF16, 2, Device::Cpu).unwrap()).unwrap();
    let d = autocast(DeviceType::Cpu, DType::BF16, || a.cdist(&b, 1.0))
        .unwrap()
        .unwrap();
    assert_eq!(d.dtype(), DType::F32);
    d.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(a.grad().unwrap().dtype(), DType::BF16);
    assert_eq!(b.grad().unwrap().dtype(), DType::BF16);
}
