//! Session 74: the activation functions of `torch.nn.functional` strata
//! added (`Tensor::leaky_relu` ... `Tensor::threshold`), against PyTorch
//! 2.15's CPU (`benches/anchors/gen_activations_s74.py`): every dtype, edge
//! values, transposed inputs, parameters that are 0, negative, huge,
//! infinite or NaN. strata must fail where PyTorch fails and otherwise give
//! its dtype, shape and values: bit for bit for leaky_relu, hardtanh, relu6
//! and threshold, within conformance/FORMAT.md's tolerances for the others,
//! whose exp, log1p and tanh (SLEEF's in PyTorch) may round differently.

use crate::math_s74::{input, tolerance};
use crate::pytorch_fixture::{dtype, fixture, gunzip, num, nums, shape};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Result, Tensor};

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

fn close(got: f64, want: f64, tol: Option<(f64, f64)>) -> bool {
    if got == want || (got.is_nan() && want.is_nan()) {
        return true;
    }
    match tol {
        Some((r, a)) if got.is_finite() && want.is_finite() => {
            (got - want).abs() <= a + r * want.abs()
        }
        _ => false,
    }
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let got = call(c, &input(&c["x"], device));
    let Some(want) = c.get("result") else {
        return got.ok().map(|t| {
            format!(
                "gave {:?} {:?}, PyTorch failed: {}",
                t.dtype(),
                t.shape(),
                c["error"]
            )
        });
    };
    let t = match got {
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(t) => t,
    };
    let wd = dtype(want["dtype"].as_str().unwrap());
    let ws = shape(&want["shape"]);
    let g = t
        .to_dtype(DType::F64)
        .and_then(|t| t.contiguous())
        .and_then(|t| t.to_vec::<f64>())
        .unwrap();
    let w = nums(&want["data"]);
    let exact = matches!(
        c["op"].as_str().unwrap(),
        "leaky_relu" | "hardtanh" | "relu6" | "threshold"
    );
    let tol = (!exact).then(|| tolerance(wd));
    let ok = t.dtype() == wd
        && t.shape() == ws.as_slice()
        && g.len() == w.len()
        && g.iter().zip(&w).all(|(&a, &b)| close(a, b, tol));
    (!ok).then(|| {
        format!(
            "gave {:?} {:?} {g:?}, PyTorch {wd:?} {ws:?} {w:?}",
            t.dtype(),
            t.shape()
        )
    })
}

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() > 5_000, "{} cases", cases.len());
    let bad: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            difference(c, device).map(|w| {
                format!(
                    "case {i}: {} {} x {} {}: {w}",
                    c["op"], c["args"], c["x"]["dtype"], c["x"]["values"]
                )
            })
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} differ, e.g.:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(12)].join("\n")
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
