//! Session 57's oracle sweep (forward seeds 3330-3345, gradient seeds
//! 367-382): the differences from PyTorch 2.15 it found, each pinned to
//! PyTorch's answer (the values and error classes below were read from
//! PyTorch 2.15 on the CPU, one thread; the snippets say how).

use strata_tensor::{DType, Device, Scalar, Tensor, TensorError};

fn mask(shape: &[usize], dtype: DType) -> Tensor {
    Tensor::ones(shape, dtype, Device::Cpu).unwrap()
}

/// `fuzz_ops.s3345_masked2_0753`: a mask that is both of the wrong dtype
/// and of a shape that does not broadcast is a broadcast error in PyTorch's
/// out-of-place `masked_scatter` and `masked_fill` (they broadcast self and
/// the mask before the in-place op checks the mask), a dtype error in
/// `masked_fill_` and `masked_select`. PyTorch 2.15:
///
/// ```python
/// x = torch.zeros(1, 3, 4, dtype=torch.float16)
/// m = torch.zeros(1, 3, 5, dtype=torch.int64)
/// x.masked_scatter(m, torch.zeros(5, dtype=torch.float16))  # size of tensor a (5) must match ...
/// x.masked_scatter(m, torch.zeros(5))           # size of tensor a (5) must match ... (broadcast first)
/// x.masked_scatter(m[..., :4], torch.zeros(5))  # expected self and source to have same dtypes
/// x.masked_scatter(m[..., :4], torch.zeros(5, dtype=torch.float16))  # only supports boolean masks
/// x.clone().masked_scatter_(m, torch.zeros(5, dtype=torch.float16))  # The expanded size of the tensor (4) ...
/// x.clone().masked_scatter_(m, torch.zeros(5))  # expected self and source to have same dtypes
/// x.masked_fill(m, 1.0)                # size of tensor a (5) must match ...
/// x.masked_fill(m[..., :4], torch.ones(2))  # only supports a 0-dimensional value tensor
/// x.masked_fill(m[..., :4], 1e10)      # only supports boolean masks
/// x.masked_fill(m.bool(), 1e10)        # size of tensor a (5) must match ...
/// x.clone().masked_fill_(m, 1.0)       # only supports boolean masks
/// x.clone().masked_fill_(m.bool(), torch.ones(2))  # only supports a 0-dimensional value tensor
/// x.clone().masked_fill_(m.bool(), 1e10)  # size of tensor a (4) must match ...
/// x.masked_select(m)                   # expected BoolTensor for mask
/// ```
#[test]
fn masked_ops_check_the_broadcast_mask_and_source_in_pytorchs_order() {
    let x = Tensor::zeros(&[1, 3, 4], DType::F16, Device::Cpu).unwrap();
    let bad_i = mask(&[1, 3, 5], DType::I64);
    let bad_b = mask(&[1, 3, 5], DType::Bool);
    let good_i = mask(&[1, 3, 4], DType::I64);
    let src16 = Tensor::zeros(&[12], DType::F16, Device::Cpu).unwrap();
    let src32 = Tensor::zeros(&[12], DType::F32, Device::Cpu).unwrap();
    let is_broadcast = |r: Result<Tensor, TensorError>| {
        matches!(
            r,
            Err(TensorError::Broadcast { .. } | TensorError::InPlaceBroadcast { .. })
        )
    };
    let is_dtype = |r: Result<Tensor, TensorError>| matches!(r, Err(TensorError::DType { .. }));
    let is_shape = |r: Result<Tensor, TensorError>| matches!(r, Err(TensorError::Shape { .. }));
    let is_value = |r: Result<Tensor, TensorError>| matches!(r, Err(TensorError::Value { .. }));

    assert!(is_broadcast(x.masked_scatter(&bad_i, &src16)));
    assert!(is_broadcast(x.masked_scatter(&bad_i, &src32)));
    assert!(is_dtype(x.masked_scatter(&good_i, &src32)));
    assert!(is_dtype(x.masked_scatter(&good_i, &src16)));
    assert!(is_broadcast(
        x.deep_clone().unwrap().masked_scatter_(&bad_i, &src16)
    ));
    assert!(is_dtype(
        x.deep_clone().unwrap().masked_scatter_(&bad_i, &src32)
    ));

    let big = Scalar::Float(1e10);
    let one = Scalar::Float(1.0);
    let v1 = Tensor::ones(&[2], DType::F32, Device::Cpu).unwrap();
    assert!(is_broadcast(x.masked_fill(&bad_i, one)));
    assert!(is_shape(x.masked_fill(&good_i, &v1)));
    assert!(is_dtype(x.masked_fill(&good_i, big)));
    assert!(is_broadcast(x.masked_fill(&bad_b, big)));
    assert!(is_dtype(x.deep_clone().unwrap().masked_fill_(&bad_i, one)));
    assert!(is_shape(x.deep_clone().unwrap().masked_fill_(&bad_b, &v1)));
    assert!(is_broadcast(
        x.deep_clone().unwrap().masked_fill_(&bad_b, big)
    ));
    assert!(is_value(
        x.deep_clone()
            .unwrap()
            .masked_fill_(&mask(&[1, 3, 4], DType::Bool), big)
    ));
    assert!(is_dtype(x.masked_select(&bad_i)));
}

/// Deterministic inputs: `((i * mul + off) % modulus - modulus / 2) / div`
/// in f32 (the same operations as the numpy script that fed PyTorch).
fn vals(n: usize, mul: usize, modulus: usize, div: f32, off: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * mul + off) % modulus) as i64 - (modulus / 2) as i64) as f32 / div)
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Gradient seed 351 program 1995 and seed 375 program 1360 (attention with
/// E = 3): PyTorch's CPU sums a product with inner size 3 as MKL's
/// small-matrix kernels do, each product rounded then added in order, where
/// the `gemm` crate fused them (one element of this `F.linear` of a 1-D
/// input differs); an f32 `x @ w.t()` of 16 x 16 x 16 is MKL's fused sum in
/// order, where the crate summed along `k` in lanes (137 of 256 differ); a
/// small `bmm` is PyTorch's own loop (rounded products in order); a small
/// `addmm` starts from the bias for a row-major `mat2` and adds it last for
/// a transposed one. Expected values: PyTorch 2.15 (CPU, one thread), from
/// these inputs (`vals` as below, in numpy f32):
///
/// ```python
/// F.linear(x, W)    # x = vals(3, 37, 101, 16.3), W = vals(9, 53, 97, 7.7, 5).reshape(3, 3)
/// X @ W.t()         # X = vals(256, 37, 101, 16.3).reshape(16, 16), W = vals(256, 53, 97, 7.7, 5).reshape(16, 16)
/// torch.bmm(A, B)   # vals(64, 37, 101, 16.3).reshape(2, 4, 8), vals(64, 53, 97, 7.7, 5).reshape(2, 8, 4)
/// torch.addmm(c, A, B)  # vals(12, 37, 101, 16.3).reshape(4, 3), vals(15, 53, 97, 7.7, 5).reshape(3, 5), c = vals(5, 29, 89, 0.37)
/// torch.addmm(c, A, B.t().contiguous().t())
/// ```
#[test]
fn small_f32_products_sum_in_pytorchs_cpu_order() {
    let cpu = Device::Cpu;
    let x = Tensor::from_slice(&vals(3, 37, 101, 16.3, 0), &[3], cpu).unwrap();
    let w = Tensor::from_slice(&vals(9, 53, 97, 7.7, 5), &[3, 3], cpu).unwrap();
    let y = x.matmul(&w.t().unwrap()).unwrap().to_vec::<f32>().unwrap();
    let want: &[f32] = &[9.592863, 0.37447166, 1.2030919];
    assert_eq!(bits(&y), bits(want));

    let xm = Tensor::from_slice(&vals(256, 37, 101, 16.3, 0), &[16, 16], cpu).unwrap();
    let wm = Tensor::from_slice(&vals(256, 53, 97, 7.7, 5), &[16, 16], cpu).unwrap();
    let y = xm.matmul(&wm.t().unwrap()).unwrap();
    let row = |r: i64| y.select(0, r).unwrap().to_vec::<f32>().unwrap();
    let want0: &[f32] = &[
        9.951399, -8.596923, 21.544102, -23.281013, 12.269939, -6.2783847, 37.001038, 5.3143167,
        -24.053862, -3.9598455, 39.319576, 7.6328588, -58.05912, -24.826708, 31.59111, 9.951399,
    ];
    let want7: &[f32] = &[
        8.732373, -5.4656997, 19.751413, -23.041988, 9.903595, -4.2944765, 36.379574, 6.7245617,
        -25.248981, -3.1232593, 37.550793, 7.895787, -58.083027, -22.8189, 30.993547, 9.067008,
    ];
    assert_eq!(bits(&row(0)), bits(want0));
    assert_eq!(bits(&row(7)), bits(want7));

    let a = Tensor::from_slice(&vals(64, 37, 101, 16.3, 0), &[2, 4, 8], cpu).unwrap();
    let b = Tensor::from_slice(&vals(64, 53, 97, 7.7, 5), &[2, 8, 4], cpu).unwrap();
    let want: &[f32] = &[
        33.78217, 10.756115, 2.4141505, -12.883436, 1.0756092, 13.281811, -21.655645, -1.7209787,
        11.82376, -18.795319, -2.2707365, -25.161345, -12.030916, -7.417737, -17.488651,
        -5.1470003, -13.321648, -14.580512, -9.656601, -14.006853, -16.166042, -8.612859,
        -11.106686, -12.054818, -1.3066692, -20.348976, 12.389452, -20.5641, -21.050117, 11.369614,
        1.2827682, 14.381327,
    ];
    assert_eq!(
        bits(&a.bmm(&b).unwrap().to_vec::<f32>().unwrap()),
        bits(want)
    );
    // The same product through matmul (PyTorch's bmm too).
    assert_eq!(
        bits(&a.matmul(&b).unwrap().to_vec::<f32>().unwrap()),
        bits(want)
    );

    let a = Tensor::from_slice(&vals(12, 37, 101, 16.3, 0), &[4, 3], cpu).unwrap();
    let b = Tensor::from_slice(&vals(15, 53, 97, 7.7, 5), &[3, 5], cpu).unwrap();
    let c = Tensor::from_slice(&vals(5, 29, 89, 0.37, 0), &[5], cpu).unwrap();
    let first = c.addmm(&a, &b).unwrap().to_vec::<f32>().unwrap();
    let want: &[f32] = &[
        -104.30653,
        -50.898277,
        49.65363,
        103.06188,
        -36.926743,
        -105.34231,
        -54.722675,
        50.76908,
        101.38871,
        -33.660072,
        -106.378075,
        -58.547073,
        51.884525,
        99.71554,
        -30.393398,
        -109.02329,
        -28.573362,
        44.148094,
        124.598015,
        -43.221066,
    ];
    assert_eq!(bits(&first), bits(want));
    let bt = b.t().unwrap().contiguous().unwrap().t().unwrap();
    let last = c.addmm(&a, &bt).unwrap().to_vec::<f32>().unwrap();
    let want: &[f32] = &[
        -104.30653,
        -50.898277,
        49.65363,
        103.06188,
        -36.926743,
        -105.34231,
        -54.722675,
        50.769077,
        101.38871,
        -33.660072,
        -106.37808,
        -58.547073,
        51.88453,
        99.71554,
        -30.393398,
        -109.023285,
        -28.573364,
        44.14809,
        124.59802,
        -43.22106,
    ];
    assert_eq!(bits(&last), bits(want));
}

/// An f64 product with inner size 3 (MKL's small kernel: rounded products
/// in order). PyTorch 2.15: `(A / 3) @ (B / 7)` in f64 with
/// `A = vals(6, 37, 101, 16.3).reshape(2, 3)`,
/// `B = vals(6, 53, 97, 7.7, 5).reshape(3, 2)` (the f32 values widened).
#[test]
fn small_f64_products_sum_in_pytorchs_cpu_order() {
    let cpu = Device::Cpu;
    let w = |v: Vec<f32>, d: f64| v.into_iter().map(|x| f64::from(x) / d).collect::<Vec<_>>();
    let a = Tensor::from_slice(&w(vals(6, 37, 101, 16.3, 0), 3.0), &[2, 3], cpu).unwrap();
    let b = Tensor::from_slice(&w(vals(6, 53, 97, 7.7, 5), 7.0), &[3, 2], cpu).unwrap();
    let y = a.matmul(&b).unwrap().to_vec::<f64>().unwrap();
    let want: [f64; 4] = [
        0.7557736910428292,
        -0.028455334715852376,
        0.3687811585018147,
        0.18780518824159712,
    ];
    assert_eq!(
        y.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
}
