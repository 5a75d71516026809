//! Session 74: `kl_div` (every reduction, `"batchmean"` as
//! `kl_div_batchmean`, `log_target` or not) and `normalize`, `Tensor` and
//! `Var` forms and their gradients, against PyTorch 2.15's CPU
//! (`benches/anchors/gen_kl_normalize_s74.py`: targets with zeros,
//! log-probabilities of -inf and NaN, broadcast shapes, rows of zeros, any p,
//! dims out of range). strata must fail where PyTorch fails and otherwise
//! give its dtype, shape and values within conformance/FORMAT.md's
//! tolerances (of the least precise operand), and gradients within a
//! relative 1e-4 (1e-9 where every operand is f64).

use crate::math_grad_s74::{backward_with_upstream, grads_difference};
use crate::pytorch_fixture::{
    assert_cases_agree, dtype, fixture, gunzip, input, num, result_difference, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Reduction, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/kl_normalize_s74.json.gz"))));

/// The reduction a `kl_div` case names (`None` for `"batchmean"`).
fn reduction(c: &Value) -> Option<Reduction> {
    match c["args"]["reduction"].as_str().unwrap() {
        "none" => Some(Reduction::None),
        "sum" => Some(Reduction::Sum),
        "mean" => Some(Reduction::Mean),
        _ => None,
    }
}

fn forward(c: &Value, device: Device) -> strata_tensor::Result<Tensor> {
    let x = input(&c["x"], device);
    let a = &c["args"];
    if c["op"] == "normalize" {
        return x.normalize(num(&a["p"]), a["dim"].as_i64().unwrap(), num(&a["eps"]));
    }
    let y = input(&c["y"], device);
    let log_target = a["log_target"].as_bool().unwrap();
    match reduction(c) {
        Some(r) => x.kl_div(&y, r, log_target),
        None => x.kl_div_batchmean(&y, log_target),
    }
}

fn difference(c: &Value, device: Device) -> Option<String> {
    // The loosest tolerance of the operands and the result: a result
    // computed from a less precise operand inherits its tolerance.
    let operands: Vec<DType> = ["x", "y"]
        .iter()
        .filter_map(|k| c.get(*k))
        .map(|o| dtype(o["dtype"].as_str().unwrap()))
        .collect();
    let loosest = |wd: DType| {
        operands
            .iter()
            .copied()
            .chain([wd])
            .map(tolerance)
            .fold((0.0, 0.0), |a: (f64, f64), b| (a.0.max(b.0), a.1.max(b.1)))
    };
    if let Some(d) = result_difference(forward(c, device), c, |wd| Some(loosest(wd))) {
        return Some(d);
    }
    // Only f32/f64 cases hold gradients.
    c.get("grad_x")?;
    let x = Var::parameter(input(&c["x"], device)).unwrap();
    let y = c
        .get("y")
        .map(|y| Var::parameter(input(y, device)).unwrap());
    let args = &c["args"];
    let out = if c["op"] == "normalize" {
        x.normalize(
            num(&args["p"]),
            args["dim"].as_i64().unwrap(),
            num(&args["eps"]),
        )
    } else {
        let (y, lt) = (y.as_ref().unwrap(), args["log_target"].as_bool().unwrap());
        match reduction(c) {
            Some(r) => x.kl_div(y, r, lt),
            None => x.kl_div_batchmean(y, lt),
        }
    };
    let out = match out {
        Ok(o) => o,
        Err(e) => return Some(format!("Var form failed ({e})")),
    };
    if let Some(e) = backward_with_upstream(&out, device) {
        return Some(e);
    }
    let all_f64 = x.dtype() == DType::F64 && y.as_ref().is_none_or(|y| y.dtype() == DType::F64);
    let rel = if all_f64 { 1e-9 } else { 1e-4 };
    grads_difference(c, &[(Some(&x), "grad_x"), (y.as_ref(), "grad_y")], rel)
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        2_500,
        |c| {
            format!(
                "{} {} x {} {}",
                c["op"], c["args"], c["x"]["dtype"], c["x"]["values"]
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn kl_div_and_normalize_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn kl_div_and_normalize_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
