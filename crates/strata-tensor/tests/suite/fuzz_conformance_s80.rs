//! Random tensor programs in the conformance format against PyTorch 2.15
//! (session 80): `tests/data/fuzz_s80.json.gz`, written by
//! `benches/anchors/fuzz_conformance_s80.py` (CPU, one thread), replayed by
//! the harness of `tests/conformance.rs` (`tests/conformance_replay/`, the
//! same binding, step running and comparison code).
//!
//! The generator draws argument forms at their edges that the earlier
//! fuzzers draw rarely: Python scalars outside the tensor's dtype, 0-d
//! tensors of every dtype in a scalar's place, chains of view steps over
//! size-0/size-1/odd-strided operands, in-place ops on views with operands of
//! other dtypes or aliasing the view, division by zero in every dtype and
//! mode, reductions with wrapped/repeated/empty dims, op chains, joining and
//! indexing with edge arguments, and creation/conversion at rounding points.

#[path = "../conformance_replay/mod.rs"]
mod conformance_replay;

use crate::pytorch_fixture::{fixture, gunzip};
use std::collections::BTreeMap;
use strata_tensor::Device;

/// Programs strata deliberately answers differently, with the reason.
const KNOWN: &[(&str, &str)] = &[];

#[test]
fn fuzz_s80_programs_match_pytorch() {
    let file = fixture(&gunzip(include_bytes!("../data/fuzz_s80.json.gz")));
    let known: BTreeMap<&str, &str> = KNOWN.iter().copied().collect();
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 1000, "{} cases", cases.len());
    let (mut failures, mut stale) = (Vec::new(), Vec::new());
    for case in cases {
        let id = case["id"].as_str().unwrap();
        let r = std::panic::catch_unwind(|| conformance_replay::run_case(case, Device::Cpu))
            .unwrap_or_else(|_| Err("panicked".into()));
        match (r, known.contains_key(id)) {
            (Ok(()), true) => stale.push(id.to_string()),
            (Err(e), false) => failures.push(format!("{id}: {e}")),
            _ => {}
        }
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    assert!(
        stale.is_empty(),
        "known differences that now match (remove them): {stale:?}"
    );
    assert!(
        failures.is_empty(),
        "{} of {} programs differ from PyTorch",
        failures.len(),
        cases.len()
    );
}

/// What the replay found, one focused test per fix (each fails without it).
mod fixes {
    use strata_tensor::{DType, Device, Tensor, TensorError};

    const CPU: Device = Device::Cpu;

    fn f32t(v: &[f32], shape: &[usize]) -> Tensor {
        Tensor::from_slice(v, shape, CPU).unwrap()
    }

    /// F.embedding checks padding_idx (in Python, against weight.size(0))
    /// before torch.embedding checks the weight's rank and the indices'
    /// dtype (s8000_join_index_0751: f32 indices, a (0, 2) weight,
    /// padding_idx -1).
    #[test]
    fn embedding_checks_padding_idx_first() {
        let idx = f32t(&[0.0], &[]);
        let w = Tensor::zeros(&[0, 2], DType::F32, CPU).unwrap();
        let e = Tensor::embedding(&idx, &w, Some(-1)).unwrap_err();
        assert!(matches!(e, TensorError::Index { .. }), "{e}");
        // a 1-D weight: padding_idx within its size, then the rank
        let w1 = Tensor::zeros(&[3], DType::F32, CPU).unwrap();
        let e = Tensor::embedding(&idx, &w1, Some(5)).unwrap_err();
        assert!(matches!(e, TensorError::Index { .. }), "{e}");
        let e = Tensor::embedding(&idx, &w1, Some(1)).unwrap_err();
        assert!(matches!(e, TensorError::Shape { .. }), "{e}");
        // a 0-d weight has no size(0) to read (IndexError: a dim error);
        // padding_idx 0 reads none
        let w0 = f32t(&[1.0], &[]);
        let e = Tensor::embedding(&idx, &w0, Some(1)).unwrap_err();
        assert!(matches!(e, TensorError::Dim { .. }), "{e}");
        let e = Tensor::embedding(&idx, &w0, Some(0)).unwrap_err();
        assert!(matches!(e, TensorError::Shape { .. }), "{e}");
        // valid arguments still work, and i64 indices with a bad
        // padding_idx still fail on it
        let w2 = f32t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let i = Tensor::from_slice(&[1i64], &[1], CPU).unwrap();
        let r = Tensor::embedding(&i, &w2, Some(-2)).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), [3.0, 4.0]);
        assert!(Tensor::embedding(&i, &w2, Some(2)).is_err());
    }

    /// `x.copy_(x)` returns at once in PyTorch (and so does a copy from an
    /// identical view), even where x's elements share memory
    /// (s8006_inplace_mix_1214: an expanded u8 tensor copied into itself).
    #[test]
    fn copy_into_itself_is_a_no_op() {
        let a = Tensor::from_slice(&[1u8, 8, 0], &[3], CPU).unwrap();
        let e = a.unsqueeze(0).unwrap().expand(&[2, -1]).unwrap();
        e.copy_(&e).unwrap();
        let same = a.unsqueeze(0).unwrap().expand(&[2, -1]).unwrap();
        e.copy_(&same).unwrap();
        assert_eq!(a.to_vec::<u8>().unwrap(), [1, 8, 0]);
        // another source still may not write an expanded tensor
        let other = Tensor::from_slice(&[5u8, 6, 7], &[3], CPU).unwrap();
        let err = e.copy_(&other).unwrap_err();
        assert!(matches!(err, TensorError::Overlap { .. }), "{err}");
        // nor a transposed view of the same elements into a square tensor
        let sq = f32t(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let err = sq.copy_(&sq.t().unwrap()).unwrap_err();
        assert!(matches!(err, TensorError::Overlap { .. }), "{err}");
    }

    /// PyTorch's get_overlap_status says Full for a tensor and itself before
    /// it looks at the sizes: `x.scatter_add_(d, i, x)` fails even when x is
    /// empty (s8003_inplace_mix_0083); another view of it does not.
    #[test]
    fn scatter_add_from_the_same_empty_tensor_overlaps() {
        let x = Tensor::zeros(&[0, 3], DType::F32, CPU).unwrap();
        let idx = Tensor::zeros(&[0, 1], DType::I64, CPU).unwrap();
        let e = x.scatter_add_(-1, &idx, &x).unwrap_err();
        assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
        let view = x.slice(0, None, None, 1).unwrap();
        x.scatter_add_(-1, &idx, &view).unwrap();
        // an empty tensor added to itself in place is fine (full overlap)
        x.add_(&x).unwrap();
    }

    /// A float addcmul_ converts its value to the kernel's opmath type with
    /// a check: f32 for f16/bf16/f32 outputs (s8002_inplace_mix_2282:
    /// value=-1e300 into bf16 is a `value` error), f64 for f64.
    #[test]
    fn addcmul_value_must_fit_the_opmath_type() {
        for dt in [DType::F32, DType::BF16, DType::F16] {
            let x = Tensor::zeros(&[2], dt, CPU).unwrap();
            let t = Tensor::ones(&[2], dt, CPU).unwrap();
            let e = x.addcmul_(&t, &t, -1e300).unwrap_err();
            assert!(matches!(e, TensorError::Value { .. }), "{dt}: {e}");
            let e = x.addcmul(&t, &t, 1e39).unwrap_err();
            assert!(matches!(e, TensorError::Value { .. }), "{dt}: {e}");
            // infinities and NaN convert; 70000 fits f32 (an f16 result of inf)
            x.addcmul_(&t, &t, f64::INFINITY).unwrap();
        }
        let x = Tensor::zeros(&[1], DType::F16, CPU).unwrap();
        let t = Tensor::ones(&[1], DType::F16, CPU).unwrap();
        x.addcmul_(&t, &t, 70000.0).unwrap();
        assert_eq!(x.to_vec_as::<f32>().unwrap(), [f32::INFINITY]);
        let x = Tensor::zeros(&[1], DType::F64, CPU).unwrap();
        let t = Tensor::ones(&[1], DType::F64, CPU).unwrap();
        x.addcmul_(&t, &t, 1e300).unwrap();
        assert_eq!(x.to_vec::<f64>().unwrap(), [1e300]);
    }

    /// PyTorch's CPU f32 pow by a scalar takes the exponent as a double (its
    /// scalar loop: `std::pow(float, double)`), so an exponent f32 cannot
    /// hold keeps its parity (s8010_scalar_edge_2039: an i32 -2^31 to the
    /// power 16777217.0 is -inf in f32, not +inf).
    #[test]
    fn f32_pow_keeps_a_double_exponent() {
        let x = Tensor::from_slice(&[i32::MIN; 3], &[3], CPU).unwrap();
        let r = x.pow(16_777_217.0).unwrap();
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_vec::<f32>().unwrap(), [f32::NEG_INFINITY; 3]);
        let m = f32t(&[-1.0, 2.0, -0.5], &[3]);
        let r = m.pow(16_777_217i64).unwrap();
        let got = r.to_vec::<f32>().unwrap();
        assert_eq!(got[0], -1.0);
        assert_eq!(got[1], f32::INFINITY);
        assert_eq!(got[2], -0.0);
        // an exponent f32 holds is unchanged: 2.5 and 16777216
        let r = m.pow(16_777_216i64).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(r[0], 1.0);
        let r = f32t(&[4.0], &[1])
            .pow(2.5)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(r, [32.0]);
    }
}
