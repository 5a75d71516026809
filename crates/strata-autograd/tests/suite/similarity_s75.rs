//! Session 75: `cosine_similarity` and `pairwise_distance` (`Tensor` and
//! `Var` forms) and their gradients against PyTorch 2.15's CPU
//! (`benches/anchors/gen_similarity_s75.py`: broadcast and mismatched
//! shapes, mixed and integer dtypes, zero vectors, eps that clamps, p-norms
//! of 0.5 to inf). strata must fail where PyTorch fails and otherwise give
//! its dtype, shape and values within conformance/FORMAT.md's tolerances,
//! and for f32/f64 operands its gradients within a relative 1e-4 (1e-9 when
//! both are f64).

use crate::math_grad_s74::{backward_with_upstream, close, f64s, grads_difference};
use crate::pytorch_fixture::{
    assert_cases_agree, fixture, gunzip, input, num, result_difference, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/similarity_s75.json.gz"))));

fn tensor_form(c: &Value, x: &Tensor, y: &Tensor) -> strata_tensor::Result<Tensor> {
    let a = &c["args"];
    match c["op"].as_str().unwrap() {
        "cosine_similarity" => x.cosine_similarity(y, a["dim"].as_i64().unwrap(), num(&a["eps"])),
        _ => x.pairwise_distance(
            y,
            num(&a["p"]),
            num(&a["eps"]),
            a["keepdim"].as_bool().unwrap(),
        ),
    }
}

fn var_form(c: &Value, x: &Var, y: &Var) -> strata_autograd::Result<Var> {
    let a = &c["args"];
    match c["op"].as_str().unwrap() {
        "cosine_similarity" => x.cosine_similarity(y, a["dim"].as_i64().unwrap(), num(&a["eps"])),
        _ => x.pairwise_distance(
            y,
            num(&a["p"]),
            num(&a["eps"]),
            a["keepdim"].as_bool().unwrap(),
        ),
    }
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let (x, y) = (input(&c["x"], device), input(&c["y"], device));
    let got = tensor_form(c, &x, &y);
    let values = got.as_ref().ok().map(f64s);
    // The tolerance of the less precise operand: an f32 operand's unit
    // vector carries f32 rounding into an f64 result (which a GPU's
    // division rounds otherwise than a CPU's).
    let least = [x.dtype(), y.dtype()]
        .into_iter()
        .filter(|d| d.is_float())
        .min_by_key(|d| d.size());
    if let Some(d) = result_difference(got, c, |dt| Some(tolerance(least.unwrap_or(dt)))) {
        return Some(d);
    }
    c.get("grad_x")?;
    let (xv, yv) = (Var::parameter(x).unwrap(), Var::parameter(y).unwrap());
    let out = match var_form(c, &xv, &yv) {
        Ok(o) => o,
        Err(e) => return Some(format!("Var form failed ({e})")),
    };
    // (Var::norm and Tensor::vector_norm may round a p-norm of a 0-d
    // tensor differently: |x|^p and its p-th root, or |x|.)
    if !close(&f64s(out.data()), &values.unwrap(), 1e-6) {
        return Some("the Var form's values differ from the Tensor form's".into());
    }
    if let Some(e) = backward_with_upstream(&out, device) {
        return Some(e);
    }
    let all_f64 = xv.dtype() == DType::F64 && yv.dtype() == DType::F64;
    let rel = if all_f64 { 1e-9 } else { 1e-4 };
    grads_difference(c, &[(Some(&xv), "grad_x"), (Some(&yv), "grad_y")], rel)
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        1_400,
        |c| {
            format!(
                "{} {} x {} {} y {} {}",
                c["op"],
                c["args"],
                c["x"]["dtype"],
                c["x"]["shape"],
                c["y"]["dtype"],
                c["y"]["shape"]
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn cosine_similarity_and_pairwise_distance_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn cosine_similarity_and_pairwise_distance_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
