//! Session 75: `interpolate` (`Tensor` and `Var` forms) and the input's
//! gradient against PyTorch 2.15's CPU
//! (`benches/anchors/gen_interpolate_s75.py`: 1 to 3 spatial dims, every
//! mode strata has, sizes and scale factors, `align_corners`,
//! `recompute_scale_factor`, float and integer dtypes, bad option
//! combinations). strata must fail where PyTorch fails and otherwise give
//! its dtype, shape and values within conformance/FORMAT.md's tolerances,
//! and for f32/f64 inputs its gradient within a relative 1e-4 (1e-9 for
//! f64).

use crate::math_grad_s74::one_input_difference;
use crate::pytorch_fixture::{assert_cases_agree, fixture, gunzip, nums, shape, tolerance};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{Device, InterpolateMode, InterpolateOptions};

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
    let opts = options(&c["args"]);
    let rel = if c["x"]["dtype"] == "f64" { 1e-9 } else { 1e-4 };
    one_input_difference(
        c,
        device,
        |x| x.interpolate(&opts),
        |x| x.interpolate(&opts),
        |dt| dt.is_float().then(|| tolerance(dt)),
        rel,
    )
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
