//! Session 78: `unique(dim = Some(d))` (one lexicographic sort of the
//! slices since session 78, where it ran one sort per column) against a
//! first-principles reference on random inputs: the slices along `d`
//! ordered lexicographically by a stable sort whose element order is
//! `sort`'s (numbers ascending, -0.0 equal to 0.0, NaN after every number),
//! consecutive slices grouped where every element is `==` (so a slice
//! holding NaN is a group of its own), each group represented by its first
//! slice in that order, the inverse mapping each input slice to its group
//! and the counts. Every dtype; values from small pools (many equal
//! slices, ties decided only by later elements, signed zeros, NaN), shapes
//! of 1 to 3 dims with long slices and many short ones. Values are
//! compared bit for bit (which zero stands for a group matters).

use proptest::prelude::*;
use std::cmp::Ordering;
use strata_tensor::{DType, Device, Tensor};

/// The reference's element order: numbers ascending, -0.0 equal to 0.0,
/// NaN after every number and equal to NaN (a stable sort keeps NaNs in
/// input order).
fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap(),
    }
}

/// What `unique(sorted, inverse, counts, dim)` must return for `x` (`vals`
/// row-major, of `shape`): the values (row-major, bits as f64), the values'
/// shape, the inverse and the counts.
fn reference(
    vals: &[f64],
    shape: &[usize],
    d: usize,
) -> (Vec<f64>, Vec<usize>, Vec<i64>, Vec<i64>) {
    let n = shape[d];
    let inner: usize = shape[d + 1..].iter().product();
    let outer: usize = shape[..d].iter().product();
    // Slice i: the elements with index i along d, in row-major order of the
    // other dims.
    let slice = |i: usize| -> Vec<f64> {
        (0..outer)
            .flat_map(|o| (0..inner).map(move |k| (o, k)))
            .map(|(o, k)| vals[(o * n + i) * inner + k])
            .collect()
    };
    let slices: Vec<Vec<f64>> = (0..n).map(slice).collect();
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&a, &b| {
        slices[a]
            .iter()
            .zip(&slices[b])
            .map(|(&x, &y)| order(x, y))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    let mut inverse = vec![0i64; n];
    let mut counts: Vec<i64> = Vec::new();
    let mut firsts: Vec<usize> = Vec::new();
    for (pos, &i) in idx.iter().enumerate() {
        let same = pos > 0
            && slices[i]
                .iter()
                .zip(&slices[idx[pos - 1]])
                .all(|(a, b)| a == b);
        if !same {
            firsts.push(i);
            counts.push(0);
        }
        *counts.last_mut().unwrap() += 1;
        inverse[i] = counts.len() as i64 - 1;
    }
    // The values: the input with dim d holding the groups' first slices.
    let k = firsts.len();
    let mut out_shape = shape.to_vec();
    out_shape[d] = k;
    let mut values = Vec::with_capacity(outer * k * inner);
    for o in 0..outer {
        for &f in &firsts {
            for j in 0..inner {
                values.push(vals[(o * n + f) * inner + j]);
            }
        }
    }
    (values, out_shape, inverse, counts)
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter()
        .map(|x| {
            if x.is_nan() {
                f64::NAN.to_bits()
            } else {
                x.to_bits()
            }
        })
        .collect()
}

/// The value pool of case `pool` in `dt` (each exactly representable).
fn pool(dt: DType, which: usize) -> Vec<f64> {
    let floats = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        2.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    match dt {
        DType::Bool => vec![0.0, 1.0],
        DType::U8 => vec![0.0, 1.0, 7.0, 255.0],
        DType::I32 | DType::I64 => vec![0.0, -1.0, 3.0, -2147483648.0, 2147483647.0],
        _ => match which {
            0 => floats[..3].to_vec(),
            1 => floats.to_vec(),
            _ => vec![0.0, -0.0],
        },
    }
}

fn tensor_of(vals: &[f64], shape: &[usize], dt: DType) -> Tensor {
    let t = Tensor::from_slice(vals, shape, Device::Cpu).unwrap();
    match dt {
        DType::Bool => t.ne(0.0).unwrap(),
        _ => t.to_dtype(dt).unwrap(),
    }
}

const DTYPES: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::Bool,
];

fn check(
    vals: &[f64],
    shape: &[usize],
    dt: DType,
    dim: i64,
) -> std::result::Result<(), TestCaseError> {
    let x = tensor_of(vals, shape, dt);
    // The input as the dtype holds it (f16 rounding of nothing: the pools
    // are exact, but bool maps every non-zero to 1).
    let held = x.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let d = dim.rem_euclid(shape.len() as i64) as usize;
    let (values, vshape, inverse, counts) = reference(&held, shape, d);
    let u = x.unique(true, true, true, Some(dim)).unwrap();
    prop_assert_eq!(u.values.dtype(), dt);
    prop_assert_eq!(u.values.shape(), vshape.as_slice());
    let got = u
        .values
        .to_dtype(DType::F64)
        .unwrap()
        .contiguous()
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    prop_assert_eq!(
        bits(&got),
        bits(&values),
        "values of {:?} {:?} dim {}",
        dt,
        shape,
        dim
    );
    prop_assert_eq!(u.inverse.unwrap().to_vec::<i64>().unwrap(), inverse);
    prop_assert_eq!(u.counts.unwrap().to_vec::<i64>().unwrap(), counts);
    // Without the inverse and counts: the same values.
    let v = x.unique(false, false, false, Some(dim)).unwrap();
    prop_assert!(v.inverse.is_none() && v.counts.is_none());
    let got = v
        .values
        .to_dtype(DType::F64)
        .unwrap()
        .contiguous()
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    prop_assert_eq!(bits(&got), bits(&values));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn unique_dim_matches_the_lexicographic_reference(
        shape in prop::collection::vec(1usize..6, 1..4),
        dt in 0usize..8,
        which in 0usize..3,
        dim_pick in 0usize..3,
        negative in any::<bool>(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 200),
    ) {
        let dt = DTYPES[dt];
        let nd = shape.len();
        let d = dim_pick % nd;
        let dim = if negative { d as i64 - nd as i64 } else { d as i64 };
        let pool = pool(dt, which);
        let n: usize = shape.iter().product();
        let vals: Vec<f64> = (0..n).map(|i| pool[picks[i % picks.len()].index(pool.len())]).collect();
        check(&vals, &shape, dt, dim)?;
    }

    /// Two to four long slices (the case that ran one sort per column) and
    /// many short ones, equal up to their last elements.
    #[test]
    fn long_and_many_slices_match_the_reference(
        n in 2usize..5,
        len in 1usize..3000,
        dt in 0usize..4,
        tail in prop::collection::vec(0usize..3, 4),
        transpose in any::<bool>(),
    ) {
        let dt = DTYPES[dt];
        // Every slice is 0..len (as -0.0 in slice 1's first element), then
        // its own last element from {1, 0, NaN}.
        let mut vals = Vec::with_capacity(n * len);
        for s in 0..n {
            for j in 0..len {
                let v = if j + 1 == len {
                    [1.0, 0.0, f64::NAN][tail[s]]
                } else if j == 0 && s == 1 {
                    -0.0
                } else {
                    (j % 7) as f64
                };
                vals.push(v);
            }
        }
        if transpose {
            // The same slices along dim 1 of a [len, n] tensor.
            let t: Vec<f64> = (0..len).flat_map(|j| (0..n).map(move |s| (s, j))).map(|(s, j)| vals[s * len + j]).collect();
            check(&t, &[len, n], dt, 1)?;
        } else {
            check(&vals, &[n, len], dt, 0)?;
        }
    }
}

#[test]
fn equal_slices_keep_input_order_and_signed_zeros_take_the_first() {
    // Rows: (0, 1), (-0, 1), (0, 0), (0, 1): the three equal rows are one
    // group whose value is the first in stable order, the +0.0 of row 0.
    let x = Tensor::from_slice(
        &[0.0f32, 1.0, -0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        &[4, 2],
        Device::Cpu,
    )
    .unwrap();
    let u = x.unique(true, true, true, Some(0)).unwrap();
    let v = u.values.to_vec::<f32>().unwrap();
    assert_eq!(v, vec![0.0, 0.0, 0.0, 1.0]);
    assert!(v.iter().all(|z| z.to_bits() != (-0.0f32).to_bits()));
    assert_eq!(
        u.inverse.unwrap().to_vec::<i64>().unwrap(),
        vec![1, 1, 0, 1]
    );
    assert_eq!(u.counts.unwrap().to_vec::<i64>().unwrap(), vec![1, 3]);
    // With the -0.0 row first it stands for the group.
    let x = Tensor::from_slice(&[-0.0f32, 1.0, 0.0, 1.0], &[2, 2], Device::Cpu).unwrap();
    let v = x
        .unique(true, false, false, Some(0))
        .unwrap()
        .values
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(v[0].to_bits(), (-0.0f32).to_bits());
    // A NaN slice is its own group, after every number.
    let x = Tensor::from_slice(&[f64::NAN, 1.0, f64::NAN, 5.0], &[4, 1], Device::Cpu).unwrap();
    let u = x.unique(true, true, true, Some(0)).unwrap();
    assert_eq!(u.counts.unwrap().to_vec::<i64>().unwrap(), vec![1, 1, 1, 1]);
    assert_eq!(
        u.inverse.unwrap().to_vec::<i64>().unwrap(),
        vec![2, 0, 3, 1]
    );
}

#[test]
fn two_long_slices_are_one_comparison() {
    // [2, 10^6] (a minute's worth of per-column sorts for 10^7 before
    // session 78): the rows differ only in their last element.
    let len = 1_000_000usize;
    let mut v: Vec<i64> = (0..2 * len as i64).map(|i| i % len as i64 % 5).collect();
    v[len - 1] = 9;
    let x = Tensor::from_slice(&v, &[2, len], Device::Cpu).unwrap();
    let u = x.unique(true, true, true, Some(0)).unwrap();
    assert_eq!(u.values.shape(), &[2, len]);
    assert_eq!(u.inverse.unwrap().to_vec::<i64>().unwrap(), vec![1, 0]);
    assert_eq!(u.counts.unwrap().to_vec::<i64>().unwrap(), vec![1, 1]);
    let first = u.values.select(0, 0).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(first, v[len..].to_vec());
}
