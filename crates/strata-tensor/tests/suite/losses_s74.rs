//! Session 74: `l1_loss`, `smooth_l1_loss`, `huber_loss`,
//! `binary_cross_entropy` and `binary_cross_entropy_with_logits` against
//! PyTorch 2.15's CPU (`benches/anchors/gen_losses_s74.py`): inputs and
//! targets of every dtype and of broadcastable or mismatched shapes, every
//! reduction, weights and pos_weights, parameters that are 0, negative,
//! infinite or NaN, probabilities outside [0, 1]. strata must fail where
//! PyTorch fails and otherwise give its dtype, shape and values, within
//! conformance/FORMAT.md's tolerances (log, exp and the reductions' order
//! of additions may round differently).

use crate::pytorch_fixture::{
    assert_cases_agree, dtype, fixture, gunzip, input, num, result_difference, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Result, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/losses_s74.json.gz"))));

fn call(c: &Value, device: Device) -> Result<Tensor> {
    let (x, y) = (input(&c["x"], device), input(&c["y"], device));
    let w = c.get("weight").map(|w| input(w, device));
    let pw = c.get("pos_weight").map(|w| input(w, device));
    let r = crate::hostile_calls::reduction(&c["reduction"]);
    let a = |k: &str| num(&c["args"][k]);
    match c["op"].as_str().unwrap() {
        "l1_loss" => x.l1_loss(&y, r),
        "smooth_l1_loss" => x.smooth_l1_loss(&y, r, a("beta")),
        "huber_loss" => x.huber_loss(&y, r, a("delta")),
        "binary_cross_entropy" => x.binary_cross_entropy(&y, w.as_ref(), r),
        "binary_cross_entropy_with_logits" => {
            x.binary_cross_entropy_with_logits(&y, w.as_ref(), pw.as_ref(), r)
        }
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        4_000,
        |c| {
            format!(
                "{} {} {} x {} {:?} y {} {:?}",
                c["op"],
                c["reduction"],
                c["args"],
                c["x"]["dtype"],
                c["x"]["shape"],
                c["y"]["dtype"],
                c["y"]["shape"]
            )
        },
        |c| {
            // A result computed from a less precise operand inherits its
            // tolerance (an f32 log-sigmoid inside an f64 loss).
            let operands: Vec<DType> = ["x", "y"]
                .iter()
                .map(|k| dtype(c[*k]["dtype"].as_str().unwrap()))
                .filter(|d| d.is_float())
                .collect();
            result_difference(call(c, device), c, |wd| {
                Some(
                    operands
                        .iter()
                        .copied()
                        .chain([wd])
                        .map(tolerance)
                        .fold((0.0, 0.0), |a: (f64, f64), b| (a.0.max(b.0), a.1.max(b.1))),
                )
            })
        },
    );
}

#[test]
fn losses_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn losses_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
