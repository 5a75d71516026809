//! Session 74: the gradients of the activation functions strata added
//! (`Var::leaky_relu` ... `Var::threshold`), against PyTorch 2.15's CPU
//! autograd (`benches/anchors/gen_activations_s74.py`: the calls of
//! strata-tensor's `activations_s74` fixture with f32 or f64 inputs that
//! succeed): the gradient of `sum(y * u)` for the upstream `u` whose element
//! j is `((3 j) mod 7 - 3) / 2`, within a relative 1e-4 (f32) or 1e-9 (f64)
//! of PyTorch's (exp, log1p and tanh may round differently).

use crate::math_grad_s74::{backward_with_upstream, close, f64s};
use crate::pytorch_fixture::{assert_cases_agree, fixture, gunzip, input, num, nums};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device};

static FIXTURE: LazyLock<Value> = LazyLock::new(|| {
    fixture(&gunzip(include_bytes!(
        "../data/activations_grad_s74.json.gz"
    )))
});

fn difference(c: &Value, device: Device) -> Option<String> {
    let x = Var::parameter(input(&c["x"], device)).unwrap();
    let a = |k: &str| num(&c["args"][k]);
    let y = match c["op"].as_str().unwrap() {
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
    };
    let y = match y {
        Ok(y) => y,
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
    };
    if let Some(e) = backward_with_upstream(&y, device) {
        return Some(e);
    }
    let rel = if x.dtype() == DType::F64 { 1e-9 } else { 1e-4 };
    let gx = x.grad().map(|g| f64s(&g)).unwrap_or_default();
    let mut want = nums(&c["grad_x"]);
    if matches!(c["op"].as_str().unwrap(), "hardtanh" | "relu6") {
        // PyTorch's hardtanh_backward gives 0 at a NaN input in its
        // vectorised loop and passes the gradient in its scalar loop;
        // strata gives 0 (see `Var::hardtanh`).
        for (w, xv) in want.iter_mut().zip(f64s(x.data())) {
            if xv.is_nan() {
                *w = 0.0;
            }
        }
    }
    (!close(&gx, &want, rel)).then(|| format!("gradient {gx:?}, PyTorch {want:?}"))
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        2_000,
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
fn gradients_of_the_activations_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_the_activations_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
