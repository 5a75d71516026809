//! Session 82: `isin` against PyTorch 2.15's CPU
//! (`benches/anchors/gen_isin_s82.py`): elements and test elements of
//! every dtype (bool refused), empty and 0-d shapes, transposed operands,
//! test elements of another dtype or shape or a scalar, repeats, signed
//! zeros, NaN and infinities, `invert` either way; through
//! `shape_stats_s79`'s replay. A property test checks it against a linear
//! search.

use crate::shape_stats_s79::assert_fixture_agrees;
use proptest::prelude::*;
use std::sync::LazyLock;
use strata_tensor::{Device, Tensor};

static TEXT: LazyLock<String> =
    LazyLock::new(|| crate::pytorch_fixture::gunzip(include_bytes!("../data/isin_s82.json.gz")));

#[test]
fn isin_matches_pytorch() {
    assert_fixture_agrees(&TEXT, 1_500, Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn isin_matches_pytorch_on_a_gpu() {
    assert_fixture_agrees(&TEXT, 1_500, crate::hostile_calls::gpu());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `isin` is the linear search: element `i` is found iff some test
    /// element equals it (NaN never does); `invert` negates every answer.
    #[test]
    fn isin_is_the_linear_search(
        x in prop::collection::vec(prop_oneof![(-4i32..4).prop_map(f64::from), Just(f64::NAN)], 0..20),
        t in prop::collection::vec(prop_oneof![(-4i32..4).prop_map(f64::from), Just(f64::NAN)], 0..10),
        invert in any::<bool>(),
    ) {
        let tx = Tensor::from_slice(&x, &[x.len()], Device::Cpu).unwrap();
        let tt = Tensor::from_slice(&t, &[t.len()], Device::Cpu).unwrap();
        let got = tx.isin(&tt, invert).unwrap().to_vec::<bool>().unwrap();
        let want: Vec<bool> = x.iter().map(|v| t.contains(v) != invert).collect();
        prop_assert_eq!(got, want);
    }
}
