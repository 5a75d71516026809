//! Session 82: the gradients of `dist` and `diagflat` against PyTorch
//! 2.15's CPU autograd (`benches/anchors/gen_like_s82.py`, through
//! `shape_stats_s79`'s replay).

use crate::pytorch_fixture::{fixture, gunzip};
use crate::shape_stats_s79::assert_gradient_fixture_agrees;
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::Device;

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/like_s82_grad.json.gz"))));

#[test]
fn gradients_of_dist_and_diagflat_match_pytorch() {
    assert_gradient_fixture_agrees(&FIXTURE, 350, Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_dist_and_diagflat_match_pytorch_on_a_gpu() {
    assert_gradient_fixture_agrees(&FIXTURE, 350, crate::hostile_calls::gpu());
}
