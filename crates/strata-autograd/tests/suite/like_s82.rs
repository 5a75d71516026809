//! Session 82: the gradients of `dist` and `diagflat` against PyTorch
//! 2.15's CPU autograd (`benches/anchors/gen_like_s82.py`, through
//! `shape_stats_s79`'s replay).

use crate::pytorch_fixture::{assert_cases_agree, fixture, gunzip};
use crate::shape_stats_s79::difference;
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::Device;

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/like_s82_grad.json.gz"))));

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert_cases_agree(
        cases.iter().filter(|c| c.get("grad_error").is_none()),
        350,
        |c| format!("{} {} inputs {}", c["op"], c["args"], c["inputs"]),
        |c| difference(c, device),
    );
}

#[test]
fn gradients_of_dist_and_diagflat_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_dist_and_diagflat_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
