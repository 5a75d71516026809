//! Session 76: `F.unfold` and `F.fold` (`Tensor::im2col`/`col2im` and
//! their `Var` forms) and the input's gradient against PyTorch 2.15's CPU
//! (`benches/anchors/gen_fold_s76.py`: 2-D to 5-D images and 1-D to 4-D
//! columns with empty dims now and then, int-or-pair options with zeros
//! and paddings past half the kernel, block counts that do not match,
//! f32/f64/f16/bf16/bool and the i64 PyTorch refuses). strata must fail
//! where PyTorch fails and otherwise give its dtype, shape and values
//! (small integers: exact), and for f32/f64 inputs its gradient.

use crate::math_grad_s74::one_input_difference;
use crate::pytorch_fixture::{assert_cases_agree, fixture, gunzip, tolerance};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{Device, FoldOptions, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/fold_s76.json.gz"))));

/// An int-or-pair argument.
fn pair(v: &Value) -> Vec<usize> {
    match v.as_array() {
        Some(a) => a.iter().map(|x| x.as_u64().unwrap() as usize).collect(),
        None => vec![v.as_u64().unwrap() as usize],
    }
}

fn options(c: &Value) -> FoldOptions {
    let a = &c["args"];
    FoldOptions::new(&pair(&a["kernel_size"]))
        .dilation(&pair(&a["dilation"]))
        .padding(&pair(&a["padding"]))
        .stride(&pair(&a["stride"]))
}

fn tensor_form(c: &Value, x: &Tensor) -> strata_tensor::Result<Tensor> {
    match c["op"].as_str().unwrap() {
        "unfold" => x.im2col(&options(c)),
        _ => x.col2im(&pair(&c["args"]["output_size"]), &options(c)),
    }
}

fn var_form(c: &Value, x: &Var) -> strata_autograd::Result<Var> {
    match c["op"].as_str().unwrap() {
        "unfold" => x.im2col(&options(c)),
        _ => x.col2im(&pair(&c["args"]["output_size"]), &options(c)),
    }
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let rel = if c["x"]["dtype"] == "f64" {
        1e-12
    } else {
        1e-6
    };
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
        1_500,
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
fn unfold_and_fold_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn unfold_and_fold_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
