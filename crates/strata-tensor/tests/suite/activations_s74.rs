//! Session 74: the activation functions of `torch.nn.functional` strata
//! added (`Tensor::leaky_relu` ... `Tensor::threshold`), against PyTorch
//! 2.15's CPU (`benches/anchors/gen_activations_s74.py`): every dtype, edge
//! values, transposed inputs, parameters that are 0, negative, huge,
//! infinite or NaN. strata must fail where PyTorch fails and otherwise give
//! its dtype, shape and values: bit for bit for leaky_relu, hardtanh, relu6
//! and threshold, within conformance/FORMAT.md's tolerances for the others,
//! whose exp, log1p and tanh (SLEEF's in PyTorch) may round differently.

use crate::pytorch_fixture::{
    assert_cases_agree, fixture, gunzip, input, num, result_difference, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{Device, Result, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/activations_s74.json.gz"))));

/// strata's answer to case `c` on `device`.
pub fn call(c: &Value, x: &Tensor) -> Result<Tensor> {
    let a = |k: &str| num(&c["args"][k]);
    match c["op"].as_str().unwrap() {
        "leaky_relu" => x.leaky_relu(a("negative_slope")),
        "elu" => x.elu(a("alpha"), a("scale"), a("input_scale")),
        "selu" => x.selu(),
        "celu" => x.celu(a("alpha")),
        "softplus" => x.softplus(a("beta"), a("threshold")),
        "hardtanh" => x.hardtanh(a("min_val"), a("max_val")),
        "relu6" => x.relu6(),
        "hardsigmoid" => x.hardsigmoid(),
        "hardswish" => x.hardswish(),
        "mish" => x.mish(),
        "logsigmoid" => x.logsigmoid(),
        "softsign" => x.softsign(),
        "threshold" => x.threshold(a("threshold"), a("value")),
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        5_000,
        |c| {
            format!(
                "{} {} x {} {}",
                c["op"], c["args"], c["x"]["dtype"], c["x"]["values"]
            )
        },
        |c| {
            let exact = matches!(
                c["op"].as_str().unwrap(),
                "leaky_relu" | "hardtanh" | "relu6" | "threshold"
            );
            result_difference(call(c, &input(&c["x"], device)), c, |wd| {
                (!exact).then(|| tolerance(wd))
            })
        },
    );
}

#[test]
fn activations_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn activations_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
