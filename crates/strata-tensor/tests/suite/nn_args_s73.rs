//! Session 73: nn ops, masked ops, `where` and `clamp` with hostile shapes
//! and float arguments against PyTorch 2.15
//! (`benches/anchors/gen_nn_args_s73.py`, which says what it draws and what
//! it leaves out): strata must fail where PyTorch fails and otherwise give
//! PyTorch's shapes and values (within f32 rounding), on the CPU and
//! (ignored unless `--include-ignored`) on `cuda:0`. The probe found one
//! difference, fixed: `nll_loss` (and `cross_entropy` with class-index
//! targets) of an input of more than two dims refused a class weight of C
//! elements that is not `[C]` (a 0-d weight of one class), which PyTorch's
//! `nll_loss2d` path takes (`class_weight`).

use crate::hostile_calls::{
    assert_all_agree, gpu, half_pattern, mask_pattern, reduction, sizes, Match,
};
use crate::pytorch_fixture::{fixture, gunzip, ints, num};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{CrossEntropyArgs, Device, Result, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/nn_args_s73.json.gz"))));

/// The generator's values from `start`, of the shape `shape` (a list).
fn values(shape: &Value, start: i64, device: Device) -> Tensor {
    half_pattern(&ints(shape), start, device)
}

/// The generator's mask from `start`, of the shape `shape` (a list).
fn mask(shape: &Value, start: i64, device: Device) -> Tensor {
    mask_pattern(&ints(shape), start, device)
}

/// An optional tensor argument: `null` or a shape of values from `start`
/// on (their absolute values where `abs`).
fn opt_values(v: &Value, start: i64, abs: bool, dev: Device) -> Option<Tensor> {
    (!v.is_null()).then(|| {
        let t = values(v, start, dev);
        if abs {
            t.abs().unwrap()
        } else {
            t
        }
    })
}

fn opt_num(v: &Value) -> Option<f64> {
    (!v.is_null()).then(|| num(v))
}

fn call(op: &str, x: &Tensor, a: &[Value]) -> Result<Tensor> {
    let dev = x.device();
    match op {
        "layer_norm" => {
            let ns = sizes(&ints(&a[0]));
            let w = opt_values(&a[1], 1, false, dev);
            let b = opt_values(&a[2], 2, false, dev);
            x.layer_norm(&ns, w.as_ref(), b.as_ref(), num(&a[3]))
        }
        "cross_entropy_probs" => {
            let t = values(&a[0], 3, dev).abs()?;
            let w = opt_values(&a[1], 1, true, dev);
            x.cross_entropy(
                &t,
                CrossEntropyArgs {
                    weight: w.as_ref(),
                    ignore_index: -100,
                    reduction: reduction(&a[3]),
                    label_smoothing: num(&a[2]),
                },
            )
        }
        "nll_loss_weight" => {
            let t = Tensor::from_slice(&ints(&a[1]), &sizes(&ints(&a[0])), dev)?;
            let w = values(&a[2], 1, dev).abs()?;
            x.nll_loss(&t, Some(&w), a[3].as_i64().unwrap(), reduction(&a[4]))
        }
        "mse_loss" => {
            let t = values(&a[0], 1, dev);
            let w = opt_values(&a[1], 2, true, dev);
            x.mse_loss(&t, reduction(&a[2]), w.as_ref())
        }
        "masked_fill" => x.masked_fill(&mask(&a[0], 0, dev), num(&a[1])),
        "masked_scatter" => x.masked_scatter(&mask(&a[0], 0, dev), &values(&a[1], 4, dev)),
        "masked_select" => x.masked_select(&mask(&a[0], 0, dev)),
        "where" => {
            let (c, y) = (mask(&a[0], 0, dev), values(&a[1], 1, dev));
            if a[2].is_array() {
                Tensor::where_cond(&c, &y, &values(&a[2], 2, dev))
            } else {
                Tensor::where_cond(&c, &y, num(&a[2]))
            }
        }
        "clamp" => x.clamp(opt_num(&a[0]), opt_num(&a[1])),
        "clamp_tensor" => {
            let lo = opt_values(&a[0], 1, false, dev);
            let hi = opt_values(&a[1], 2, false, dev);
            x.clamp_tensor(lo.as_ref(), hi.as_ref())
        }
        "dropout" => x.dropout(num(&a[0]), a[1].as_bool().unwrap(), 0),
        other => panic!("the generator wrote an op this test does not know: {other}"),
    }
}

fn nn_ops_on(device: Device) {
    assert_all_agree(&FIXTURE, 15_000, Match::Relative(1e-5), |c| {
        let x = values(&c["shape"], 0, device);
        call(c["op"].as_str().unwrap(), &x, c["args"].as_array().unwrap()).map(|t| vec![t])
    });
}

#[test]
fn nn_ops_take_hostile_arguments_as_pytorch() {
    nn_ops_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn nn_ops_take_hostile_arguments_as_pytorch_on_a_gpu() {
    nn_ops_on(gpu());
}

/// The in-place form of masked_fill and clamp (`None` for the other ops):
/// on `x`, which it changes where it succeeds.
fn call_in_place(op: &str, x: &Tensor, a: &[Value]) -> Option<Result<Tensor>> {
    let dev = x.device();
    Some(match op {
        "masked_fill" => x.masked_fill_(&mask(&a[0], 0, dev), num(&a[1])),
        "clamp" => x.clamp_(opt_num(&a[0]), opt_num(&a[1])),
        "clamp_tensor" => {
            let lo = opt_values(&a[0], 1, false, dev);
            let hi = opt_values(&a[1], 2, false, dev);
            x.clamp_tensor_(lo.as_ref(), hi.as_ref())
        }
        _ => return None,
    })
}

/// PyTorch's masked_fill and clamp are the in-place op on a copy, and the
/// in-place op cannot grow self: strata's in-place forms give PyTorch's
/// values in self where its result has self's shape, and otherwise fail
/// with self unchanged.
#[test]
fn in_place_masked_fill_and_clamp_agree_and_change_nothing_when_they_fail() {
    let mut checked = 0;
    let mut bad = Vec::new();
    for c in FIXTURE["cases"].as_array().unwrap() {
        let (op, a) = (c["op"].as_str().unwrap(), c["args"].as_array().unwrap());
        let x = values(&c["shape"], 0, Device::Cpu);
        let Some(got) = call_in_place(op, &x, a) else {
            continue;
        };
        checked += 1;
        let want = c.get("results").map(|r| &r[0]);
        let fits = want.is_some_and(|w| ints(&w["shape"]) == ints(&c["shape"]));
        let now: Vec<f64> = x
            .to_dtype(strata_tensor::DType::F64)
            .unwrap()
            .to_vec()
            .unwrap();
        let why = match (got, fits) {
            (Ok(_), true) => {
                let wd: Vec<f64> = want.unwrap()["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(num)
                    .collect();
                let same = now.len() == wd.len()
                    && now
                        .iter()
                        .zip(&wd)
                        .all(|(g, w)| (g.is_nan() && w.is_nan()) || g == w);
                (!same).then(|| format!("self is {now:?}, PyTorch {wd:?}"))
            }
            (Ok(_), false) => Some("took it, PyTorch's in-place op fails".to_string()),
            (Err(e), true) => Some(format!("failed ({e}), PyTorch did not")),
            (Err(_), false) => {
                let before: Vec<f64> = values(&c["shape"], 0, Device::Cpu)
                    .to_dtype(strata_tensor::DType::F64)
                    .unwrap()
                    .to_vec()
                    .unwrap();
                (now != before).then(|| format!("failed and changed self to {now:?}"))
            }
        };
        if let Some(w) = why {
            bad.push(format!("{op} {} {}: {w}", c["shape"], c["args"]));
        }
    }
    assert!(checked > 3_000, "{checked} in-place calls");
    assert!(
        bad.is_empty(),
        "{} differ, e.g.:\n{}",
        bad.len(),
        bad[..bad.len().min(10)].join("\n")
    );
}
