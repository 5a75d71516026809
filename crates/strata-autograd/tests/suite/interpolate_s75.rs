//! Session 75: `interpolate` (`Tensor` and `Var` forms) and the input's
//! gradient against PyTorch 2.15's CPU
//! (`benches/anchors/gen_interpolate_s75.py`: 1 to 3 spatial dims, every
//! mode strata has, sizes and scale factors, `align_corners`,
//! `recompute_scale_factor`, float and integer dtypes, bad option
//! combinations). strata must fail where PyTorch fails and otherwise give
//! its dtype, shape and values within conformance/FORMAT.md's tolerances,
//! and for f32/f64 inputs its gradient within a relative 1e-4 (1e-9 for
//! f64).

use crate::math_grad_s74::{backward_with_upstream, close, f64s, grads_difference};
use crate::pytorch_fixture::{
    assert_cases_agree, fixture, gunzip, input, nums, result_difference, shape, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, InterpolateMode, InterpolateOptions};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/interpolate_s75.json.gz"))));

fn options(a: &Value) -> InterpolateOptions {
    let mut o = InterpolateOptions::size(&[]);
    o.size = a.get("size").map(shape);
    o.scale_factor = a.get("scale_factor").map(nums);
    o.mode = match a["mode"].as_str().unwrap() {
        "nearest" => InterpolateMode::Nearest,
        "nearest-exact" => InterpolateMode::NearestExact,
        "linear" => InterpolateMode::Linear,
        "bilinear" => InterpolateMode::Bilinear,
        "trilinear" => InterpolateMode::Trilinear,
        "area" => InterpolateMode::Area,
        m => panic!("the generator wrote a mode this test does not know: {m}"),
    };
    o.align_corners = a.get("align_corners").and_then(Value::as_bool);
    o.recompute_scale_factor = a
        .get("recompute_scale_factor")
        .is_some_and(|v| v.as_bool() == Some(true));
    o
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let x = input(&c["x"], device);
    let opts = options(&c["args"]);
    let got = x.interpolate(&opts);
    let values = got.as_ref().ok().map(f64s);
    if let Some(d) = result_difference(got, c, |dt| dt.is_float().then(|| tolerance(dt))) {
        return Some(d);
    }
    c.get("grad_x")?;
    let xv = Var::parameter(x).unwrap();
    let y = match xv.interpolate(&opts) {
        Ok(y) => y,
        Err(e) => return Some(format!("Var form failed ({e})")),
    };
    if !close(&f64s(y.data()), &values.unwrap(), 0.0) {
        return Some("the Var form's values differ from the Tensor form's".into());
    }
    if let Some(e) = backward_with_upstream(&y, device) {
        return Some(e);
    }
    let rel = if xv.dtype() == DType::F64 { 1e-9 } else { 1e-4 };
    grads_difference(c, &[(Some(&xv), "grad_x")], rel)
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        1_400,
        |c| format!("{} x {} {}", c["args"], c["x"]["dtype"], c["x"]["shape"]),
        |c| difference(c, device),
    );
}

#[test]
fn interpolate_matches_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn interpolate_matches_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
