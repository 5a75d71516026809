//! Session 82: `randperm`, `bernoulli`/`bernoulli_` and `multinomial`.
//! Their draws are strata's (seeded Philox), so they are checked by what
//! they must be: a permutation, frequencies within a few standard errors of
//! the weights (the seeds are fixed, so each check is deterministic), the
//! same result for the same seed; and PyTorch 2.15's refusals (each case
//! below names the PyTorch call and what it raised, seen on its CPU).

use proptest::prelude::*;
use strata_tensor::{DType, Device, Tensor, TensorError};

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, Device::Cpu).unwrap()
}

/// Category counts of the samples `s` (indices below `k`).
fn counts(s: &[i64], k: usize) -> Vec<f64> {
    let mut c = vec![0.0; k];
    for &i in s {
        c[i as usize] += 1.0;
    }
    c
}

/// Whether every count is within 5 standard errors of `n * w / sum(w)`.
fn frequencies_fit(c: &[f64], w: &[f64], n: f64) -> bool {
    let total: f64 = w.iter().sum();
    c.iter().zip(w).all(|(&got, &wi)| {
        let p = wi / total;
        (got - n * p).abs() <= 5.0 * (n * p * (1.0 - p)).sqrt() + 1e-9
    })
}

#[test]
fn multinomial_with_replacement_draws_in_proportion_to_the_weights() {
    let w = [0.5, 0.0, 2.0, 1.5, 0.0, 4.0];
    let t = Tensor::from_slice(&w, &[6], Device::Cpu).unwrap();
    let n = 200_000;
    let s = t.multinomial(n, true, 11).unwrap().to_vec::<i64>().unwrap();
    let c = counts(&s, 6);
    assert_eq!((c[1], c[4]), (0.0, 0.0), "a zero weight was drawn");
    assert!(frequencies_fit(&c, &w, n as f64), "{c:?}");
    // The same seed, the same samples; another seed, others.
    assert_eq!(
        t.multinomial(n, true, 11).unwrap().to_vec::<i64>().unwrap(),
        s
    );
    assert_ne!(
        t.multinomial(n, true, 12).unwrap().to_vec::<i64>().unwrap(),
        s
    );
}

#[test]
fn multinomial_without_replacement_races_the_weights() {
    // The first of the draws is a draw from the weights; every row's draws
    // are distinct, the non-zero weights before the zero ones.
    let w = [1.0f32, 0.0, 3.0, 6.0];
    let rows = 40_000;
    let t = f32s(&w.repeat(rows), &[rows, 4]);
    let s = t.multinomial(4, false, 3).unwrap();
    assert_eq!(s.shape(), &[rows, 4]);
    let s = s.to_vec::<i64>().unwrap();
    for r in s.chunks(4) {
        let mut sorted = r.to_vec();
        sorted.sort();
        assert_eq!(sorted, [0, 1, 2, 3]);
        assert_eq!(r[3], 1, "the zero weight comes last: {r:?}");
    }
    let first: Vec<i64> = s.chunks(4).map(|r| r[0]).collect();
    let w64: Vec<f64> = w.iter().map(|&x| f64::from(x)).collect();
    assert!(frequencies_fit(&counts(&first, 4), &w64, rows as f64));
    // A 1-D input gives a 1-D result; f16 weights are taken too.
    let h = f32s(&w, &[4]).to_dtype(DType::F16).unwrap();
    assert_eq!(h.multinomial(2, false, 1).unwrap().shape(), &[2]);
}

#[test]
fn multinomial_refuses_what_pytorch_refuses() {
    let w = f32s(&[0.0, 1.0, 0.0, 2.0], &[4]);
    let value = |r: Result<Tensor, TensorError>| matches!(r, Err(TensorError::Value { .. }));
    // torch.multinomial(w, 5): "cannot sample n_sample > prob_dist.size(-1)
    // samples without replacement"; with replacement it samples.
    assert!(value(w.multinomial(5, false, 0)));
    assert_eq!(w.multinomial(5, true, 0).unwrap().shape(), &[5]);
    // n_sample 0: "cannot sample n_sample <= 0 samples".
    assert!(value(w.multinomial(0, true, 0)));
    // "probability tensor contains either `inf`, `nan` or element < 0".
    for bad in [-1.0, f32::INFINITY, f32::NAN] {
        assert!(value(f32s(&[0.0, 1.0, bad], &[3]).multinomial(1, true, 0)));
    }
    // "invalid multinomial distribution (sum of probabilities <= 0)".
    assert!(value(f32s(&[0.0, 0.0], &[2]).multinomial(1, true, 0)));
    assert!(value(
        f32s(&[1.0, 1.0, 0.0, 0.0], &[2, 2]).multinomial(1, false, 0)
    ));
    // "multinomial only supports floating-point dtypes for input".
    let ints = Tensor::from_slice(&[1i64, 2], &[2], Device::Cpu).unwrap();
    assert!(matches!(
        ints.multinomial(1, true, 0),
        Err(TensorError::DType { .. })
    ));
    // "prob_dist must be 1 or 2 dim".
    for shape in [&[][..], &[1, 1, 2][..]] {
        let n: usize = shape.iter().product();
        let t = f32s(&vec![1.0; n], shape);
        assert!(matches!(
            t.multinomial(1, true, 0),
            Err(TensorError::Shape { .. })
        ));
    }
    // No rows: an empty [0, n] result; no categories: nothing to sample.
    let none = Tensor::ones(&[0, 3], DType::F32, Device::Cpu).unwrap();
    assert_eq!(none.multinomial(2, false, 0).unwrap().shape(), &[0, 2]);
    let empty = Tensor::ones(&[2, 0], DType::F32, Device::Cpu).unwrap();
    assert!(value(empty.multinomial(2, false, 0)));
    // Tiny and huge weights still give a distribution (PyTorch: [0]).
    assert_eq!(
        f32s(&[1e-45, 0.0], &[2])
            .multinomial(1, true, 0)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        [0]
    );
    assert!(f32s(&[3e38, 3e38], &[2]).multinomial(1, true, 0).is_ok());
}

#[test]
fn bernoulli_draws_each_probability() {
    let p = [0.0, 0.1, 0.5, 0.9, 1.0];
    let n = 50_000;
    let probs: Vec<f64> = p.iter().flat_map(|&x| std::iter::repeat_n(x, n)).collect();
    let t = Tensor::from_slice(&probs, &[p.len(), n], Device::Cpu).unwrap();
    let d = t.bernoulli(9).unwrap();
    assert_eq!(d.dtype(), DType::F64);
    let ones = d.sum(Some(&[1]), false).unwrap().to_vec::<f64>().unwrap();
    assert_eq!((ones[0], ones[4]), (0.0, n as f64));
    for (k, &pk) in p.iter().enumerate() {
        let sd = (n as f64 * pk * (1.0 - pk)).sqrt();
        assert!(
            (ones[k] - n as f64 * pk).abs() <= 5.0 * sd + 1e-9,
            "{k}: {ones:?}"
        );
    }
    // torch.bernoulli(torch.tensor([0.5, 1.5])) and NaN: "Expected p_in >= 0
    // && p_in <= 1"; integer inputs: not implemented for 'Long'.
    for bad in [1.5f32, -0.5, f32::NAN] {
        assert!(matches!(
            f32s(&[0.5, bad], &[2]).bernoulli(0),
            Err(TensorError::Value { .. })
        ));
    }
    let ints = Tensor::from_slice(&[1i64, 0], &[2], Device::Cpu).unwrap();
    assert!(ints.bernoulli(0).is_err());
}

#[test]
fn bernoulli_in_place_fills_any_dtype_and_refuses_a_bad_p() {
    let x = Tensor::zeros(&[4000], DType::I32, Device::Cpu).unwrap();
    x.bernoulli_(0.25, 5).unwrap();
    let v = x.to_vec::<i32>().unwrap();
    assert!(v.iter().all(|&e| e == 0 || e == 1));
    let ones = v.iter().filter(|&&e| e == 1).count() as f64;
    assert!((ones - 1000.0).abs() <= 5.0 * (4000.0f64 * 0.25 * 0.75).sqrt());
    let b = Tensor::zeros(&[8], DType::Bool, Device::Cpu).unwrap();
    b.bernoulli_(1.0, 5).unwrap();
    assert!(b.to_vec::<bool>().unwrap().iter().all(|&e| e));
    // "bernoulli_ expects p to be in [0, 1], but got p=1.5": x unchanged.
    assert!(matches!(
        x.bernoulli_(1.5, 5),
        Err(TensorError::Value { .. })
    ));
    assert!(x.bernoulli_(f64::NAN, 5).is_err());
    assert_eq!(x.to_vec::<i32>().unwrap(), v);
}

#[test]
fn randperm_refuses_what_pytorch_refuses() {
    let value = |r: Result<Tensor, TensorError>| matches!(r, Err(TensorError::Value { .. }));
    // torch.randperm(257, dtype=torch.uint8): "value cannot be converted to
    // type uint8_t without overflow"; 256 is fine.
    assert!(value(Tensor::randperm(
        257,
        Some(DType::U8),
        0,
        Device::Cpu
    )));
    assert_eq!(
        Tensor::randperm(256, Some(DType::U8), 0, Device::Cpu)
            .unwrap()
            .shape(),
        &[256]
    );
    // torch.randperm(2050, dtype=torch.float16): "n cannot be greater than
    // 2049 for Half type".
    assert!(value(Tensor::randperm(
        2050,
        Some(DType::F16),
        0,
        Device::Cpu
    )));
    assert!(Tensor::randperm(2049, Some(DType::F16), 0, Device::Cpu).is_ok());
    // bf16 past 257 (PyTorch does not check; its values would repeat).
    assert!(value(Tensor::randperm(
        258,
        Some(DType::BF16),
        0,
        Device::Cpu
    )));
    // '"randperm" not implemented for 'Bool''.
    assert!(matches!(
        Tensor::randperm(3, Some(DType::Bool), 0, Device::Cpu),
        Err(TensorError::DType { .. })
    ));
    assert_eq!(
        Tensor::randperm(0, None, 0, Device::Cpu).unwrap().shape(),
        &[0]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `randperm(n)` holds each of `0..n` once, in every dtype that can hold
    /// it, and the same seed gives the same order in each.
    #[test]
    fn randperm_is_a_permutation(n in 0usize..300, seed in any::<u64>()) {
        let p = Tensor::randperm(n, None, seed, Device::Cpu).unwrap().to_vec::<i64>().unwrap();
        let mut sorted = p.clone();
        sorted.sort();
        prop_assert_eq!(sorted, (0..n as i64).collect::<Vec<_>>());
        for dtype in [DType::I32, DType::F32, DType::F64] {
            let q = Tensor::randperm(n, Some(dtype), seed, Device::Cpu)
                .unwrap()
                .to_dtype(DType::I64)
                .unwrap()
                .to_vec::<i64>()
                .unwrap();
            prop_assert_eq!(&q, &p);
        }
    }

    /// Every draw of `multinomial` is a category of non-zero weight (with
    /// replacement), or a distinct category (without), for random weights.
    #[test]
    fn multinomial_draws_only_what_it_may(
        w in prop::collection::vec(prop_oneof![Just(0.0f64), 0.001f64..10.0], 1..12),
        k in 1usize..12,
        replacement in any::<bool>(),
        seed in any::<u64>(),
    ) {
        prop_assume!(w.iter().any(|&x| x > 0.0));
        let t = Tensor::from_slice(&w, &[w.len()], Device::Cpu).unwrap();
        let r = t.multinomial(k, replacement, seed);
        if !replacement && k > w.len() {
            prop_assert!(r.is_err());
            return Ok(());
        }
        let s = r.unwrap().to_vec::<i64>().unwrap();
        prop_assert_eq!(s.len(), k);
        if replacement {
            prop_assert!(s.iter().all(|&i| w[i as usize] > 0.0));
        } else {
            let mut d = s.clone();
            d.sort();
            d.dedup();
            prop_assert_eq!(d.len(), k);
            // The non-zero weights come first.
            let nonzero = w.iter().filter(|&&x| x > 0.0).count();
            prop_assert!(s.iter().take(nonzero.min(k)).all(|&i| w[i as usize] > 0.0));
        }
    }
}

/// The same seed draws the same numbers on every device: a GPU's
/// permutation and Bernoulli draws are the CPU's, and its multinomial
/// draws obey the same rules.
#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn sampling_on_a_gpu_matches_the_cpu() {
    let gpu = crate::hostile_calls::gpu();
    let cpu_perm = Tensor::randperm(5000, None, 4, Device::Cpu).unwrap();
    let gpu_perm = Tensor::randperm(5000, None, 4, gpu).unwrap();
    assert_eq!(
        gpu_perm.to_vec::<i64>().unwrap(),
        cpu_perm.to_vec::<i64>().unwrap()
    );
    let p = Tensor::rand(&[3000], DType::F32, 1, Device::Cpu).unwrap();
    assert_eq!(
        p.to_device(gpu, false)
            .unwrap()
            .bernoulli(2)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        p.bernoulli(2).unwrap().to_vec::<f32>().unwrap()
    );
    let w = Tensor::from_slice(&[0.0f32, 2.0, 0.0, 1.0, 5.0], &[1, 5], gpu).unwrap();
    let s = w
        .multinomial(10_000, true, 8)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    assert!(s.iter().all(|&i| [1, 3, 4].contains(&i)));
    let mut d = w.multinomial(5, false, 8).unwrap().to_vec::<i64>().unwrap();
    d.sort();
    assert_eq!(d, [0, 1, 2, 3, 4]);
}

/// `feature_dropout` (and `dropout1d/2d/3d`) drop whole channels: every
/// channel of every sample is all zeros or all `x / (1 - p)`, about `p` of
/// them dropped; the rank rules are PyTorch's.
#[test]
fn feature_dropout_drops_whole_channels() {
    let (n, c, l) = (40, 100, 6);
    let x = Tensor::ones(&[n, c, l], DType::F32, Device::Cpu).unwrap();
    let y = x
        .feature_dropout(0.3, true, 21)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let scale = 1.0 / 0.7f32;
    let mut dropped = 0.0;
    for ch in y.chunks(l) {
        assert!(
            ch.iter().all(|&v| v == ch[0]),
            "a channel was split: {ch:?}"
        );
        assert!(ch[0] == 0.0 || ch[0] == scale, "{}", ch[0]);
        dropped += f64::from(u8::from(ch[0] == 0.0));
    }
    let channels = (n * c) as f64;
    assert!(
        (dropped - 0.3 * channels).abs() <= 5.0 * (channels * 0.21).sqrt(),
        "{dropped}"
    );
    // dropout2d is feature_dropout; the same seed, the same mask.
    assert_eq!(
        x.dropout2d(0.3, true, 21).unwrap().to_vec::<f32>().unwrap(),
        y
    );
    // Unbatched forms: [C, L] for dropout1d, [C, D, H, W] for dropout3d.
    let u = Tensor::ones(&[50, 4], DType::F32, Device::Cpu).unwrap();
    let v = u.dropout1d(0.5, true, 2).unwrap();
    assert_eq!(v.shape(), &[50, 4]);
    assert!(v
        .to_vec::<f32>()
        .unwrap()
        .chunks(4)
        .all(|r| r.iter().all(|&e| e == r[0])));
    let w = Tensor::ones(&[6, 2, 2, 2], DType::F32, Device::Cpu).unwrap();
    let z = w.dropout3d(0.5, true, 2).unwrap().to_vec::<f32>().unwrap();
    assert!(z.chunks(8).all(|r| r.iter().all(|&e| e == r[0])));
    // F.dropout1d: "Expected 2D or 3D input"; feature dropout of 1-D in
    // training: "Feature dropout requires at least 2 dimensions".
    let four = Tensor::ones(&[2, 2, 2, 2], DType::F32, Device::Cpu).unwrap();
    assert!(matches!(
        four.dropout1d(0.5, true, 0),
        Err(TensorError::Shape { .. })
    ));
    let one = Tensor::ones(&[5], DType::F32, Device::Cpu).unwrap();
    assert!(matches!(
        one.feature_dropout(0.5, true, 0),
        Err(TensorError::Shape { .. })
    ));
    // No mask needed: the input itself (eval), zeros (p = 1), and a bad p.
    assert_eq!(
        one.feature_dropout(0.5, false, 0)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        [1.0; 5]
    );
    assert_eq!(
        x.feature_dropout(1.0, true, 0)
            .unwrap()
            .sum(None, false)
            .unwrap()
            .item::<f32>()
            .unwrap(),
        0.0
    );
    assert!(matches!(
        x.feature_dropout(1.5, true, 0),
        Err(TensorError::Value { .. })
    ));
    let ints = Tensor::ones(&[2, 3], DType::I64, Device::Cpu).unwrap();
    assert!(ints.feature_dropout(0.5, true, 0).is_err());
}
