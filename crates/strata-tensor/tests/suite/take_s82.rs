//! Session 82: `take`, `put_` and `broadcast_tensors` against PyTorch
//! 2.15's CPU (`benches/anchors/gen_take_s82.py`, through
//! `shape_stats_s79`'s replay): every dtype, empty, 0-d and transposed
//! operands, positions negative and past either end, index dtypes other
//! than i64, sources of another dtype or count. A property test checks
//! `put_` then `take` at the same distinct positions.

use crate::shape_stats_s79::assert_fixture_agrees;
use proptest::prelude::*;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Tensor};

static TEXT: LazyLock<String> =
    LazyLock::new(|| crate::pytorch_fixture::gunzip(include_bytes!("../data/take_s82.json.gz")));

#[test]
fn take_put_and_broadcast_tensors_match_pytorch() {
    assert_fixture_agrees(&TEXT, 1_800, Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn take_put_and_broadcast_tensors_match_pytorch_on_a_gpu() {
    assert_fixture_agrees(&TEXT, 1_800, crate::hostile_calls::gpu());
}

#[test]
fn a_refused_put_leaves_self_unchanged() {
    let a = Tensor::zeros(&[2, 2], DType::F32, Device::Cpu).unwrap();
    let v = Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap();
    let past = Tensor::from_slice(&[0i64, 4], &[2], Device::Cpu).unwrap();
    assert!(a.put_(&past, &v, false).is_err());
    assert_eq!(a.to_vec::<f32>().unwrap(), [0.0; 4]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Writing distinct positions of a transposed tensor with `put_` and
    /// reading them back with `take` gives the written values; every other
    /// element is unchanged.
    #[test]
    fn put_then_take_reads_back_what_it_wrote(
        rows in 1usize..5,
        cols in 1usize..5,
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..6),
    ) {
        let n = rows * cols;
        let base = Tensor::arange(0.0, n as f64, 1.0, Some(DType::F64), Device::Cpu)
            .unwrap()
            .reshape(&[cols as i64, rows as i64])
            .unwrap();
        let x = base.t().unwrap(); // [rows, cols], transposed layout
        let mut pos: Vec<i64> = picks.iter().map(|p| p.index(n) as i64).collect();
        pos.sort();
        pos.dedup();
        let before = x.contiguous().unwrap().to_vec::<f64>().unwrap();
        let vals: Vec<f64> = (0..pos.len()).map(|k| 100.0 + k as f64).collect();
        let i = Tensor::from_slice(&pos, &[pos.len()], Device::Cpu).unwrap();
        let v = Tensor::from_slice(&vals, &[vals.len()], Device::Cpu).unwrap();
        x.put_(&i, &v, false).unwrap();
        prop_assert_eq!(x.take(&i).unwrap().to_vec::<f64>().unwrap(), vals);
        let after = x.contiguous().unwrap().to_vec::<f64>().unwrap();
        for k in 0..n {
            if !pos.contains(&(k as i64)) {
                prop_assert_eq!(after[k], before[k]);
            }
        }
    }
}
