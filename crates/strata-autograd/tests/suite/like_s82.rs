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

/// `feature_dropout`'s gradient is its channel mask (regenerated from the
/// seed): for ones, the gradient of the sum equals the output. (Whether a
/// failing call draws from the process-wide generator is not asserted here:
/// the suite's other tests draw from it concurrently.)
#[test]
fn feature_dropout_backward_is_the_channel_mask() {
    use strata_autograd::Var;
    use strata_tensor::generator::manual_seed;
    use strata_tensor::{DType, Tensor};
    manual_seed(5);
    let x = Var::parameter(Tensor::ones(&[4, 8, 3], DType::F64, Device::Cpu).unwrap()).unwrap();
    let y = x.dropout2d(0.5, true).unwrap();
    y.sum(None, false).unwrap().backward().unwrap();
    let (g, out) = (
        x.grad().unwrap().to_vec::<f64>().unwrap(),
        y.data().to_vec::<f64>().unwrap(),
    );
    assert_eq!(g, out);
    assert!(out
        .chunks(3)
        .all(|c| c.iter().all(|&v| v == c[0]) && (c[0] == 0.0 || c[0] == 2.0)));
    let one = Var::parameter(Tensor::ones(&[5], DType::F64, Device::Cpu).unwrap()).unwrap();
    assert!(one.feature_dropout(0.5, true).is_err());
    assert!(x.dropout1d(0.5, true).is_ok()); // 3-D: [N, C, L]
    let four =
        Var::parameter(Tensor::ones(&[2, 2, 2, 2], DType::F64, Device::Cpu).unwrap()).unwrap();
    assert!(four.dropout1d(0.5, true).is_err());
}
