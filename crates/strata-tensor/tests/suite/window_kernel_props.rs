//! Session 76: the fused window kernels (`window_columns` and its adjoint
//! `window_columns_sum`, `window_max` and `window_max_backward`,
//! `window_means` and `window_means_backward`) against direct loops over random geometries of
//! one to three spatial dims: any padding (also more than half the kernel),
//! strides, dilations and window counts (windows may run past the input),
//! on strided (permuted) inputs. The adjoints are checked by their defining
//! identity `<A x, y> = <x, A^T y>` in f64. `*_on_a_gpu` runs the same on
//! the first CUDA device.

use proptest::prelude::*;
use strata_tensor::{AvgMode, DType, Device, Tensor, Windows};

/// One spatial dim: (size, windows, kernel, stride, pad, dilation).
type Dim = (usize, usize, usize, usize, usize, usize);

/// A random geometry: its spatial dims, plus batch and channels.
#[derive(Clone, Debug)]
struct Case {
    n: usize,
    c: usize,
    dims: Vec<Dim>,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    let dim = (
        1usize..7,
        1usize..5,
        1usize..4,
        1usize..4,
        0usize..3,
        1usize..3,
    );
    (
        0usize..3,
        1usize..4,
        prop::collection::vec(dim, 1..=3),
        any::<u64>(),
    )
        .prop_map(|(n, c, dims, seed)| Case { n, c, dims, seed })
}

impl Case {
    fn windows(&self) -> Windows {
        let col = |f: fn(&Dim) -> usize| -> Vec<usize> { self.dims.iter().map(f).collect() };
        Windows::new(
            &col(|d| d.0),
            &col(|d| d.1),
            &col(|d| d.2),
            &col(|d| d.3),
            &col(|d| d.4),
            &col(|d| d.5),
        )
    }

    fn input_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.c];
        s.extend(self.dims.iter().map(|d| d.0));
        s
    }

    fn out_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.c];
        s.extend(self.dims.iter().map(|d| d.1));
        s
    }
}

/// Distinct-ish values from a seed (a few repeats, so ties happen).
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as u64).wrapping_mul(2_654_435_761).wrapping_add(seed) % 23) as f64 - 11.0)
        .collect()
}

/// `shape` filled with `v` in row-major order, laid out channels-last
/// (strided): the kernels must follow the input's strides.
fn strided(v: &[f64], shape: &[usize], dtype: DType, device: Device) -> Tensor {
    let nd = shape.len();
    // Build the permuted contiguous tensor, then permute back.
    let mut perm: Vec<usize> = vec![0];
    perm.extend(2..nd);
    perm.push(1);
    let pshape: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
    let strides: Vec<usize> = (0..nd).map(|d| shape[d + 1..].iter().product()).collect();
    let mut pv = vec![0.0; v.len()];
    for (flat, slot) in pv.iter_mut().enumerate() {
        // Coordinates in the permuted shape -> the original position.
        let mut rest = flat;
        let mut pos = 0;
        for i in (0..nd).rev() {
            let c = rest % pshape[i];
            rest /= pshape[i];
            pos += c * strides[perm[i]];
        }
        *slot = v[pos];
    }
    let inv: Vec<i64> = (0..nd)
        .map(|d| perm.iter().position(|&p| p == d).unwrap() as i64)
        .collect();
    Tensor::from_vec(pv, &pshape, Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
        .to_device(device, false)
        .unwrap()
        .permute(&inv)
        .unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64)
        .unwrap()
        .contiguous()
        .unwrap()
        .to_vec()
        .unwrap()
}

/// The input element (flat index into the plane) at kernel offset `k` of
/// window `o` (flat indices over the geometry's dims), if inside.
fn position(cs: &Case, o: usize, k: usize) -> Option<usize> {
    let nd = cs.dims.len();
    let (mut ro, mut rk) = (o, k);
    let mut coords = vec![0usize; nd];
    for i in (0..nd).rev() {
        let (l, on, kn, s, p, d) = cs.dims[i];
        let (oi, ki) = (ro % on, rk % kn);
        ro /= on;
        rk /= kn;
        let at = (oi * s + ki * d) as i64 - p as i64;
        if at < 0 || at >= l as i64 {
            return None;
        }
        coords[i] = at as usize;
    }
    Some(
        coords
            .iter()
            .zip(&cs.dims)
            .fold(0, |acc, (&c, d)| acc * d.0 + c),
    )
}

/// Reference columns `[N, C * K, O]` of the row-major input `x`.
fn columns_reference(cs: &Case, x: &[f64]) -> Vec<f64> {
    let kn: usize = cs.dims.iter().map(|d| d.2).product();
    let on: usize = cs.dims.iter().map(|d| d.1).product();
    let ln: usize = cs.dims.iter().map(|d| d.0).product();
    let mut out = Vec::new();
    for plane in 0..cs.n * cs.c {
        for k in 0..kn {
            for o in 0..on {
                out.push(position(cs, o, k).map_or(0.0, |p| x[plane * ln + p]));
            }
        }
    }
    out
}

/// PyTorch's scan (first maximum, last NaN) and the mean over the input
/// elements with the divisor of `mode`, `None` where a divisor is not
/// positive (a window past the input or wholly in the padding, which
/// pooling's own checks rule out).
type Pooled = (Vec<f64>, Vec<i64>, Option<Vec<f64>>);

fn pool_reference(cs: &Case, x: &[f64], mode: AvgMode) -> Pooled {
    let kn: usize = cs.dims.iter().map(|d| d.2).product();
    let on: usize = cs.dims.iter().map(|d| d.1).product();
    let ln: usize = cs.dims.iter().map(|d| d.0).product();
    let (mut mx, mut ix, mut mean) = (Vec::new(), Vec::new(), Some(Vec::new()));
    for plane in 0..cs.n * cs.c {
        for o in 0..on {
            let (mut best, mut at, mut sum) = (None::<f64>, None::<usize>, 0.0);
            for k in 0..kn {
                if let Some(p) = position(cs, o, k) {
                    let v = x[plane * ln + p];
                    sum += v;
                    if best.is_none_or(|b| v > b || v.is_nan()) {
                        best = Some(v);
                        at = Some(p);
                    }
                }
            }
            // The index of an empty window: its first position past the
            // left padding, per dim.
            let first = || {
                let mut rest = o;
                let mut coords = vec![0i64; cs.dims.len()];
                for i in (0..cs.dims.len()).rev() {
                    let (_, on_i, _, s, p, d) = cs.dims[i];
                    let oi = (rest % on_i) as i64;
                    rest /= on_i;
                    let mut start = oi * s as i64 - p as i64;
                    if start < 0 {
                        start += (-start + d as i64 - 1) / d as i64 * d as i64;
                    }
                    coords[i] = start;
                }
                coords
                    .iter()
                    .zip(&cs.dims)
                    .fold(0i64, |acc, (&c, d)| acc * d.0 as i64 + c)
            };
            mx.push(best.unwrap_or(f64::NEG_INFINITY));
            ix.push(at.map_or_else(first, |p| p as i64));
            let div = mode.divisor_override.unwrap_or_else(|| {
                let mut rest = o;
                let mut size = 1i64;
                for i in (0..cs.dims.len()).rev() {
                    let (l, on_i, k, s, p, _) = cs.dims[i];
                    let oi = (rest % on_i) as i64;
                    rest /= on_i;
                    let start = oi * s as i64 - p as i64;
                    let end = (start + k as i64).min(l as i64 + p as i64);
                    size *= if mode.count_include_pad {
                        end - start
                    } else {
                        end.min(l as i64) - start.max(0)
                    };
                }
                size
            });
            if div <= 0 {
                mean = None;
            }
            if let Some(m) = mean.as_mut() {
                m.push(sum / div as f64);
            }
        }
    }
    (mx, ix, mean)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

fn check_case(cs: &Case, device: Device) -> Result<(), TestCaseError> {
    let w = cs.windows();
    let shape = cs.input_shape();
    let numel: usize = shape.iter().product();
    let xv = values(numel, cs.seed);
    let x = strided(&xv, &shape, DType::F64, device);
    // Columns: exactly the indexed elements (bits copied in every dtype).
    let cols = x.window_columns(&w).unwrap();
    prop_assert_eq!(f64s(&cols), columns_reference(cs, &xv));
    let xi = strided(&xv, &shape, DType::I32, device);
    prop_assert_eq!(
        f64s(&xi.window_columns(&w).unwrap()),
        columns_reference(cs, &xv)
    );
    // Its adjoint: <cols(x), y> = <x, cols_sum(y)>.
    let yv = values(cols.numel(), cs.seed ^ 0x5eed);
    let y = Tensor::from_vec(yv.clone(), cols.shape(), device).unwrap();
    let back = y.window_columns_sum(&w).unwrap();
    prop_assert_eq!(back.shape(), &shape[..]);
    prop_assert!(close(dot(&f64s(&cols), &yv), dot(&xv, &f64s(&back))));
    // Pooling: only geometries whose every window reaches the input (as
    // PyTorch's pooling makes them); the others are refused, and so is a
    // dilated average.
    let out = cs.out_shape();
    let any_mode = AvgMode {
        count_include_pad: true,
        divisor_override: None,
    };
    let reaches = cs
        .dims
        .iter()
        .all(|&(l, o, k, s, p, d)| (k - 1) * d >= p && (o - 1) * s < l + p);
    if !reaches {
        let g = Tensor::zeros(&out, DType::F64, device).unwrap();
        let i = Tensor::zeros(&out, DType::I64, device).unwrap();
        prop_assert!(x.window_max(&w).is_err());
        prop_assert!(g.window_max_backward(&i, &w).is_err());
        prop_assert!(x.window_means(&w, any_mode).is_err());
        prop_assert!(g.window_means_backward(&w, any_mode).is_err());
        return Ok(());
    }
    let undilated = cs.dims.iter().all(|d| d.5 == 1);
    if !undilated {
        let g = Tensor::zeros(&out, DType::F64, device).unwrap();
        prop_assert!(x.window_means(&w, any_mode).is_err());
        prop_assert!(g.window_means_backward(&w, any_mode).is_err());
    }
    for mode in [
        AvgMode {
            count_include_pad: true,
            divisor_override: None,
        },
        AvgMode {
            count_include_pad: false,
            divisor_override: None,
        },
        AvgMode {
            count_include_pad: true,
            divisor_override: Some(3),
        },
    ] {
        let (mx, ix, mean) = pool_reference(cs, &xv, mode);
        let (v, i) = x.window_max(&w).unwrap();
        prop_assert_eq!(v.shape(), &out[..]);
        prop_assert_eq!(f64s(&v), mx.clone());
        prop_assert_eq!(i.to_vec::<i64>().unwrap(), ix.clone());
        // Max pooling's backward: each window's gradient to the element it
        // chose (a window without an input element passes nothing).
        let gv = values(ix.len(), cs.seed ^ 0xface);
        let g = Tensor::from_vec(gv.clone(), &out, device).unwrap();
        let ln: usize = cs.dims.iter().map(|d| d.0).product();
        let on: usize = cs.dims.iter().map(|d| d.1).product();
        let mut want = vec![0.0; numel];
        for (j, (&at, &gj)) in ix.iter().zip(&gv).enumerate() {
            if mx[j] != f64::NEG_INFINITY {
                want[(j / on) * ln + at as usize] += gj;
            }
        }
        let dx = g.window_max_backward(&i, &w).unwrap();
        prop_assert_eq!(dx.shape(), &shape[..]);
        prop_assert_eq!(f64s(&dx), want);
        let Some(mean) = mean.filter(|_| undilated) else {
            continue;
        };
        let m = f64s(&x.window_means(&w, mode).unwrap());
        prop_assert!(
            m.iter().zip(&mean).all(|(a, b)| close(*a, *b)),
            "{:?} vs {:?}",
            m,
            mean
        );
        // The backward is the adjoint of the means.
        let gv = values(mean.len(), cs.seed ^ 0xbeef);
        let g = Tensor::from_vec(gv.clone(), &out, device).unwrap();
        let dx = f64s(&g.window_means_backward(&w, mode).unwrap());
        prop_assert!(close(dot(&m, &gv), dot(&xv, &dx)));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn window_kernels_match_direct_loops(cs in case()) {
        check_case(&cs, Device::Cpu)?;
    }
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn window_kernels_match_direct_loops_on_a_gpu() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(160));
    runner
        .run(&case(), |cs| check_case(&cs, Device::Cuda(0)))
        .unwrap();
}

/// NaN wins a window (the last one), and the integer and half dtypes give
/// the float path's answers.
#[test]
fn max_pool_kernel_keeps_nan_and_every_dtype() {
    let w = Windows::new(&[5], &[2], &[3], &[2], &[0], &[1]);
    let x = Tensor::from_vec(
        vec![1.0, f64::NAN, 3.0, f64::NAN, 0.5],
        &[1, 1, 5],
        Device::Cpu,
    )
    .unwrap();
    let (v, i) = x.window_max(&w).unwrap();
    assert!(f64s(&v).iter().all(|v| v.is_nan()));
    assert_eq!(i.to_vec::<i64>().unwrap(), [1, 3]);
    let xi = Tensor::from_vec(vec![4i64, -2, 9, 9, i64::MIN], &[1, 1, 5], Device::Cpu).unwrap();
    let (v, i) = xi.window_max(&w).unwrap();
    assert_eq!(v.to_vec::<i64>().unwrap(), [9, 9]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [2, 2]);
    // i64 means truncate; an i64 sum wraps as PyTorch's does.
    let m = xi.window_means(
        &w,
        AvgMode {
            count_include_pad: true,
            divisor_override: None,
        },
    );
    assert_eq!(
        m.unwrap().to_vec::<i64>().unwrap(),
        [3, (9i64 + 9).wrapping_add(i64::MIN) / 3]
    );
    for dt in [DType::F16, DType::BF16, DType::F32] {
        let (v, _) = x.to_dtype(dt).unwrap().window_max(&w).unwrap();
        assert_eq!(v.dtype(), dt);
    }
}

/// Geometry that does not fit the input, or cannot be, is a typed error.
#[test]
fn bad_windows_are_typed_errors() {
    let x = Tensor::zeros(&[1, 2, 4, 4], DType::F32, Device::Cpu).unwrap();
    let ok = Windows::new(&[4, 4], &[2, 2], &[2, 2], &[2, 2], &[0, 0], &[1, 1]);
    assert!(x.window_columns(&ok).is_ok());
    let wrong_input = Windows::new(&[4, 5], &[2, 2], &[2, 2], &[2, 2], &[0, 0], &[1, 1]);
    let zero_kernel = Windows::new(&[4, 4], &[2, 2], &[0, 2], &[2, 2], &[0, 0], &[1, 1]);
    let zero_stride = Windows::new(&[4, 4], &[2, 2], &[2, 2], &[0, 2], &[0, 0], &[1, 1]);
    let huge = Windows::new(
        &[4, 4],
        &[usize::MAX, 2],
        &[2, 2],
        &[usize::MAX, 1],
        &[0, 0],
        &[1, 1],
    );
    let mut bad_spatial = ok;
    bad_spatial.spatial = 4;
    for w in [wrong_input, zero_kernel, zero_stride, huge, bad_spatial] {
        assert!(x.window_columns(&w).is_err(), "{w:?}");
        assert!(x.window_max(&w).is_err(), "{w:?}");
        let mode = AvgMode {
            count_include_pad: true,
            divisor_override: None,
        };
        assert!(x.window_means(&w, mode).is_err(), "{w:?}");
    }
    let mode = AvgMode {
        count_include_pad: true,
        divisor_override: Some(0),
    };
    assert!(x.window_means(&ok, mode).is_err());
    // Columns of the wrong shape, and integer columns other than i64
    // (which transposed convolutions sum since session 78), for the adjoint.
    let cols = x.window_columns(&ok).unwrap();
    assert!(cols.window_columns_sum(&ok).is_ok());
    assert!(cols
        .narrow(2, 0, 3)
        .unwrap()
        .window_columns_sum(&ok)
        .is_err());
    for dtype in [DType::I32, DType::U8] {
        assert!(cols
            .to_dtype(dtype)
            .unwrap()
            .window_columns_sum(&ok)
            .is_err());
    }
    let summed = cols.to_dtype(DType::I64).unwrap().window_columns_sum(&ok);
    assert_eq!(summed.unwrap().dtype(), DType::I64);
    assert!(x.to_dtype(DType::Bool).unwrap().window_max(&ok).is_err());
}

/// `F.unfold`/`F.fold` options and sizes at the limits of `usize` are
/// typed errors (or empty results), never a panic or a wrapped size.
#[test]
fn fold_options_at_the_limits_are_typed_errors() {
    use strata_tensor::FoldOptions;
    let x = Tensor::zeros(&[1, 2, 4, 4], DType::F32, Device::Cpu).unwrap();
    let m = usize::MAX;
    let extreme = [
        FoldOptions::new(&[m]),
        FoldOptions::new(&[2]).dilation(&[m]),
        FoldOptions::new(&[2]).padding(&[m]),
        FoldOptions::new(&[2]).stride(&[m]),
        FoldOptions::new(&[m, 1]).dilation(&[m, 1]),
        FoldOptions::new(&[2]).padding(&[m / 2, 0]),
        FoldOptions::new(&[2, 2, 2]),
    ];
    for o in &extreme {
        // A stride of usize::MAX leaves one block: a valid call.
        let r = x.im2col(o);
        assert!(r.is_err() || o.stride == [m], "{o:?}");
        let cols = Tensor::zeros(&[1, 8, 9], DType::F32, Device::Cpu).unwrap();
        assert!(cols.col2im(&[4, 4], o).is_err(), "{o:?}");
        assert!(cols.col2im(&[m, m], o).is_err(), "{o:?}");
    }
    let cols = Tensor::zeros(&[1, 8, 9], DType::F32, Device::Cpu).unwrap();
    assert!(cols.col2im(&[m, 4], &FoldOptions::new(&[2])).is_err());
    assert!(x
        .to_dtype(DType::I64)
        .unwrap()
        .im2col(&FoldOptions::new(&[2]))
        .is_err());
}

/// Pixel shuffles with factors at the limits of i64 are typed errors.
#[test]
fn pixel_shuffle_factors_at_the_limits_are_typed_errors() {
    let x = Tensor::zeros(&[1, 4, 2, 2], DType::F32, Device::Cpu).unwrap();
    for f in [i64::MAX, i64::MIN, 1 << 32, 0, -1] {
        assert!(x.pixel_shuffle(f).is_err(), "{f}");
        assert!(x.pixel_unshuffle(f).is_err(), "{f}");
    }
    let wide = Tensor::zeros(&[0, 4, 2, 2], DType::F32, Device::Cpu).unwrap();
    assert!(wide.pixel_shuffle(1 << 31).is_err());
    assert_eq!(x.pixel_shuffle(2).unwrap().shape(), [1, 1, 4, 4]);
    assert_eq!(x.pixel_unshuffle(2).unwrap().shape(), [1, 16, 1, 1]);
}

/// A kernel and padding far larger than the input (valid: one window over
/// the whole input) cost what the input costs, as PyTorch's clipped
/// windows do: the kernels walk only the offsets that land inside.
#[test]
fn huge_kernels_over_small_inputs_are_clipped() {
    use strata_tensor::PoolOptions;
    let x = Tensor::from_vec(vec![3.0f32, 9.0, -1.0], &[1, 1, 3], Device::Cpu).unwrap();
    let (k, p) = (1usize << 40, 1usize << 39);
    let opts = PoolOptions::new(&[k]).padding(&[p]);
    let (v, i) = x.max_pool1d_with_indices(&opts).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), [9.0]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [1]);
    let avg = x
        .avg_pool1d(&opts.clone().count_include_pad(false))
        .unwrap();
    assert_eq!(avg.to_vec::<f32>().unwrap(), [11.0 / 3.0]);
    // One window from ceil_mode with a huge stride (a case the hostile
    // sweep of `conv_pool_props` draws; it once walked all 2^40 offsets).
    let ceil = PoolOptions::new(&[k]).stride(&[usize::MAX]).ceil_mode(true);
    assert_eq!(
        x.avg_pool1d(&ceil).unwrap().to_vec::<f32>().unwrap(),
        [11.0 / 3.0]
    );
    assert_eq!(x.max_pool1d(&ceil).unwrap().to_vec::<f32>().unwrap(), [9.0]);
    // The backward of each walks the same clipped windows.
    let w = Windows::new(&[3], &[1], &[k], &[k], &[p], &[1]);
    let g = Tensor::ones(&[1, 1, 1], DType::F32, Device::Cpu).unwrap();
    assert_eq!(
        g.window_max_backward(&i.reshape(&[1, 1, 1]).unwrap(), &w)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [0.0, 1.0, 0.0]
    );
    let mode = AvgMode {
        count_include_pad: false,
        divisor_override: None,
    };
    assert_eq!(
        g.window_means_backward(&w, mode)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [1.0 / 3.0; 3]
    );
}
