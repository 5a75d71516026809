//! Session 82: `amax`, `amin` (new on `Tensor`) and `aminmax` against
//! PyTorch 2.15's CPU (`benches/anchors/gen_extremes_s82.py`): operands of
//! every dtype, bool included, empty and 0-d shapes, transposed operands,
//! ties, signed zeros, NaN and infinities; dims as `None`, an empty list or
//! one to three dims, repeated or out of range. Each call must give
//! PyTorch's dtype, shape and values, or fail where PyTorch raised (through
//! `shape_stats_s79`'s replay). A property test checks `amax`/`amin` over
//! random dims against a fold over every element.

use crate::shape_stats_s79::assert_fixture_agrees;
use proptest::prelude::*;
use std::sync::LazyLock;
use strata_tensor::{Device, Tensor, TensorError};

static TEXT: LazyLock<String> = LazyLock::new(|| {
    crate::pytorch_fixture::gunzip(include_bytes!("../data/extremes_s82.json.gz"))
});

#[test]
fn amax_amin_and_aminmax_match_pytorch() {
    assert_fixture_agrees(&TEXT, 2_000, Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn amax_amin_and_aminmax_match_pytorch_on_a_gpu() {
    assert_fixture_agrees(&TEXT, 2_000, crate::hostile_calls::gpu());
}

#[test]
fn amax_refuses_what_pytorch_refuses() {
    let empty = Tensor::zeros(&[0, 3], strata_tensor::DType::F32, Device::Cpu).unwrap();
    // Reducing an empty dim: no identity (the error of max_dim there).
    assert!(matches!(
        empty.amax(Some(&[0]), false),
        Err(TensorError::Empty { .. })
    ));
    assert!(matches!(
        empty.aminmax(Some(0), true),
        Err(TensorError::Empty { .. })
    ));
    // Every dim of a tensor without elements.
    assert!(matches!(
        empty.amin(None, false),
        Err(TensorError::Empty { .. })
    ));
    // Reducing only the non-empty dim leaves an empty result.
    assert_eq!(empty.amax(Some(&[1]), true).unwrap().shape(), &[0, 1]);
    let x = Tensor::ones(&[2, 3], strata_tensor::DType::F32, Device::Cpu).unwrap();
    assert!(matches!(
        x.amax(Some(&[0, -2]), false),
        Err(TensorError::Dim { .. })
    ));
    assert!(matches!(
        x.amax(Some(&[2]), false),
        Err(TensorError::Dim { .. })
    ));
}

/// The reference: the fold of every element of each slice, NaN winning.
fn folded(values: &[f64], shape: &[usize], dims: &[usize], max: bool) -> Vec<f64> {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !dims.contains(d)).collect();
    let out_len: usize = kept.iter().map(|&d| shape[d]).product();
    let mut out = vec![None::<f64>; out_len];
    for (flat, &v) in values.iter().enumerate() {
        let mut rest = flat;
        let mut index = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            index[d] = rest % shape[d];
            rest /= shape[d];
        }
        let o = kept.iter().fold(0, |acc, &d| acc * shape[d] + index[d]);
        out[o] = Some(match out[o] {
            None => v,
            Some(a) if a.is_nan() || v.is_nan() => f64::NAN,
            Some(a) if max => a.max(v),
            Some(a) => a.min(v),
        });
    }
    out.into_iter().map(Option::unwrap).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `amax`/`amin` over any set of dims (in any order, keepdim either way)
    /// are the fold over every element of each slice; the result's shape
    /// drops (or keeps as 1) exactly the reduced dims.
    #[test]
    fn amax_and_amin_are_the_fold_of_each_slice(
        shape in prop::collection::vec(1usize..4, 1..5),
        picks in prop::collection::vec(any::<bool>(), 4),
        reverse in any::<bool>(),
        keepdim in any::<bool>(),
        max in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let n: usize = shape.iter().product();
        let values: Vec<f64> = (0..n as u64)
            .map(|k| match (k * 31 + seed * 17) % 23 {
                0 => f64::NAN,
                r => r as f64 - 11.0,
            })
            .collect();
        let x = Tensor::from_slice(&values, &shape, Device::Cpu).unwrap();
        let mut dims: Vec<usize> = (0..shape.len()).filter(|&d| picks[d]).collect();
        if dims.is_empty() {
            dims = (0..shape.len()).collect();
        }
        let mut arg: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        if reverse {
            arg.reverse();
            arg[0] -= shape.len() as i64; // a negative dim too
        }
        let got = if max { x.amax(Some(&arg), keepdim) } else { x.amin(Some(&arg), keepdim) }
            .unwrap();
        let want_shape: Vec<usize> = (0..shape.len())
            .filter_map(|d| if dims.contains(&d) { keepdim.then_some(1) } else { Some(shape[d]) })
            .collect();
        prop_assert_eq!(got.shape(), want_shape.as_slice());
        let got = got.to_vec::<f64>().unwrap();
        let want = folded(&values, &shape, &dims, max);
        prop_assert!(
            got.iter().zip(&want).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())),
            "{:?} against {:?}", got, want
        );
    }
}
