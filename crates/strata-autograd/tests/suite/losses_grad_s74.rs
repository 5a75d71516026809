//! Session 74: the gradients of `Var::l1_loss`, `smooth_l1_loss`,
//! `huber_loss`, `binary_cross_entropy` and
//! `binary_cross_entropy_with_logits` for the input and the target, against
//! PyTorch 2.15's CPU autograd (`benches/anchors/gen_losses_s74.py`: the
//! calls of strata-tensor's `losses_s74` fixture with f32 or f64 operands
//! that succeed), for the upstream gradient whose element j is
//! `((3 j) mod 7 - 3) / 2`, within a relative 1e-4 (1e-9 where both operands
//! are f64). Left out: the 18 calls whose backward PyTorch itself refuses
//! (`binary_cross_entropy` with a weight of another dtype than the input:
//! "Found dtype Double but expected Float"), which strata differentiates.

use crate::math_grad_s74::{backward_with_upstream, close, f64s};
use crate::pytorch_fixture::{assert_cases_agree, fixture, gunzip, input, num, nums};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/losses_grad_s74.json.gz"))));

fn difference(c: &Value, device: Device) -> Option<String> {
    let x = Var::parameter(input(&c["x"], device)).unwrap();
    let y = Var::parameter(input(&c["y"], device)).unwrap();
    let w = c.get("weight").map(|w| input(w, device));
    let pw = c.get("pos_weight").map(|w| input(w, device));
    let r = crate::hostile_calls::reduction(&c["reduction"]);
    let a = |k: &str| num(&c["args"][k]);
    let out = match c["op"].as_str().unwrap() {
        "l1_loss" => x.l1_loss(&y, r),
        "smooth_l1_loss" => x.smooth_l1_loss(&y, r, a("beta")),
        "huber_loss" => x.huber_loss(&y, r, a("delta")),
        "binary_cross_entropy" => x.binary_cross_entropy(&y, w.as_ref(), r),
        "binary_cross_entropy_with_logits" => {
            x.binary_cross_entropy_with_logits(&y, w.as_ref(), pw.as_ref(), r)
        }
        op => panic!("the generator wrote an op this test does not know: {op}"),
    };
    let out = match out {
        Ok(o) => o,
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
    };
    if let Some(e) = backward_with_upstream(&out, device) {
        return Some(e);
    }
    let both_f64 = x.dtype() == DType::F64 && y.dtype() == DType::F64;
    let rel = if both_f64 { 1e-9 } else { 1e-4 };
    for (v, k) in [(&x, "grad_x"), (&y, "grad_y")] {
        let got = v.grad().map(|g| f64s(&g)).unwrap_or_default();
        let want = nums(&c[k]);
        if !close(&got, &want, rel) {
            return Some(format!("{k} {got:?}, PyTorch {want:?}"));
        }
    }
    None
}

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert_cases_agree(
        cases.iter().filter(|c| c.get("grad_error").is_none()),
        1_200,
        |c| {
            format!(
                "{} {} {} x {} {} y {} {}",
                c["op"],
                c["reduction"],
                c["args"],
                c["x"]["dtype"],
                c["x"]["values"],
                c["y"]["dtype"],
                c["y"]["values"]
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn gradients_of_the_losses_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_the_losses_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
