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
//! indexing with edge arguments, creation/conversion at rounding points, and
//! ops with two or more faulty arguments at once (PyTorch's order of checks
//! decides the error class). 8,000 programs (seed 8000); the sweep behind it
//! replayed 54,000 more (seeds 8001-8010, 8101-8104, 8201-8206).
//!
//! What it found (each fixed, with a focused test in [`fixes`]):
//! - `embedding` checked the indices' dtype before padding_idx;
//! - `x.copy_(x)` of an expanded x was an overlap error (PyTorch returns at
//!   once when src is self or an identical view);
//! - `x.scatter_add_(d, i, x)` of an empty x was accepted (PyTorch's
//!   overlap status of a tensor and itself is Full before it looks at sizes);
//! - a float `addcmul_` took a value its opmath type cannot hold (1e300 into
//!   bf16/f32);
//! - f32 `pow` by a scalar that f32 cannot hold (16777217.0) rounded the
//!   exponent, where PyTorch's scalar loop keeps it as a double;
//! - nll_loss / cross_entropy / layer_norm / mse_loss / scatter_add checked
//!   their arguments in another order than PyTorch (a dtype error where
//!   PyTorch names a shape, and back); cross_entropy told probability
//!   targets by their dtype, PyTorch by their shape (the input's); a (C)
//!   input refused a target of shape [1], which PyTorch takes as 0-d.
//!
//! Left as it is: PyTorch's CPU f32 pow by such an exponent rounds it to f32
//! in its vectorised loop (each full block of 32 contiguous elements under
//! AVX-512) and keeps the double in its scalar loop (the rest); strata
//! computes a tensor of fewer than 32 elements in f64 and a larger one in
//! f32, so only a large tensor's last `n % 32` elements can differ.

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
        // 64 elements: PyTorch 2.15 (AVX-512) runs both blocks of 32 through
        // its vectorised loop, whose f32 exponent is 16777216 (even): +inf.
        let x = Tensor::from_slice(&[i32::MIN; 64], &[64], CPU).unwrap();
        let r = x.pow(16_777_217.0).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(r, [f32::INFINITY; 64]);
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

    fn t(shape: &[usize], dt: DType) -> Tensor {
        Tensor::zeros(shape, dt, CPU).unwrap()
    }

    fn class(r: strata_tensor::Result<Tensor>) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(TensorError::Shape { .. }) => "shape",
            Err(TensorError::Dim { .. }) => "dim",
            Err(TensorError::DType { .. }) => "dtype",
            Err(TensorError::Value { .. }) => "value",
            Err(TensorError::Broadcast { .. }) => "broadcast",
            Err(e) => panic!("unexpected error {e}"),
        }
    }

    /// nll_loss checks shapes and the targets' dtype (nll_loss_nd, then
    /// nll_loss's meta function) before its kernel reads the input's dtype
    /// and the weight's; PyTorch 2.15's answers to programs with two faults
    /// (fuzz_conformance_s80 seeds 8101-8104, multi_fault).
    #[test]
    fn nll_loss_checks_in_pytorchs_order() {
        use strata_tensor::Reduction::Mean;
        let nll = |x: &Tensor, y: &Tensor, w: Option<&Tensor>| class(x.nll_loss(y, w, -100, Mean));
        // batch sizes before the input's dtype: i32 (2, 3) with 3 targets
        assert_eq!(
            nll(&t(&[2, 3], DType::I32), &t(&[3], DType::I64), None),
            "shape"
        );
        // a 0-d target's batch size reads as 0
        assert_eq!(
            nll(&t(&[2, 3], DType::I64), &t(&[], DType::I32), None),
            "shape"
        );
        // ... and with no rows, the dtype of the target, then its missing dim 0
        assert_eq!(
            nll(&t(&[0, 3], DType::F64), &t(&[], DType::I32), None),
            "dtype"
        );
        assert_eq!(
            nll(&t(&[0, 3], DType::F32), &t(&[], DType::U8), None),
            "dim"
        );
        // the target's rank before its dtype, its dtype before the weight
        assert_eq!(
            nll(&t(&[2, 3], DType::F32), &t(&[2, 2], DType::Bool), None),
            "shape"
        );
        let w4 = t(&[4], DType::F32);
        assert_eq!(
            nll(&t(&[3], DType::F16), &t(&[2], DType::Bool), Some(&w4)),
            "dtype"
        );
        // the weight's shape before the input's dtype and the weight's
        let w4u = t(&[4], DType::U8);
        assert_eq!(
            nll(&t(&[2, 3], DType::U8), &t(&[2], DType::I64), Some(&w4u)),
            "shape"
        );
        // (N, C, d1): the target's size, then its dtype, before the input's
        assert_eq!(
            nll(&t(&[2, 3, 2], DType::Bool), &t(&[2], DType::I32), None),
            "shape"
        );
        assert_eq!(
            nll(&t(&[2, 3, 4], DType::I32), &t(&[2, 4], DType::I32), None),
            "dtype"
        );
        // 0-d input; single faults unchanged
        assert_eq!(nll(&t(&[], DType::I32), &t(&[], DType::I64), None), "shape");
        assert_eq!(
            nll(&t(&[2, 3], DType::I32), &t(&[2], DType::I64), None),
            "dtype"
        );
        assert_eq!(
            nll(&t(&[2, 3], DType::F32), &t(&[2], DType::I64), None),
            "ok"
        );
        assert_eq!(nll(&t(&[3], DType::F32), &t(&[1], DType::I64), None), "ok");
        assert_eq!(nll(&t(&[3], DType::F32), &t(&[], DType::I64), None), "ok");
        let w3 = t(&[3], DType::F64);
        assert_eq!(
            nll(&t(&[2, 3], DType::F32), &t(&[2], DType::I64), Some(&w3)),
            "dtype"
        );
        // a (C) input takes a target of shape [1] as its 0-d target:
        // F.nll_loss(tensor([0.5, -1, 2]), tensor([2]), reduction="none")
        // is tensor(-2.), and so is cross_entropy's shape
        let x = f32t(&[0.5, -1.0, 2.0], &[3]);
        let y = Tensor::from_slice(&[2i64], &[1], CPU).unwrap();
        let r = x
            .nll_loss(&y, None, -100, strata_tensor::Reduction::None)
            .unwrap();
        assert_eq!(r.shape(), &[] as &[usize]);
        assert_eq!(r.to_vec::<f32>().unwrap(), [-2.0]);
        let args = strata_tensor::CrossEntropyArgs {
            weight: None,
            ignore_index: -100,
            reduction: strata_tensor::Reduction::None,
            label_smoothing: 0.0,
        };
        let r = x.cross_entropy(&y, args).unwrap();
        assert_eq!(r.shape(), &[] as &[usize]);
        let want = (0.5f64.exp() + (-1.0f64).exp() + 2.0f64.exp()).ln() - 2.0;
        assert!((f64::from(r.to_vec::<f32>().unwrap()[0]) - want).abs() < 1e-6);
    }

    /// cross_entropy reads a target of the input's very shape as class
    /// probabilities (a float tensor), any other as class indices through
    /// log_softmax and nll_loss's checks.
    #[test]
    fn cross_entropy_checks_in_pytorchs_order() {
        use strata_tensor::CrossEntropyArgs;
        let ce = |x: &Tensor, y: &Tensor, w: Option<&Tensor>, ls: f64| {
            class(x.cross_entropy(
                y,
                CrossEntropyArgs {
                    weight: w,
                    ignore_index: -100,
                    reduction: strata_tensor::Reduction::Mean,
                    label_smoothing: ls,
                },
            ))
        };
        // i64 targets of the input's shape: probabilities of the wrong dtype
        let w4 = t(&[4], DType::F32);
        assert_eq!(
            ce(&t(&[3], DType::F32), &t(&[3], DType::I64), Some(&w4), 0.0),
            "dtype"
        );
        assert_eq!(
            ce(&t(&[2, 3], DType::F32), &t(&[2, 3], DType::I64), None, 0.0),
            "dtype"
        );
        // f32 targets of another shape: class indices of the wrong dtype
        assert_eq!(
            ce(&t(&[2, 3], DType::F64), &t(&[2], DType::F32), None, 0.0),
            "dtype"
        );
        assert_eq!(
            ce(
                &t(&[2, 3, 4], DType::F32),
                &t(&[2, 4], DType::F32),
                None,
                0.0
            ),
            "dtype"
        );
        // a 0-d input has no class dim for log_softmax
        assert_eq!(
            ce(&t(&[], DType::I64), &t(&[2], DType::I64), None, 0.0),
            "dim"
        );
        assert_eq!(
            ce(&t(&[], DType::F32), &t(&[], DType::I64), None, 0.0),
            "dtype"
        );
        // log_softmax of an empty integer input passes: the batch sizes fail
        assert_eq!(
            ce(&t(&[0, 3], DType::Bool), &t(&[3], DType::I64), None, 0.0),
            "shape"
        );
        // an integer input with elements fails in log_softmax, first
        assert_eq!(
            ce(&t(&[2, 3], DType::I64), &t(&[3], DType::I64), None, 0.0),
            "dtype"
        );
        // the batch sizes before the weight's dtype
        let w3 = t(&[3], DType::F32);
        assert_eq!(
            ce(&t(&[2, 3], DType::F64), &t(&[], DType::I64), Some(&w3), 0.0),
            "shape"
        );
        // label smoothing above 1 first on the index path
        assert_eq!(
            ce(&t(&[2, 3], DType::I64), &t(&[3], DType::I64), None, 1.5),
            "value"
        );
        // valid calls
        assert_eq!(
            ce(&t(&[2, 3], DType::F32), &t(&[2, 3], DType::F32), None, -0.5),
            "ok"
        );
        assert_eq!(
            ce(&t(&[2, 3], DType::F32), &t(&[2], DType::I64), None, 0.2),
            "ok"
        );
    }

    /// layer_norm on the CPU checks a mixed-dtype call before the shapes;
    /// mse_loss broadcasts (and checks the weight's shape) before its
    /// kernel's dtype check.
    #[test]
    fn layer_norm_and_mse_loss_check_in_pytorchs_order() {
        let ln = |x: &Tensor, ns: &[usize], w: Option<&Tensor>, b: Option<&Tensor>| {
            class(x.layer_norm(ns, w, b, 1e-5))
        };
        let u8w = t(&[2, 3, 1], DType::U8);
        assert_eq!(
            ln(&t(&[2], DType::F32), &[2, 3, 1], Some(&u8w), None),
            "dtype"
        );
        let f32w = t(&[5], DType::F32);
        assert_eq!(
            ln(&t(&[3, 1], DType::Bool), &[2, 3, 1], Some(&f32w), None),
            "dtype"
        );
        assert_eq!(
            ln(&t(&[2, 2], DType::F64), &[2], Some(&f32w), None),
            "dtype"
        );
        // f16 with f32 parameters is allowed (then the shapes are checked)
        assert_eq!(
            ln(&t(&[2, 2], DType::F16), &[2], Some(&f32w), None),
            "shape"
        );
        let b3 = t(&[3], DType::F32);
        assert_eq!(ln(&t(&[2, 3], DType::F16), &[3], None, Some(&b3)), "ok");
        let b3h = t(&[3], DType::F16);
        assert_eq!(
            ln(&t(&[2, 3], DType::F16), &[3], Some(&b3), Some(&b3h)),
            "dtype"
        );
        // no parameter, or parameters of the input's dtype: shapes first
        assert_eq!(ln(&t(&[2], DType::I32), &[], None, None), "shape");
        let i5 = t(&[5], DType::I32);
        assert_eq!(ln(&t(&[3, 1], DType::I32), &[], Some(&i5), None), "shape");

        use strata_tensor::Reduction::Mean;
        let mse = |x: &Tensor, y: &Tensor, w: Option<&Tensor>| class(x.mse_loss(y, Mean, w));
        assert_eq!(
            mse(&t(&[2, 3], DType::I64), &t(&[5, 1], DType::I64), None),
            "broadcast"
        );
        assert_eq!(
            mse(&t(&[2, 3], DType::I64), &t(&[3], DType::I64), None),
            "dtype"
        );
    }

    /// scatter_add compares the index with src dim by dim, reading
    /// `src.size(k)` (a dim error where src has fewer dims), before it
    /// checks src's rank.
    #[test]
    fn scatter_add_reads_src_sizes_before_its_rank() {
        let x = t(&[2, 3], DType::F32);
        let i = t(&[1, 1], DType::I64);
        assert_eq!(class(x.scatter_add(0, &i, &t(&[1], DType::F32))), "dim");
        assert_eq!(class(x.scatter_add(-2, &i, &t(&[2], DType::F32))), "dim");
        assert_eq!(
            class(x.scatter_add(0, &i, &t(&[1, 1, 1], DType::F32))),
            "shape"
        );
        assert_eq!(class(x.scatter_add(0, &i, &t(&[], DType::F32))), "shape");
        assert_eq!(
            class(x.scatter_add(0, &t(&[1], DType::I64), &t(&[1, 1], DType::F32))),
            "shape"
        );
        // an index too large for self comes first
        let big = t(&[1, 5], DType::I64);
        assert_eq!(class(x.scatter_add(0, &big, &t(&[1], DType::F32))), "shape");
        assert_eq!(class(x.scatter_add(0, &i, &t(&[1, 1], DType::F32))), "ok");
    }
}
