//! Session 74: `rms_norm` and `group_norm` (`Tensor` and `Var` forms) and
//! their gradients for the input, weight and bias, against PyTorch 2.15's
//! CPU (`benches/anchors/gen_norms_s74.py`: f32, f64, f16, bf16 and integer
//! inputs, empty batches, mismatched shapes and group counts, eps 0 and
//! negative). strata must fail where PyTorch fails and otherwise give its
//! dtype, shape and values within conformance/FORMAT.md's tolerances, and
//! gradients within a relative 1e-4 (f32) or 1e-9 (f64). Left out of the
//! value comparison: `group_norm` with groups of one or two values, whose
//! results are rounding noise around 0 or ±1 (see `difference`).

use crate::math_grad_s74::{backward_with_upstream, close, f64s, grads_difference};
use crate::pytorch_fixture::{
    assert_cases_agree, dtype, fixture, gunzip, input, num, result_difference, shape, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/norms_s74.json.gz"))));

fn args(c: &Value) -> (Vec<usize>, Option<f64>, usize) {
    let a = &c["args"];
    let ns = a.get("normalized_shape").map(shape).unwrap_or_default();
    let eps = a.get("eps").filter(|e| !e.is_null()).map(num);
    let groups = a
        .get("num_groups")
        .map_or(0, |g| g.as_u64().unwrap() as usize);
    (ns, eps, groups)
}

fn forward(c: &Value, device: Device) -> strata_tensor::Result<Tensor> {
    let x = input(&c["x"], device);
    let w = c.get("weight").map(|w| input(w, device));
    let b = c.get("bias").map(|b| input(b, device));
    let (ns, eps, groups) = args(c);
    match c["op"].as_str().unwrap() {
        "rms_norm" => x.rms_norm(&ns, w.as_ref(), eps),
        _ => x.group_norm(groups, w.as_ref(), b.as_ref(), eps.unwrap()),
    }
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let got = forward(c, device);
    if let (Some(want), Ok(t), true) = (
        c.get("result"),
        &got,
        values_per_group(c).is_some_and(|n| n <= 2),
    ) {
        // Groups of one or two values: the normalised values are 0 or ±1
        // up to rounding noise, and PyTorch's noise is its fused
        // `x * scale + shift` (an FMA: the rounding error of `scale * mean`),
        // which strata's separate products do not reproduce. Only the dtype
        // and shape are compared.
        let wd = dtype(want["dtype"].as_str().unwrap());
        return (t.dtype() != wd || t.shape() != shape(&want["shape"]).as_slice())
            .then(|| format!("gave {:?} {:?}", t.dtype(), t.shape()));
    }
    if let Some(d) = result_difference(got, c, |wd| Some(tolerance(wd))) {
        return Some(d);
    }
    // Only f32/f64 cases hold gradients.
    c.get("grad_x")?;
    // The Var form: the same values, and PyTorch's gradients.
    let x = Var::parameter(input(&c["x"], device)).unwrap();
    let w = c
        .get("weight")
        .map(|w| Var::parameter(input(w, device)).unwrap());
    let b = c
        .get("bias")
        .map(|b| Var::parameter(input(b, device)).unwrap());
    let (ns, eps, groups) = args(c);
    let y = match c["op"].as_str().unwrap() {
        "rms_norm" => x.rms_norm(&ns, w.as_ref(), eps),
        _ => x.group_norm(groups, w.as_ref(), b.as_ref(), eps.unwrap()),
    };
    let y = match y {
        Ok(y) => y,
        Err(e) => return Some(format!("Var form failed ({e})")),
    };
    let g = f64s(&forward(c, device).unwrap());
    if f64s(y.data()) != g && !close(&f64s(y.data()), &g, 0.0) {
        return Some("the Var form's values differ from the Tensor form's".into());
    }
    if let Some(e) = backward_with_upstream(&y, device) {
        return Some(e);
    }
    let rel = if x.dtype() == DType::F64 { 1e-9 } else { 1e-4 };
    grads_difference(
        c,
        &[
            (Some(&x), "grad_x"),
            (w.as_ref(), "grad_weight"),
            (b.as_ref(), "grad_bias"),
        ],
        rel,
    )
}

/// How many values each group of a `group_norm` case normalises.
fn values_per_group(c: &Value) -> Option<usize> {
    let g = c["args"].get("num_groups")?.as_u64()? as usize;
    let sh = shape(&c["x"]["shape"]);
    (sh.len() >= 2 && g > 0).then(|| sh[1] / g * sh[2..].iter().product::<usize>())
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        2_500,
        |c| {
            format!(
                "{} {} x {} {:?} (values per group {:?})",
                c["op"],
                c["args"],
                c["x"]["dtype"],
                c["x"]["shape"],
                values_per_group(c)
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn rms_norm_and_group_norm_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn rms_norm_and_group_norm_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
