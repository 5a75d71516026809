//! Session 59's oracle sweep (`benches/anchors/fuzz_conformance_s59.py`,
//! seeds 3500-3569): the differences from PyTorch 2.15 it found, each
//! checked against PyTorch's answers in `tests/data/oracle_s59.json`,
//! written by `benches/anchors/gen_oracle_s59.py` (CPU, one thread).
//!
//! - f32/f64 `sum` and `mean` over several dims of a view that is not
//!   row-major (expanded, stepped, transposed, permuted): PyTorch adds the
//!   elements in the order of its TensorIterator's dims (reduced dims
//!   first, ordered by the strides, neighbours merged where they walk
//!   memory as one dim) and of its `cascade_sum` loops; strata folded
//!   reduced dims that do not merge in row-major order, one unit in the
//!   last place away now and then (`fuzz_ops.s3562_pipeline_0936`: an
//!   expanded `[2, 3, 1]` f32 summed over every dim, -34.47703552 where
//!   PyTorch gives -34.47703934), and summed the columns of an expanded
//!   dim in groups of four where PyTorch sums each as a row
//!   (`fuzz_ops.s3601o_sum_order_0676`, nine copies of one f32).
//! - f16/bf16 `sum` and `mean` of such views: PyTorch sums the input
//!   converted to f32 (`self.to(Float)`, the same strides where the input is
//!   dense, else dense in the order of its strides: session 60's fixture,
//!   `tests/data/oracle_s60.json`) for a mean and for a sum whose first two
//!   iterator dims are reduced, and otherwise rounds each partial sum it
//!   stores into an output; strata added in row-major order in f32
//!   (`fuzz_ops.s3600o_sum_order_0530`: an expanded bf16 holding 3.39e38
//!   twice and -inf summed to NaN where PyTorch gives -inf).
//!
//! Every random case of the fixture is one where adding in row-major order
//! (in f32 for f16/bf16, rounded once) gives another answer than PyTorch's.

use crate::pytorch_fixture::{dtype, fixture, ints, nums, shape};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{Device, Scalar, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(include_str!("../data/oracle_s59.json")));

/// Session 60's fixture (`benches/anchors/gen_oracle_s60.py`): f16/bf16
/// sums and means of views that are neither dense nor row-major, where
/// PyTorch sums a copy converted to f32 that is dense in the order of the
/// input's strides (`infer_dense_strides`); strata's copy was row-major
/// (`fuzz_ops.s3700o_sum_order_1246`, one unit in the last place off).
static FIXTURE_S60: LazyLock<Value> =
    LazyLock::new(|| fixture(include_str!("../data/oracle_s60.json")));

#[test]
fn sums_over_views_add_in_pytorchs_order() {
    let cases = FIXTURE["sums"].as_array().unwrap();
    assert!(cases.len() >= 50, "the fixture holds the sum cases");
    check_sums(cases);
}

#[test]
fn half_sums_of_views_that_are_not_dense_convert_in_stride_order() {
    let cases = FIXTURE_S60["sums"].as_array().unwrap();
    assert!(cases.len() >= 8, "the fixture holds the sum cases");
    check_sums(cases);
}

/// Each case's view of its base storage summed (or averaged) as the case
/// says, compared bit for bit with PyTorch's answer.
fn check_sums(cases: &[Value]) {
    let mut bad = Vec::new();
    for c in cases {
        let dt = dtype(c["dtype"].as_str().unwrap());
        let base = nums(&c["base"]);
        let b = Tensor::from_slice(&base, &[base.len()], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap();
        let size: Vec<usize> = shape(&c["size"]);
        let stride: Vec<i64> = ints(&c["stride"]);
        let v = b
            .as_strided(
                &size.iter().map(|&s| s as i64).collect::<Vec<_>>(),
                &stride,
                Some(0),
            )
            .unwrap();
        let dims = ints(&c["dims"]);
        let keep = c["keepdim"].as_bool().unwrap();
        let r = match c["op"].as_str().unwrap() {
            "sum" => v.sum(Some(&dims), keep),
            _ => v.mean(Some(&dims), keep),
        }
        .unwrap();
        assert_eq!(r.shape(), shape(&c["shape"]).as_slice(), "{}", c["doc"]);
        let want = nums(&c["want"]);
        let got: Vec<f64> = r
            .to_scalars()
            .unwrap()
            .into_iter()
            .map(|s| match s {
                Scalar::Float(x) => x,
                other => panic!("a float result, got {other:?}"),
            })
            .collect();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan()) {
                bad.push(format!(
                    "{} {:?} strides {:?} {} dims {:?}: element {k}: {g:e}, PyTorch {w:e}",
                    c["doc"], size, stride, c["op"], dims
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}
