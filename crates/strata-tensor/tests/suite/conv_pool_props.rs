//! Session 75: convolution and pooling against direct loops (f64, random
//! shapes and options): `conv2d` against the definition's six nested sums,
//! `max_pool2d` against PyTorch's scan (first maximum, with its index) and
//! `avg_pool2d` against the clipped-window mean, `unfold` against indexing.

use proptest::prelude::*;
use strata_tensor::{ConvOptions, DType, Device, PoolOptions, Tensor};

fn values(n: usize, seed: u64) -> Vec<f64> {
    // A small deterministic spread of distinct values (no ties).
    (0..n)
        .map(|i| ((i as u64 * 2_654_435_761 + seed * 40_503) % 10_007) as f64 / 1000.0 - 5.0)
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn conv2d_reference(
    x: &[f64],
    [n, c, h, w]: [usize; 4],
    wt: &[f64],
    [co, cg, kh, kw]: [usize; 4],
    groups: usize,
    stride: usize,
    pad: usize,
    dil: usize,
) -> (Vec<f64>, [usize; 4]) {
    let oh = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
    let ow = (w + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
    let per_group = co / groups;
    let mut out = vec![0.0; n * co * oh * ow];
    for b in 0..n {
        for o in 0..co {
            let g = o / per_group;
            for y in 0..oh {
                for z in 0..ow {
                    let mut s = 0.0;
                    for ci in 0..cg {
                        for i in 0..kh {
                            for j in 0..kw {
                                let yy = (y * stride + i * dil) as i64 - pad as i64;
                                let zz = (z * stride + j * dil) as i64 - pad as i64;
                                if yy < 0 || zz < 0 || yy >= h as i64 || zz >= w as i64 {
                                    continue;
                                }
                                let xc = g * cg + ci;
                                s += x[((b * c + xc) * h + yy as usize) * w + zz as usize]
                                    * wt[((o * cg + ci) * kh + i) * kw + j];
                            }
                        }
                    }
                    out[((b * co + o) * oh + y) * ow + z] = s;
                }
            }
        }
    }
    (out, [n, co, oh, ow])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn conv2d_is_the_sum_over_each_window(
        n in 0usize..3, groups in 1usize..3, cg in 1usize..3, og in 1usize..3,
        h in 1usize..7, w in 1usize..7, kh in 1usize..4, kw in 1usize..4,
        stride in 1usize..3, pad in 0usize..3, dil in 1usize..3, seed in 0u64..1000,
    ) {
        let (c, co) = (groups * cg, groups * og);
        let fits = h + 2 * pad > dil * (kh - 1) && w + 2 * pad > dil * (kw - 1);
        let xv = values(n * c * h * w, seed);
        let wv = values(co * cg * kh * kw, seed + 1);
        let x = Tensor::from_slice(&xv, &[n, c, h, w], Device::Cpu).unwrap();
        let wt = Tensor::from_slice(&wv, &[co, cg, kh, kw], Device::Cpu).unwrap();
        let opts = ConvOptions::new().stride(&[stride]).padding(&[pad]).dilation(&[dil]).groups(groups);
        let got = x.conv2d(&wt, None, &opts);
        if !fits {
            prop_assert!(got.is_err());
            return Ok(());
        }
        let got = got.unwrap();
        let (want, shape) = conv2d_reference(&xv, [n, c, h, w], &wv, [co, cg, kh, kw], groups, stride, pad, dil);
        prop_assert_eq!(got.shape(), &shape[..]);
        let g: Vec<f64> = got.to_vec().unwrap();
        for (a, b) in g.iter().zip(&want) {
            prop_assert!((a - b).abs() <= 1e-9 * (1.0 + b.abs()), "{} vs {}", a, b);
        }
    }

    #[test]
    fn max_and_avg_pool2d_scan_each_window(
        c in 1usize..3, h in 1usize..8, w in 1usize..8, k in 1usize..4, stride in 1usize..4,
        pad in 0usize..2, ceil in any::<bool>(), include_pad in any::<bool>(), seed in 0u64..1000,
    ) {
        let pad = pad.min(k / 2);
        let xv = values(c * h * w, seed);
        let x = Tensor::from_slice(&xv, &[c, h, w], Device::Cpu).unwrap();
        let opts = PoolOptions::new(&[k]).stride(&[stride]).padding(&[pad]).ceil_mode(ceil);
        // PyTorch's output size.
        let size = |l: usize| {
            let span = (l + 2 * pad) as i64 - k as i64 + if ceil { stride as i64 - 1 } else { 0 };
            let mut o = span.div_euclid(stride as i64) + 1;
            if ceil && (o - 1) * stride as i64 >= (l + pad) as i64 {
                o -= 1;
            }
            o
        };
        let (oh, ow) = (size(h), size(w));
        let max = x.max_pool2d_with_indices(&opts);
        let avg = x.avg_pool2d(&opts.clone().count_include_pad(include_pad));
        if oh < 1 || ow < 1 {
            prop_assert!(max.is_err() && avg.is_err());
            return Ok(());
        }
        let (oh, ow) = (oh as usize, ow as usize);
        let (values_, indices) = max.unwrap();
        let (mv, mi): (Vec<f64>, Vec<i64>) = (values_.to_vec().unwrap(), indices.to_vec().unwrap());
        let av: Vec<f64> = avg.unwrap().to_vec().unwrap();
        prop_assert_eq!(mv.len(), c * oh * ow);
        for ch in 0..c {
            for y in 0..oh {
                for z in 0..ow {
                    let (y0, z0) = ((y * stride) as i64 - pad as i64, (z * stride) as i64 - pad as i64);
                    let (mut best, mut at, mut sum, mut count) = (f64::NEG_INFINITY, -1i64, 0.0, 0i64);
                    for i in 0..k as i64 {
                        for j in 0..k as i64 {
                            let (yy, zz) = (y0 + i, z0 + j);
                            if yy < 0 || zz < 0 || yy >= h as i64 || zz >= w as i64 {
                                continue;
                            }
                            let v = xv[ch * h * w + yy as usize * w + zz as usize];
                            if v > best {
                                best = v;
                                at = yy * w as i64 + zz;
                            }
                            sum += v;
                            count += 1;
                        }
                    }
                    let r = (ch * oh + y) * ow + z;
                    prop_assert_eq!(mv[r], best);
                    prop_assert_eq!(mi[r], at);
                    // The divisor: the window clipped to the padded input,
                    // or to the input itself.
                    let clip = |o: i64, l: usize| {
                        let end = (o + k as i64).min((l + pad) as i64);
                        if include_pad { end - o } else { end.min(l as i64) - o.max(0) }
                    };
                    let div = clip(y0, h) * clip(z0, w);
                    prop_assert!(count > 0);
                    prop_assert!((av[r] - sum / div as f64).abs() <= 1e-12 * (1.0 + sum.abs()));
                }
            }
        }
    }

    #[test]
    fn unfold_windows_index_the_input(
        shape in proptest::collection::vec(0usize..5, 1..4), dim_pick in 0usize..4,
        size_pick in 0usize..6, step in 1i64..4,
    ) {
        let dim = dim_pick % shape.len();
        let n: usize = shape.iter().product();
        let x = Tensor::arange(0i64, n as i64, 1i64, None, Device::Cpu).unwrap();
        let x = x.reshape(&shape.iter().map(|&s| s as i64).collect::<Vec<_>>()).unwrap();
        let size = size_pick as i64;
        let u = x.unfold(dim as i64, size, step);
        if size as usize > shape[dim] {
            prop_assert!(u.is_err());
            return Ok(());
        }
        let u = u.unwrap();
        let count = (shape[dim] - size as usize) / step as usize + 1;
        let mut want_shape = shape.clone();
        want_shape[dim] = count;
        want_shape.push(size as usize);
        prop_assert_eq!(u.shape(), &want_shape[..]);
        // Each element of the view is the input at (.., window * step + j, ..).
        let got: Vec<i64> = u.contiguous().unwrap().to_vec().unwrap();
        let strides: Vec<usize> = (0..shape.len()).map(|d| shape[d + 1..].iter().product()).collect();
        for (flat, &v) in got.iter().enumerate() {
            let mut rest = flat;
            let mut idx = vec![0usize; want_shape.len()];
            for d in (0..want_shape.len()).rev() {
                idx[d] = rest % want_shape[d];
                rest /= want_shape[d];
            }
            let j = idx.pop().unwrap();
            idx[dim] = idx[dim] * step as usize + j;
            let want: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
            prop_assert_eq!(v, want as i64);
        }
    }
}

#[test]
fn conv_checks_its_operands() {
    let x = Tensor::zeros(&[1, 4, 5, 5], DType::F32, Device::Cpu).unwrap();
    let w = Tensor::zeros(&[6, 2, 3, 3], DType::F32, Device::Cpu).unwrap();
    let ok = ConvOptions::new().groups(2);
    assert_eq!(x.conv2d(&w, None, &ok).unwrap().shape(), &[1, 6, 3, 3]);
    for bad in [
        ConvOptions::new().groups(2).stride(&[0]),
        ConvOptions::new().groups(2).dilation(&[0]),
        ConvOptions::new().groups(0),
        ConvOptions::new().groups(3),
        ConvOptions::new().groups(2).stride(&[1, 1, 1]),
        ConvOptions::new()
            .groups(2)
            .stride(&[2])
            .padding_mode(strata_tensor::ConvPadding::Same),
    ] {
        assert!(x.conv2d(&w, None, &bad).is_err(), "{bad:?}");
    }
    // A bias of the wrong length or dtype, a weight of another dtype.
    let b = Tensor::zeros(&[5], DType::F32, Device::Cpu).unwrap();
    assert!(x.conv2d(&w, Some(&b), &ok).is_err());
    let b = Tensor::zeros(&[6], DType::F64, Device::Cpu).unwrap();
    assert!(x.conv2d(&w, Some(&b), &ok).is_err());
    assert!(x
        .conv2d(&w.to_dtype(DType::F64).unwrap(), None, &ok)
        .is_err());
    // "same" keeps the size, with an even kernel too (the extra zero after).
    let w2 = Tensor::ones(&[1, 1, 2], DType::F32, Device::Cpu).unwrap();
    let x1 = Tensor::from_slice(&[1f32, 2., 3.], &[1, 1, 3], Device::Cpu).unwrap();
    let same = ConvOptions::new().padding_mode(strata_tensor::ConvPadding::Same);
    assert_eq!(
        x1.conv1d(&w2, None, &same)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [3., 5., 3.]
    );
}

/// Extreme sizes and options: typed errors or empty results, never a
/// panic, a wrapped size or an attempt to materialise the impossible.
#[test]
fn extreme_sizes_are_typed_errors_or_empty() {
    let big = 1usize << 30;
    let x = Tensor::zeros(&[1, 1, 4, 4], DType::F32, Device::Cpu).unwrap();
    let w = Tensor::zeros(&[1, 1, 2, 2], DType::F32, Device::Cpu).unwrap();
    for opts in [
        ConvOptions::new().stride(&[usize::MAX]),
        ConvOptions::new().dilation(&[usize::MAX]),
        ConvOptions::new().padding(&[usize::MAX]),
        ConvOptions::new().padding(&[usize::MAX / 2]),
        ConvOptions::new().groups(usize::MAX),
    ] {
        let r = x.conv2d(&w, None, &opts);
        if let Ok(t) = &r {
            // A stride past the input gives one window.
            assert_eq!(t.shape(), &[1, 1, 1, 1], "{opts:?}");
        }
    }
    // An empty batch may have spatial dims no tensor could fill.
    let empty = Tensor::zeros(&[0, 1, big, big], DType::F32, Device::Cpu).unwrap();
    let y = empty.conv2d(&w, None, &ConvOptions::new()).unwrap();
    assert_eq!(y.shape(), &[0, 1, big - 1, big - 1]);
    let pool = PoolOptions::new(&[2]);
    assert_eq!(
        empty.max_pool2d(&pool).unwrap().shape(),
        &[0, 1, big / 2, big / 2]
    );
    assert_eq!(
        empty.avg_pool2d(&pool).unwrap().shape(),
        &[0, 1, big / 2, big / 2]
    );
    assert_eq!(
        empty.adaptive_avg_pool2d(&[3]).unwrap().shape(),
        &[0, 1, 3, 3]
    );
    for opts in [
        PoolOptions::new(&[usize::MAX]),
        PoolOptions::new(&[2]).stride(&[usize::MAX]),
        PoolOptions::new(&[2]).dilation(&[usize::MAX]),
        PoolOptions::new(&[usize::MAX]).padding(&[usize::MAX / 2]),
        PoolOptions::new(&[2]).divisor_override(0),
    ] {
        let _ = x.max_pool2d(&opts);
        let _ = x.avg_pool2d(&opts);
    }
    assert!(x.adaptive_avg_pool2d(&[1 << 40, 1 << 40]).is_err());
    assert!(x.adaptive_avg_pool1d(&[usize::MAX]).is_err());
    assert!(x.unfold(0, i64::MAX, 1).is_err() && x.unfold(0, 1, i64::MIN).is_err());
    assert!(x.unfold(i64::MIN, 1, 1).is_err());
}

fn hostile_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..5,
        1 => Just(usize::MAX),
        1 => Just(usize::MAX / 2),
        1 => Just(1usize << 40),
        1 => Just(i64::MAX as usize),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any options on any small input: a result or a typed error, never a
    /// panic (the test would fail) or a wrapped size.
    #[test]
    fn conv_pool_and_friends_never_panic(
        shape in proptest::collection::vec(0usize..4, 0..6),
        k in proptest::collection::vec(hostile_size(), 1..4),
        stride in proptest::collection::vec(hostile_size(), 1..4),
        pad in proptest::collection::vec(hostile_size(), 1..4),
        dil in proptest::collection::vec(hostile_size(), 1..4),
        groups in hostile_size(),
        ceil in any::<bool>(),
        out in proptest::collection::vec(hostile_size(), 1..4),
        dtype in prop_oneof![Just(DType::F32), Just(DType::I64), Just(DType::BF16), Just(DType::Bool)],
        unfold in (-8i64..8, -3i64..8, -2i64..4),
    ) {
        let x = Tensor::zeros(&shape, dtype, Device::Cpu).unwrap();
        let mut wshape = vec![2usize, 1];
        wshape.extend(k.iter().map(|&v| v.min(3)));
        let w = Tensor::zeros(&wshape, dtype, Device::Cpu).unwrap();
        let conv = ConvOptions::new().stride(&stride).padding(&pad).dilation(&dil).groups(groups);
        let _ = x.conv1d(&w, None, &conv);
        let _ = x.conv2d(&w, None, &conv);
        let _ = x.conv3d(&w, None, &conv);
        let _ = x.conv_transpose1d(&w, None, &conv.clone().output_padding(&out));
        let _ = x.conv_transpose2d(&w, None, &conv.clone().output_padding(&out));
        let pool = PoolOptions::new(&k).stride(&stride).padding(&pad).dilation(&dil).ceil_mode(ceil);
        let _ = x.max_pool1d_with_indices(&pool);
        let _ = x.max_pool2d_with_indices(&pool);
        let _ = x.max_pool3d(&pool);
        let _ = x.avg_pool1d(&PoolOptions::new(&k).stride(&stride).padding(&pad).ceil_mode(ceil));
        let _ = x.avg_pool2d(&PoolOptions::new(&k).stride(&stride).padding(&pad).divisor_override(-3));
        let _ = x.avg_pool3d(&PoolOptions::new(&k).padding(&pad));
        let _ = x.adaptive_avg_pool1d(&out);
        let _ = x.adaptive_avg_pool2d(&out);
        let _ = x.adaptive_avg_pool3d(&out);
        let _ = x.unfold(unfold.0, unfold.1, unfold.2);
        let rm = Tensor::zeros(&[shape.get(1).copied().unwrap_or(0)], DType::F32, Device::Cpu).unwrap();
        let _ = x.batch_norm(Some(&rm), Some(&rm), None, None, ceil, 0.1, 1e-5);
        let _ = x.one_hot(out.first().copied());
        let _ = x.cosine_similarity(&w, unfold.0, 1e-8);
        let _ = x.pairwise_distance(&w, 2.0, 1e-6, ceil);
        let _ = Tensor::linspace(-1.0, 1.0, out[0].min(1 << 12), Some(dtype), Device::Cpu);
    }
}
