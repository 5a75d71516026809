//! The layout of a leaf's `.grad` against PyTorch 2.15's,
//! `tests/data/grad_layout_s54b.json` (made by
//! `benches/anchors/gen_grad_layout_s54b.py`): PyTorch's AccumulateGrad
//! follows the gradient layout contract, giving the first `.grad` of a
//! non-overlapping and dense leaf (transposed, permuted, with dims of size
//! 1, at an offset) the leaf's strides and that of any other leaf
//! (expanded, or with gaps) row-major strides; later gradients are added in
//! place, so `.grad` keeps its strides, an assigned one too, and an
//! assigned overlapping `.grad` makes the in-place add fail with `.grad`
//! unchanged.
//!
//! Until session 54b strata made every first `.grad` row-major. Each case
//! checks the strides (every dim, those of size 1 too) and the values bit
//! for bit after each backward pass.

use crate::pytorch_fixture::{dtype, fixture, host, nums, same, shape, tensor};
use serde_json::Value;
use strata_autograd::Var;
use strata_tensor::{DType, Tensor};

const FIXTURE: &str = include_str!("../data/grad_layout_s54b.json");

fn ints(v: &Value) -> Vec<i64> {
    shape(v).into_iter().map(|x| x as i64).collect()
}

/// A tensor of `shape` and `dt`, row-major weights (the generator's
/// `weights`: quarters starting from `k`).
fn weights(shape: &[usize], dt: DType, k: i64) -> Var {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n as i64)
        .map(|i| ((k + 3 * i).rem_euclid(17) - 8) as f64 / 4.0)
        .collect();
    Var::new(
        tensor(&v, dt)
            .reshape(&shape.iter().map(|&s| s as i64).collect::<Vec<_>>())
            .unwrap(),
    )
}

/// The generator's forward programs.
fn forward(prog: &str, p: &Var) -> strata_autograd::Result<Var> {
    let dt = p.dtype();
    let s = p.shape().to_vec();
    let w = weights(&s, dt, 2);
    match prog {
        "sum" => p.sum(None, false),
        "wsum" => p.mul(&w)?.sum(None, false),
        "sqwsum" => p.mul(p)?.mul(&w)?.sum(None, false),
        "twice" => p
            .mul(&w)?
            .sum(None, false)?
            .add(&p.mul(&weights(&s, dt, 5))?.sum(None, false)?),
        "hook" => {
            p.register_hook(|g| Ok(Some(g.mul(2.0)?)))?;
            p.mul(&w)?.sum(None, false)
        }
        "mm" => p
            .mm(&weights(&[s[1], 2], dt, 3))?
            .mul(&weights(&[s[0], 2], dt, 7))?
            .sum(None, false),
        "tsum" => p.t()?.mul(&w.t()?)?.sum(None, false),
        _ => panic!("program {prog}"),
    }
}

/// `base` as a tensor of `dt` viewed by `as_strided(size, stride, offset)`.
fn strided(base: &Value, dt: DType, size: &Value, stride: &Value, offset: i64) -> Tensor {
    tensor(&nums(base), dt)
        .as_strided(&ints(size), &ints(stride), Some(offset))
        .unwrap()
}

fn check_case(c: &Value, failures: &mut Vec<String>) {
    let name = c["name"].as_str().unwrap();
    let dt = dtype(c["dtype"].as_str().unwrap());
    let leaf = strided(
        &c["base"],
        dt,
        &c["size"],
        &c["stride"],
        c["offset"].as_i64().unwrap(),
    );
    let p = Var::parameter(leaf).unwrap();
    let expected = c["expected"].as_array().unwrap();
    let mut pass = 0;
    for step in c["steps"].as_array().unwrap() {
        if let Some(g) = step.get("set_grad") {
            p.set_grad(Some(strided(&g["base"], dt, &g["size"], &g["stride"], 0)))
                .unwrap();
        } else if step.get("zero_grad").is_some() {
            p.zero_grad(false).unwrap();
        } else {
            let want = &expected[pass];
            pass += 1;
            let what = format!("{name} pass {pass}");
            let before = p.grad().map(|g| host(&g));
            let result = forward(step["backward"].as_str().unwrap(), &p).and_then(|l| l.backward());
            let want_error = want.get("error").is_some();
            if result.is_err() != want_error {
                failures.push(format!("{what}: {result:?}, PyTorch error: {want_error}"));
                continue;
            }
            let Some(g) = p.grad() else {
                failures.push(format!("{what}: no .grad"));
                continue;
            };
            if want_error {
                assert_eq!(
                    before,
                    Some(host(&g)),
                    "{what}: a failed pass changed .grad"
                );
            }
            let strides: Vec<usize> = shape(&want["strides"]);
            if g.strides() != strides.as_slice() {
                failures.push(format!(
                    "{what}: strides {:?}, PyTorch's {strides:?}",
                    g.strides()
                ));
            }
            if !same(&host(&g), &nums(&want["values"])) {
                failures.push(format!(
                    "{what}: values {:?}, PyTorch's {:?}",
                    host(&g),
                    nums(&want["values"])
                ));
            }
        }
    }
}

#[test]
fn grad_layout_as_pytorch() {
    let f = fixture(FIXTURE);
    let cases = f["cases"].as_array().unwrap();
    assert!(cases.len() >= 50);
    let mut failures = Vec::new();
    for c in cases {
        check_case(c, &mut failures);
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The first `.grad` is fresh storage: changing the leaf's data afterwards
/// (or the gradient that flowed in) leaves it alone, for a transposed leaf
/// too.
#[test]
fn strided_first_grad_is_fresh_storage() {
    let base = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], DType::F32);
    let p = Var::parameter(base.as_strided(&[3, 2], &[1, 3], Some(0)).unwrap()).unwrap();
    p.sum(None, false).unwrap().backward().unwrap();
    let g = p.grad().unwrap();
    assert_eq!(g.strides(), &[1, 3]);
    assert!(!g.same_storage(p.data()));
    p.data().fill_(0.0).unwrap();
    assert_eq!(host(&g), vec![1.0; 6]);
}

/// Under DistributedDataParallel each `.grad` is a view into a bucket, laid
/// out as PyTorch's Reducer lays it out (`initialize_bucket_views`): with
/// the parameter's strides where the parameter is non-overlapping and
/// dense, else row-major. The fixture's `ddp` is one gloo rank of PyTorch
/// with `gradient_as_bucket_view=True` and no initial broadcast.
#[test]
fn ddp_bucket_views_as_pytorch() {
    use std::sync::Arc;
    use strata_autograd::distributed::{DdpConfig, DistributedDataParallel, LocalGroup};
    use strata_tensor::Device;

    let f = fixture(FIXTURE);
    let d = &f["ddp"];
    let specs = d["params"].as_array().unwrap();
    let params: Vec<Var> = specs
        .iter()
        .map(|s| {
            Var::parameter(strided(&s["base"], DType::F32, &s["size"], &s["stride"], 0)).unwrap()
        })
        .collect();
    let (_group, mut ranks) = LocalGroup::new(1, Device::Cpu).unwrap();
    let cfg = DdpConfig {
        broadcast_parameters: false,
        ..DdpConfig::default()
    };
    let ddp = DistributedDataParallel::new(&params, Arc::new(ranks.remove(0)), cfg).unwrap();
    // PyTorch's `.grad` is None before the first backward; strata's
    // constructor makes it a zeroed bucket view, which `zero_grad` clears
    // (the first gradient is then copied into the view, as in PyTorch, and
    // keeps its -0.0).
    ddp.zero_grad().unwrap();
    let mut loss: Option<Var> = None;
    for (p, s) in params.iter().zip(specs) {
        let w = weights(p.shape(), DType::F32, 2);
        let term = p
            .mul(&w)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .mul(s["weight"].as_f64().unwrap())
            .unwrap();
        loss = Some(match loss {
            None => term,
            Some(l) => l.add(&term).unwrap(),
        });
    }
    loss.unwrap().backward().unwrap();
    ddp.finish().unwrap();
    let bucket = ddp.bucket(0).unwrap();
    let mut failures = Vec::new();
    for (i, (p, want)) in params
        .iter()
        .zip(d["expected"].as_array().unwrap())
        .enumerate()
    {
        let g = p.grad().unwrap();
        assert!(g.same_storage(&bucket), "parameter {i}: not a bucket view");
        if g.strides() != shape(&want["strides"]).as_slice() {
            failures.push(format!(
                "parameter {i}: strides {:?}, PyTorch's {:?}",
                g.strides(),
                want["strides"]
            ));
        }
        if !same(&host(&g), &nums(&want["values"])) {
            failures.push(format!(
                "parameter {i}: values {:?}, PyTorch's {:?}",
                host(&g),
                want["values"]
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// An expanded parameter cannot receive the initial broadcast (PyTorch's
/// `_broadcast_coalesced` fails writing into it): a typed error before
/// anything is sent or changed, the parameters and their `.grad` as they
/// were.
#[test]
fn ddp_refuses_to_broadcast_into_an_expanded_parameter() {
    use std::sync::Arc;
    use strata_autograd::distributed::{DdpConfig, DistributedDataParallel, LocalGroup};
    use strata_tensor::Device;

    let a = Var::parameter(tensor(&[1.0, 2.0], DType::F32)).unwrap();
    a.set_grad(Some(tensor(&[5.0, 6.0], DType::F32))).unwrap();
    let e = Var::parameter(
        tensor(&[3.0, 4.0], DType::F32)
            .as_strided(&[2, 3], &[1, 0], Some(0))
            .unwrap(),
    )
    .unwrap();
    let (group, mut ranks) = LocalGroup::new(1, Device::Cpu).unwrap();
    let Err(err) = DistributedDataParallel::new(
        &[a.clone(), e.clone()],
        Arc::new(ranks.remove(0)),
        DdpConfig::default(),
    ) else {
        panic!("an expanded parameter was broadcast into");
    };
    assert!(err.to_string().contains("share memory"), "{err}");
    assert!(group.log().is_empty(), "nothing was sent");
    assert_eq!(host(&a.grad().unwrap()), vec![5.0, 6.0]);
    assert!(e.grad().is_none());
    assert_eq!(host(e.data()), vec![3.0, 3.0, 3.0, 4.0, 4.0, 4.0]);
}
