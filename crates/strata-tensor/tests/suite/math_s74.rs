//! Session 74: the element-wise math of PyTorch that strata lacked (tan and
//! the other inverse and hyperbolic functions, log2, log10, exp2, erfc, the
//! roundings, frac, square, the value-class predicates, nan_to_num, the
//! logical ops, atan2, remainder and fmod), against PyTorch 2.15's CPU
//! (`benches/anchors/gen_math_s74.py`): every dtype, edge values, transposed
//! inputs, broadcasting tensor and scalar operands, in place. strata must
//! fail where PyTorch fails and otherwise give its dtype, shape and values:
//! bit for bit, but for the transcendental functions, which may differ in
//! the last bits (conformance/FORMAT.md's tolerances per dtype; the C
//! library and SLEEF round differently).

use crate::pytorch_fixture::{
    assert_cases_agree, fixture, gunzip, input, num, result_difference, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{Device, Result, Scalar, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/math_s74.json.gz"))));

/// The float results that may differ from PyTorch's in the last bits.
fn transcendental(op: &str) -> bool {
    matches!(
        op,
        "tan"
            | "asin"
            | "acos"
            | "atan"
            | "sinh"
            | "cosh"
            | "asinh"
            | "acosh"
            | "atanh"
            | "log2"
            | "log10"
            | "exp2"
            | "erfc"
            | "atan2"
    )
}

/// strata's answer to case `c` on `device`: the result, or self after an
/// in-place call.
fn call(c: &Value, device: Device) -> Result<Tensor> {
    let op = c["op"].as_str().unwrap();
    let x = input(&c["x"], device);
    let inplace = c["inplace"].as_bool().unwrap();
    let target = if inplace { x.deep_clone()? } else { x };
    let other_tensor = c.get("other").map(|o| input(o, device));
    let other_scalar = c.get("scalar").map(|s| match s["kind"].as_str().unwrap() {
        "int" => Scalar::Int(s["value"].as_i64().unwrap()),
        "bool" => Scalar::Bool(s["value"].as_bool().unwrap()),
        _ => Scalar::Float(num(&s["value"])),
    });
    macro_rules! binary {
        ($m:ident) => {
            match (&other_tensor, other_scalar) {
                (Some(o), _) => target.$m(o),
                (None, Some(s)) => target.$m(s),
                _ => panic!("{op} without a second operand"),
            }
        };
    }
    let arg = |k: &str| c["args"].get(k).map(num);
    let y = match (op, inplace) {
        ("tan", false) => target.tan(),
        ("tan", true) => target.tan_(),
        ("asin", false) => target.asin(),
        ("asin", true) => target.asin_(),
        ("acos", false) => target.acos(),
        ("acos", true) => target.acos_(),
        ("atan", false) => target.atan(),
        ("atan", true) => target.atan_(),
        ("sinh", false) => target.sinh(),
        ("sinh", true) => target.sinh_(),
        ("cosh", false) => target.cosh(),
        ("cosh", true) => target.cosh_(),
        ("asinh", false) => target.asinh(),
        ("asinh", true) => target.asinh_(),
        ("acosh", false) => target.acosh(),
        ("acosh", true) => target.acosh_(),
        ("atanh", false) => target.atanh(),
        ("atanh", true) => target.atanh_(),
        ("log2", false) => target.log2(),
        ("log2", true) => target.log2_(),
        ("log10", false) => target.log10(),
        ("log10", true) => target.log10_(),
        ("exp2", false) => target.exp2(),
        ("exp2", true) => target.exp2_(),
        ("erfc", false) => target.erfc(),
        ("erfc", true) => target.erfc_(),
        ("floor", false) => target.floor(),
        ("floor", true) => target.floor_(),
        ("ceil", false) => target.ceil(),
        ("ceil", true) => target.ceil_(),
        ("round", false) => target.round(),
        ("round", true) => target.round_(),
        ("trunc", false) => target.trunc(),
        ("trunc", true) => target.trunc_(),
        ("frac", false) => target.frac(),
        ("frac", true) => target.frac_(),
        ("square", false) => target.square(),
        ("square", true) => target.square_(),
        ("isnan", _) => target.isnan(),
        ("isinf", _) => target.isinf(),
        ("isfinite", _) => target.isfinite(),
        ("isposinf", _) => target.isposinf(),
        ("isneginf", _) => target.isneginf(),
        ("logical_not", _) => target.logical_not(),
        ("nan_to_num", false) => target.nan_to_num(arg("nan"), arg("posinf"), arg("neginf")),
        ("nan_to_num", true) => target.nan_to_num_(arg("nan"), arg("posinf"), arg("neginf")),
        ("atan2", false) => binary!(atan2),
        ("atan2", true) => binary!(atan2_),
        ("remainder", false) => binary!(remainder),
        ("remainder", true) => binary!(remainder_),
        ("fmod", false) => binary!(fmod),
        ("fmod", true) => binary!(fmod_),
        ("logical_and", _) => target.logical_and(other_tensor.as_ref().unwrap()),
        ("logical_or", _) => target.logical_or(other_tensor.as_ref().unwrap()),
        ("logical_xor", _) => target.logical_xor(other_tensor.as_ref().unwrap()),
        _ => panic!("the generator wrote an op this test does not know: {op}"),
    }?;
    Ok(if inplace { target } else { y })
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        8_000,
        |c| {
            format!(
                "{} {} x {} {:?} other {} {}",
                c["op"],
                if c["inplace"].as_bool().unwrap() {
                    "in place"
                } else {
                    ""
                },
                c["x"]["dtype"],
                c["x"]["values"].as_array().map(|v| v.len()),
                c.get("other")
                    .map_or("-".into(), |o| o["dtype"].to_string()),
                c.get("scalar")
                    .map_or("-".into(), |s| s["value"].to_string()),
            )
        },
        |c| {
            let op = c["op"].as_str().unwrap();
            result_difference(call(c, device), c, |wd| {
                transcendental(op).then(|| tolerance(wd))
            })
        },
    );
}

#[test]
fn element_wise_math_matches_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn element_wise_math_matches_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
