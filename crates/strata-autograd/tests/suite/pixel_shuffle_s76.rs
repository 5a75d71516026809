//! Session 76: `pixel_shuffle` and `pixel_unshuffle` (`Tensor` and `Var`
//! forms) and the input's gradient against PyTorch 2.15's CPU
//! (`benches/anchors/gen_pixel_shuffle_s76.py`: 2-D to 5-D inputs with
//! empty dims now and then, channels or sizes that do not divide, factors
//! 0 and -1, f32/f64/bf16/i64/bool). strata must fail where PyTorch fails
//! and otherwise give its dtype, shape and values, and for f32/f64 inputs
//! its gradient (a permutation of the upstream gradient: exact).

use crate::math_grad_s74::one_input_difference;
use crate::pytorch_fixture::{assert_cases_agree, fixture, gunzip, tolerance};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/pixel_shuffle_s76.json.gz"))));

fn factor(c: &Value) -> i64 {
    c["args"]["factor"].as_i64().unwrap()
}

fn tensor_form(c: &Value, x: &Tensor) -> strata_tensor::Result<Tensor> {
    match c["op"].as_str().unwrap() {
        "pixel_shuffle" => x.pixel_shuffle(factor(c)),
        _ => x.pixel_unshuffle(factor(c)),
    }
}

fn var_form(c: &Value, x: &Var) -> strata_autograd::Result<Var> {
    match c["op"].as_str().unwrap() {
        "pixel_shuffle" => x.pixel_shuffle(factor(c)),
        _ => x.pixel_unshuffle(factor(c)),
    }
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let rel = 0.0;
    one_input_difference(
        c,
        device,
        |x| tensor_form(c, x),
        |x| var_form(c, x),
        |dt| Some(tolerance(dt)),
        rel,
    )
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        990,
        |c| {
            format!(
                "{} {} x {} {}",
                c["op"], c["args"], c["x"]["dtype"], c["x"]["shape"]
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn pixel_shuffle_and_unshuffle_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn pixel_shuffle_and_unshuffle_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
