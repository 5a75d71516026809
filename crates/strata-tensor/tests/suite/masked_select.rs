//! `masked_select` and `masked_scatter` on the CPU against a naive
//! element-by-element reference over the broadcast shape, on random shapes,
//! broadcasts, transposed inputs and sizes that cross the compaction's
//! chunks; and their typed errors.

use proptest::prelude::*;
use strata_tensor::{DType, Device, Scalar, Tensor, TensorError};

/// Row-major coordinates of position `i` of `shape`.
fn coords(shape: &[usize], mut i: usize) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d];
        i /= shape[d];
    }
    c
}

/// Position in the row-major values of `shape` of the broadcast coordinate `c`.
fn source_pos(shape: &[usize], c: &[usize]) -> usize {
    let lead = c.len() - shape.len();
    let mut p = 0;
    for (d, &s) in shape.iter().enumerate() {
        p = p * s + if s == 1 { 0 } else { c[lead + d] };
    }
    p
}

fn broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let x = if i + a.len() >= n {
                a[i + a.len() - n]
            } else {
                1
            };
            let y = if i + b.len() >= n {
                b[i + b.len() - n]
            } else {
                1
            };
            x.max(y)
        })
        .collect()
}

/// The reference: the values of `x` (row-major `xs`) at the set positions
/// of `m` (row-major `ms`) over the broadcast shape.
fn reference(xv: &[f64], xs: &[usize], mv: &[bool], ms: &[usize]) -> Vec<f64> {
    let full = broadcast(xs, ms);
    let n: usize = full.iter().product();
    (0..n)
        .filter_map(|i| {
            let c = coords(&full, i);
            mv[source_pos(ms, &c)].then(|| xv[source_pos(xs, &c)])
        })
        .collect()
}

/// A shape and a shape broadcastable with it (dims dropped or set to 1).
fn shapes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, u64)> {
    (
        prop::collection::vec(1usize..6, 0..4),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(a, bits, seed)| {
            let drop = (bits % (a.len() as u64 + 1)) as usize;
            let b: Vec<usize> = a[drop..]
                .iter()
                .enumerate()
                .map(|(i, &s)| if bits >> (8 + i) & 1 == 1 { 1 } else { s })
                .collect();
            if bits >> 20 & 1 == 1 {
                (a, b, seed)
            } else {
                (b, a, seed)
            }
        })
}

fn rand_mask(shape: &[usize], seed: u64) -> (Tensor, Vec<bool>) {
    let m = Tensor::randn(shape, DType::F64, seed, Device::Cpu)
        .unwrap()
        .gt(0.3)
        .unwrap();
    let v = m.to_vec::<bool>().unwrap();
    (m, v)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn masked_select_matches_reference((xs, ms, seed) in shapes()) {
        let x = Tensor::randn(&xs, DType::F64, seed, Device::Cpu).unwrap();
        let (m, mv) = rand_mask(&ms, seed.wrapping_add(1));
        let want = reference(&x.to_vec::<f64>().unwrap(), &xs, &mv, &ms);
        let got = x.masked_select(&m).unwrap();
        prop_assert_eq!(got.shape(), &[want.len()][..]);
        prop_assert_eq!(got.to_vec::<f64>().unwrap(), want.clone());
        // Every dtype selects the same positions (values converted exactly).
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::Bool] {
            let xd = x.mul(10.0).unwrap().to_dtype(dtype).unwrap();
            let wd = reference(&xd.to_vec_as::<f64>().unwrap(), &xs, &mv, &ms);
            let gd = xd.masked_select(&m).unwrap();
            prop_assert_eq!(gd.dtype(), dtype);
            prop_assert_eq!(gd.to_vec_as::<f64>().unwrap(), wd);
        }
    }

    #[test]
    fn masked_select_of_a_transpose(r in 1usize..40, c in 1usize..40, seed in any::<u64>()) {
        let base = Tensor::randn(&[c, r], DType::F32, seed, Device::Cpu).unwrap();
        let x = base.t().unwrap();
        let (m, mv) = rand_mask(&[r, c], seed.wrapping_add(2));
        let xv = x.contiguous().unwrap().to_vec_as::<f64>().unwrap();
        let want = reference(&xv, &[r, c], &mv, &[r, c]);
        prop_assert_eq!(x.masked_select(&m).unwrap().to_vec_as::<f64>().unwrap(), want);
    }

    /// Sizes around the compaction's chunk (4096) and masks of every density.
    #[test]
    fn masked_select_across_chunks(n in 1usize..13000, cut in -1.0f64..3.0, seed in any::<u64>()) {
        let x = Tensor::arange(Scalar::Int(0), Scalar::Int(n as i64), Scalar::Int(1), Some(DType::I64), Device::Cpu).unwrap();
        let m = Tensor::randn(&[n], DType::F64, seed, Device::Cpu).unwrap().gt(cut).unwrap();
        let mv = m.to_vec::<bool>().unwrap();
        let want: Vec<i64> = (0..n as i64).filter(|&i| mv[i as usize]).collect();
        prop_assert_eq!(x.masked_select(&m).unwrap().to_vec::<i64>().unwrap(), want);
    }

    /// masked_scatter puts source's elements, in order, at the set positions.
    #[test]
    fn masked_scatter_matches_reference((xs, ms, seed) in shapes(), extra in 0usize..3) {
        let x = Tensor::randn(&xs, DType::F64, seed, Device::Cpu).unwrap();
        let (m, mv) = rand_mask(&ms, seed.wrapping_add(3));
        let full = broadcast(&xs, &ms);
        let n: usize = full.iter().product();
        let count = (0..n).filter(|&i| mv[source_pos(&ms, &coords(&full, i))]).count();
        let src = Tensor::randn(&[count + extra], DType::F64, seed.wrapping_add(4), Device::Cpu).unwrap();
        let (xv, sv) = (x.to_vec::<f64>().unwrap(), src.to_vec::<f64>().unwrap());
        let mut k = 0;
        let want: Vec<f64> = (0..n)
            .map(|i| {
                let c = coords(&full, i);
                if mv[source_pos(&ms, &c)] {
                    k += 1;
                    sv[k - 1]
                } else {
                    xv[source_pos(&xs, &c)]
                }
            })
            .collect();
        let got = x.masked_scatter(&m, &src).unwrap();
        prop_assert_eq!(got.shape(), &full[..]);
        prop_assert_eq!(got.to_vec::<f64>().unwrap(), want);
        if count > 0 {
            let short = src.narrow(0, 0, count as i64 - 1).unwrap();
            let is_shape_error = matches!(x.masked_scatter(&m, &short), Err(TensorError::Shape { .. }));
            prop_assert!(is_shape_error);
        }
    }
}

#[test]
fn masked_select_errors_are_typed() {
    let x = Tensor::zeros(&[2, 3], DType::F32, Device::Cpu).unwrap();
    let not_bool = Tensor::ones(&[2, 3], DType::U8, Device::Cpu).unwrap();
    assert!(matches!(
        x.masked_select(&not_bool),
        Err(TensorError::DType { .. })
    ));
    let bad = Tensor::ones(&[4], DType::Bool, Device::Cpu).unwrap();
    assert!(matches!(
        x.masked_select(&bad),
        Err(TensorError::Broadcast { .. })
    ));
    let m = Tensor::ones(&[3], DType::Bool, Device::Cpu).unwrap();
    let src = Tensor::zeros(&[6], DType::F64, Device::Cpu).unwrap();
    assert!(matches!(
        x.masked_scatter(&m, &src),
        Err(TensorError::DType { .. })
    ));
}

#[test]
fn masked_select_edge_shapes() {
    // 0-d input and mask, empty inputs, an all-false mask.
    let s = Tensor::from_slice(&[7.5f32], &[], Device::Cpu).unwrap();
    let t = Tensor::from_slice(&[true], &[], Device::Cpu).unwrap();
    assert_eq!(
        s.masked_select(&t).unwrap().to_vec::<f32>().unwrap(),
        vec![7.5]
    );
    let e = Tensor::zeros(&[0, 3], DType::F32, Device::Cpu).unwrap();
    let em = Tensor::ones(&[3], DType::Bool, Device::Cpu).unwrap();
    assert_eq!(e.masked_select(&em).unwrap().shape(), &[0]);
    let x = Tensor::ones(&[5, 5], DType::F32, Device::Cpu).unwrap();
    let none = Tensor::zeros(&[5, 5], DType::Bool, Device::Cpu).unwrap();
    assert_eq!(x.masked_select(&none).unwrap().shape(), &[0]);
}
